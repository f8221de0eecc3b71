"""PlanCache: plans on disk by canonical problem key, shared safely by concurrent processes.

Built on ``diskcache`` (SQLite-backed, process- and thread-safe, bounded by
``size_limit`` with least-recently-stored eviction). Plans are stored in
canonical names (see ``relabel``) so one entry serves every renamed copy of a
problem. A hit is checked with ``Plan.validate`` before it is returned unless
``validate=False``: an entry that no longer validates (say, the cost model
changed) is dropped and counted as ``stale``, and the caller solves afresh.
"""

from __future__ import annotations

import json
import os
import zlib
from dataclasses import dataclass
from pathlib import Path

import diskcache

from spyreopt.cache.key import Canonical
from spyreopt.cache.relabel import from_canonical, to_canonical
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import FormatError, PlanError
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan

DEFAULT_SIZE_LIMIT = 1 << 30
COUNTERS = ("hits", "misses", "stale")


@dataclass(frozen=True)
class CacheStats:
    hits: int
    misses: int
    stale: int  # entries found but dropped because they no longer validate
    entries: int
    bytes: int  # on-disk size of the plan store

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))


class PlanCache:
    """A directory of plans keyed by ``problem_key``; use as a context manager or call ``close``."""

    def __init__(self, directory: str | os.PathLike, *, size_limit: int = DEFAULT_SIZE_LIMIT, validate: bool = True):
        self.directory = Path(directory)
        self.validate = validate
        self._plans = diskcache.Cache(str(self.directory / "plans"), size_limit=size_limit)
        # counters live apart from the plans so eviction never drops them; incr is atomic across processes
        self._counters = diskcache.Cache(str(self.directory / "counters"), eviction_policy="none")

    @classmethod
    def of(cls, cache: PlanCache | str | os.PathLike) -> PlanCache:
        return cache if isinstance(cache, PlanCache) else cls(cache)

    def __enter__(self) -> PlanCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._plans.close()
        self._counters.close()

    def __getstate__(self) -> dict:  # picklable: workers reopen the same directory
        return {"directory": self.directory, "validate": self.validate, "size_limit": self._plans.size_limit}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["directory"], size_limit=state["size_limit"], validate=state["validate"])

    # ---- raw entries (canonical names) ---------------------------------------
    def get_canonical(self, key: str) -> dict | None:
        blob = self._plans.get(key)
        if blob is None:
            return None
        return json.loads(zlib.decompress(blob))

    def put_canonical(self, key: str, data: dict) -> None:
        self._plans.set(key, zlib.compress(json.dumps(data, sort_keys=True).encode()))

    def count(self, counter: str) -> None:
        self._counters.incr(counter, default=0)

    # ---- plans in the caller's names ------------------------------------------
    def get(
        self, key: str, c: Canonical, graph: Graph, hardware: HardwareSpec, coefficients: Coefficients
    ) -> Plan | None:
        """The stored plan relabelled to ``graph``'s names, or None (counted as a miss or a stale entry)."""
        data = self.get_canonical(key)
        if data is None:
            self.count("misses")
            return None
        try:
            plan = from_canonical(data, c, graph, hardware, coefficients)
            if self.validate:
                plan.validate()
        except (PlanError, FormatError, KeyError):
            self._plans.delete(key)
            self.count("stale")
            return None
        self.count("hits")
        return plan

    def put(self, key: str, plan: Plan, c: Canonical) -> None:
        self.put_canonical(key, to_canonical(plan, c))

    # ---- bookkeeping ------------------------------------------------------------
    def stats(self) -> CacheStats:
        counts = {k: int(self._counters.get(k, 0)) for k in COUNTERS}
        return CacheStats(entries=len(self._plans), bytes=int(self._plans.volume()), **counts)

    def clear(self) -> int:
        """Drop every plan and reset the counters; returns how many plans were dropped."""
        n = self._plans.clear()
        self._counters.clear()
        return n

    def __len__(self) -> int:
        return len(self._plans)

    def __repr__(self) -> str:
        return f"PlanCache({str(self.directory)!r})"
