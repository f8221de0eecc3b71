"""The plan cache: canonical problem keys, plans on disk, and their relabelling (issue 13).

- ``problem_key``: sha256 of a name-free canonical form of the planning problem (``key``).
- ``PlanCache``: plans on disk (diskcache) by that key (``store``), relabelled on a hit (``relabel``).

Solving through the cache, and the layer decomposition that keys each segment, are the solve wing's
(``spyreopt.solving``): ``spyreopt.solve(graph, cache=..., decompose="layers")``.
"""

from spyreopt.cache.key import canonical_graph, problem_key
from spyreopt.cache.store import CacheStats, PlanCache

__all__ = ["CacheStats", "PlanCache", "canonical_graph", "problem_key"]
