"""infersight.diagnose.fleet: the rules per replica and per window over a metrics store.

- ``window``: one replica's window read from the engine's counters and histograms, and
  judged by the same rules as a run's;
- ``balance``: the load-imbalance verdict across replicas of one model;
- ``summary``: replicas grouped by their main verdict, the worst windows, the headline;
- ``diagnoser``: ``FleetDiagnoser``, which pages through the series and puts the three
  together.
"""

from infersight.diagnose.fleet.diagnoser import FleetDiagnoser

__all__ = ["FleetDiagnoser"]
