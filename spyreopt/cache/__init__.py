"""Plan cache and repeated-structure solving (issue 13).

- ``problem_key``: sha256 of a name-free canonical form of the planning problem.
- ``PlanCache``: plans on disk (diskcache) by that key, relabelled on a hit.
- ``solve_cached``: ``solve`` through a cache, optionally ``decompose="layers"``.
- ``solve_repeated``: split the schedule at single-tensor cuts, solve each
  distinct segment once, stitch and validate.
"""

from spyreopt.cache.cached import solve_cached
from spyreopt.cache.key import canonical_graph, problem_key
from spyreopt.cache.repeated import solve_repeated
from spyreopt.cache.segments import cut_points, split
from spyreopt.cache.store import CacheStats, PlanCache

__all__ = [
    "CacheStats",
    "PlanCache",
    "canonical_graph",
    "cut_points",
    "problem_key",
    "solve_cached",
    "solve_repeated",
    "split",
]
