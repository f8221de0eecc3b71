"""Compile the search's kernels on both cores while the instance loads.

numba keeps compiled kernels in its disk cache (``cache=True``), but the first
run from a fresh clone compiles them all: about 30 s of an idle core, half of a
60 s contest limit. Two forked children compile disjoint halves on a three-node
instance (built by the same loader and reductions, so the array types match and
the parent later loads both halves from the disk cache) while the parent reads
and reduces the real instance. With a warm cache each child only loads and exits.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import time

import numpy as np

from spyreopt.contest.reduce import Reduced, reduce_instance
from spyreopt.contest.search import Search, build_graph
from spyreopt.formats.iopddl import validate


def tiny() -> Reduced:
    """Three nodes of two strategies in a path, whose memory is binding: every kernel has work to do."""
    doc = {
        "problem": {
            "name": "warm",
            "nodes": {"intervals": [[0, 2], [1, 3], [2, 4]], "costs": [[1, 2]] * 3, "usages": [[3, 1]] * 3},
            "edges": {"nodes": [[0, 1], [1, 2]], "costs": [[0, 5, 5, 0], [0, 4, 4, 0]]},
            "usage_limit": 4,
        }
    }
    return reduce_instance(validate(doc))


def _inner() -> None:
    """The priced problem's kernels: TRW-S, the forest constructions and their DP, the priced cost."""
    r = tiny()
    s = Search(r, build_graph(r), 0)
    zero = np.zeros(len(r.cost))
    s._trws(zero)
    s._dp(zero)


def _outer() -> None:
    """The feasibility kernels: lean start, profile, prices, repair and polish, the cost."""
    r = tiny()
    s = Search(r, build_graph(r), 0)
    x = np.zeros(r.n, np.int64)
    s.cost(x)
    s._pens()
    s.feasible_copy(x, s.profile(x))


def _niced(compile_half) -> None:
    """Compile at the lowest priority: the parent's reading and reducing, on the critical path, come first (a
    short limit that the compile cannot meet then loses nothing to it)."""
    os.nice(19)
    compile_half()


def start() -> list:
    """Fork the two compiling children; ``wait`` for them before the search's first kernel call."""
    ctx = mp.get_context("fork")
    procs = [ctx.Process(target=_niced, args=(f,), daemon=True) for f in (_inner, _outer)]
    for p in procs:
        p.start()
    return procs


def begin() -> list:
    """The compiling children when the disk cache lacks a kernel (none when it has them all: they load at once)."""
    return [] if cached() else start()


def wait(procs: list, deadline: float) -> bool:
    """Join the children until ``deadline`` (``time.monotonic``); True when both finished (the kernels are then
    in the disk cache and load in a fraction of a second). At the deadline the children still compiling are
    killed and False returned (as for a child that failed): the caller answers without the kernels. What they
    compiled stays cached, so a cold cache warms over successive runs."""
    for p in procs:
        p.join(max(deadline - time.monotonic(), 0.0))
    for p in procs:
        if p.is_alive():
            p.kill()
            p.join()
    return all(p.exitcode == 0 for p in procs)


_READY: list[bool] = []  # set once the children have compiled every kernel in this process's lifetime


def cached() -> bool:
    """Whether numba's disk cache holds an index for every kernel of the search and the reductions (it then loads
    them in a fraction of a second); False when it cannot tell."""
    from spyreopt.contest import kernels, reduce, trws

    try:
        paths = [
            f._cache._cache_file._index_path
            for m in (kernels, reduce, trws)
            for f in vars(m).values()
            if getattr(f, "_cache", None) is not None
            and hasattr(f._cache, "_cache_file")
            and f.targetoptions.get("inline") != "always"  # inlined into its callers, never cached alone
        ]
    except AttributeError:  # another numba's internals: the children will tell
        return False
    return bool(paths) and all(os.path.exists(p) for p in paths)


def ready(seconds: float) -> bool:
    """Whether the kernels are compiled or loaded from the cache within ``seconds``: at once when the disk cache
    has them all, else found by the two children of ``start`` (once per process); never waits longer."""
    if not _READY and (cached() or wait(start(), time.monotonic() + max(seconds, 0.0))):
        _READY.append(True)
    return bool(_READY)
