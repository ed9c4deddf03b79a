"""infersight.flags: the settings of bench and tune, each declared once.

A field is declared with its default, constraints and help (:mod:`.declare`); the
configuration objects validate and read the environment from the declaration, and the
CLI makes every command's option from it. The package imports nothing but core, so the
CLI builds its options at start without importing the load generator or the search.
"""
