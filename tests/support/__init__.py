"""Helpers only the tests and benchmarks use (not shipped in the wheel): a real
``redis-server`` on a free port, a local two-node Ray cluster, a raw-socket HTTP client
for slow and malformed requests, Hypothesis strategies over request framing, a
simulated FIFO slot server that yields request records with their true queue waits,
and real-time helpers for paced tests. The benchmarks keep their own copies (``benchmarks/_*.py``):
they import only the installed package and their own helpers."""
