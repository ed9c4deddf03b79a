"""One level's schedule spread over several load generators.

- ``workers``: ``--workers N`` processes on this machine;
- ``ray_extra``, ``ray_place``, ``ray_actor``, ``ray_workers``: ``--ray``, the workers as
  Ray actors placed on a cluster's nodes and driven from here.

Each worker builds its own client from a :class:`infersight.bench.runtime.ClientSpec`
and runs its share with the same executor as a single process.
"""

from infersight.bench.distributed.ray_extra import INSTALL_HINT, ray_installed
from infersight.bench.distributed.ray_workers import RayWorkers, ray_pool
from infersight.bench.distributed.workers import run_level_in_workers

__all__ = ["INSTALL_HINT", "RayWorkers", "ray_installed", "ray_pool", "run_level_in_workers"]
