"""Helpers only the tests and benchmarks use (not shipped in the wheel): a real
``redis-server`` on a free port, a local two-node Ray cluster, a raw-socket HTTP client
for slow and malformed requests, Hypothesis strategies over request framing, a
simulated FIFO slot server that yields request records with their true queue waits,
real-time helpers for paced tests, and ``waiting.until`` (wait for an event, not for
a number of seconds). The benchmarks keep their own copies (``benchmarks/_*.py``):
they import only the installed package and their own helpers; what both share (the
other tools' runs, the advice comparison) lives in ``infersight_testkit``."""
