"""infersight.bench.level: a load level, from its name to its run.

- ``spec``: one level as the configuration names it (``c=4``, ``r=2.5``, ``throughput``)
  and what the run stores of it;
- ``order``: which level runs next (fixed lists, ``--sweep auto``, ``--find-max``);
- ``work``: the types the executor, the streamed replay and the workers pass around
  (a level's work, its outcome, one request of a streamed schedule);
- ``run``: one fixed level planned and run here, in ``--workers`` processes or on Ray.

Only the leaf modules' types are re-exported: ``run`` imports the executor and the
workers, which import ``work``, so the runner imports ``run`` itself.
"""

from infersight.bench.level.order import LevelOrder
from infersight.bench.level.spec import LevelSpec
from infersight.bench.level.work import FeedItem, LevelOutcome, LevelWork

__all__ = ["FeedItem", "LevelOrder", "LevelOutcome", "LevelSpec", "LevelWork"]
