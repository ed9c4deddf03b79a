"""infersight.diagnose.rules: the diagnosis rules of docs/design.md section 5.

- ``base``: the rule input, thresholds and evidence helpers every rule shares;
- ``client``, ``memory``, ``overload``, ``queue``, ``device``, ``idle``, ``cache``: the
  rules, one module per kind of limiter;
- ``registry``: the rules in the order they are tried, and ``evaluate``, which applies
  them to one window.

Nothing is re-exported here: importing ``base`` (as ``diagnose.fixes`` does for
``FixLine``) must not load every rule, since the rules import ``diagnose.fixes``.
Callers import ``registry`` (``RuleInput``, ``evaluate``) or the module they need.
"""

__all__: list[str] = []
