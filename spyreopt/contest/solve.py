"""The default contest method: reduce exactly, search on both cores, HiGHS's MILP alongside when small.

Time runs from ``start`` (the caller's process start) to ``start + time_limit``
minus a margin for writing the answer. A run whose search stopped on the clock
says so (``cut_by_clock``); with ``max_rounds`` small enough to finish, the same
seed gives the same solution.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from spyreopt.contest import warm
from spyreopt.contest.exact import model_size, solve_exact
from spyreopt.contest.reduce import Reduced, reduce_instance
from spyreopt.contest.search import Result, Search, build_graph
from spyreopt.errors import InfeasibleError
from spyreopt.formats.iopddl import Instance

EXACT_MAX_BOOLS = 250_000  # edge booleans above which the whole-problem MILP (HiGHS) is not built
MARGIN = 0.04  # fraction of the limit kept for expanding and writing the answer
FALLBACK_SHARE = 0.2  # of the limit: kept for the fallback while the kernels compile
CHILD_GRACE = 0.3  # seconds past the deadline a search child may take to send its answer before it is killed


@dataclass
class Outcome:
    """The answer in the file's numbering, and how it was reached."""

    solution: list[int]
    reduced_cost: float
    method: str
    seconds_load: float
    seconds_to_best: float
    cut_by_clock: bool
    optimal: bool
    stats: dict
    limits: dict  # ``spyreopt.limits`` report: the stages cut and the fallback used, if any


def _child(r: Reduced, seed: int, deadline: float, max_rounds: int, conn) -> None:
    res = Search(r, build_graph(r), seed).run(deadline, max_rounds)
    conn.send(res)
    conn.close()


def _exact_child(r: Reduced, deadline: float, conn) -> None:
    conn.send(solve_exact(r, deadline))
    conn.close()


def _search_two(r: Reduced, seed: int, deadline: float, max_rounds: int, on_best) -> Result:
    """Two independent searches, the cheaper wins: here with ``seed`` and in a forked child with ``seed + 1``
    (the seed orders the forest moves, so the two follow different paths from the same TRW-S messages)."""
    ctx = mp.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(r, seed + 1, deadline, max_rounds, send), daemon=True)
    proc.start()
    mine = Search(r, build_graph(r), seed).run(deadline, max_rounds, on_best)
    other = recv.recv() if recv.poll(max(deadline - time.monotonic(), 0) + CHILD_GRACE) else None
    proc.join(CHILD_GRACE)
    if proc.is_alive():  # never waited for past the grace: its answer is dropped
        proc.kill()
        proc.join()
    if other is None or other.x is None:
        return mine
    if mine.x is None or (other.cost, 1) < (mine.cost, 0):
        return Result(
            other.x,
            other.cost,
            other.rounds,
            other.seconds_to_best,
            other.cut_by_clock or mine.cut_by_clock,
            other.seed,
        )
    mine.cut_by_clock = mine.cut_by_clock or other.cut_by_clock
    return mine


def solve_instance(
    inst: Instance,
    time_limit: float,
    *,
    seed: int = 0,
    start: float | None = None,
    max_rounds: int = 10**9,
    progress: Callable[[str], None] | None = None,
    fallback: Callable[[Instance, float], tuple[list[int], float, str] | None] | None = None,
    compiling: list | None = None,
) -> Outcome:
    """Solve a validated instance within ``time_limit`` seconds of ``start`` (monotonic; default now: reading
    the file is the caller's, inside the same limit).

    When the kernels are not compiled or loaded by ``FALLBACK_SHARE`` of the limit before the deadline, they are
    not waited for: ``fallback(instance, seconds)`` answers (solution, cost, its method's name), or when it
    gives None (or is None) ``lean`` (numpy alone, bounded time); the outcome's ``limits`` says so. ``compiling``:
    the children of ``warm.begin()`` when the caller started them before reading the file (they then compile
    while it reads)."""
    start = time.monotonic() if start is None else start
    deadline = start + time_limit * (1 - MARGIN) - 0.5
    compiling = warm.begin() if compiling is None else compiling
    say = progress or (lambda _m: None)
    if not warm.wait(compiling, deadline - FALLBACK_SHARE * time_limit):  # never waited for past this
        say(f"[{time.monotonic() - start:5.1f}s] kernels not compiled in time: a fallback answers")
        return _fallback(fallback, inst, deadline, time.monotonic() - start)
    r = reduce_instance(inst)
    t_load = time.monotonic() - start
    say(f"[{t_load:5.1f}s] loaded and reduced: {inst.n} nodes -> {r.n} groups, {len(r.ea)} edges")
    t_ready = time.monotonic() - start  # the searches' clocks start here
    say(f"[{t_ready:5.1f}s] kernels compiled or loaded from the cache")

    def on_best(cost: float, rounds: int) -> None:
        say(f"[{time.monotonic() - start:5.1f}s] round {rounds}: cost {cost:,.0f}")

    small = model_size(r) <= EXACT_MAX_BOOLS and int((r.k > 1).sum()) <= 3000
    if small:  # MILP in a child (killed at the deadline: HiGHS can overrun its own limit), search here
        say(f"[{time.monotonic() - start:5.1f}s] MILP (HiGHS) on the whole reduced problem, search alongside")
        ctx = mp.get_context("fork")
        recv, send = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_exact_child, args=(r, deadline, send), daemon=True)
        proc.start()
        res = Search(r, build_graph(r), seed).run(deadline, max_rounds, on_best, stop=recv.poll)
        res.seconds_to_best += t_ready
        x, optimal = recv.recv() if recv.poll(max(deadline - time.monotonic(), 0.0)) else (None, False)
        if proc.is_alive():
            proc.kill()
        proc.join()
        method = "trws+forest-dp, milp"
        if x is not None:
            c = Search(r, build_graph(r), seed).cost(x)
            if res.x is None or c < res.cost:
                res = Result(x, c, res.rounds, time.monotonic() - start, not optimal, seed)
        cut = not optimal
    else:
        res = _search_two(r, seed, deadline, max_rounds, on_best)
        method, optimal, cut = "trws+forest-dp x2", False, res.cut_by_clock
        res.seconds_to_best += t_ready
    if res.x is None:
        raise InfeasibleError(f"{inst.name}: no solution within the usage limit {r.usage_limit} found in time")
    stats = dict(r.stats, nodes=inst.n, edges=inst.m)
    report = {"cut": [], "fallback": None}  # the engine's search always runs to the clock: that is its normal end
    return Outcome(r.expand(res.x), res.cost, method, t_load, res.seconds_to_best, cut, optimal, stats, report)


def lean(inst) -> list[int] | None:
    """Per node the strategy of least usage x lifetime (then least cost), in numpy alone: the answer when the
    kernels are not compiled in time. It never raises the usage of a node above its least-usage strategy's, so
    it is feasible whenever those are; None when it is not within the limit."""
    node = np.repeat(np.arange(inst.n), inst.k)
    weight = inst.usage.astype(np.float64) * (inst.hi - inst.lo)[node]
    order = np.lexsort((np.arange(len(node)), inst.cost, weight, node))  # per node: least weight, cost, index
    first = order[np.r_[0, np.flatnonzero(np.diff(node[order])) + 1]]
    choice = first - inst.off[:-1]
    if inst.usage_limit is not None and inst.n:
        steps = np.zeros(int(inst.hi.max()) + 2, np.int64)
        np.add.at(steps, inst.lo, inst.usage[first])
        np.subtract.at(steps, inst.hi, inst.usage[first])
        if np.cumsum(steps).max() > inst.usage_limit:
            return None
    return choice.tolist()


def _fallback(fallback, inst: Instance, deadline: float, t_load: float) -> Outcome:
    """``fallback(instance, seconds)`` if it answers, else ``lean`` (no compiled kernel either way): below
    the engine, and the outcome says so."""
    began = time.monotonic()
    answer = fallback(inst, max(deadline - began, 0.1)) if fallback is not None else None
    if answer is not None:
        solution, cost, method = answer
    else:
        solution, method = lean(inst), "lean"
        if solution is None:
            raise InfeasibleError(f"{inst.name}: the kernels were not compiled in time and the least-usage "
                                  "strategies exceed the usage limit")  # fmt: skip
        cost = float("nan")
    stats = {"nodes": inst.n, "edges": inst.m}
    report = {"cut": [{"stage": "trws+forest-dp", "by": "clock", "reached_us": None}], "fallback": method}
    took = time.monotonic() - began + t_load
    return Outcome(solution, cost, f"{method} (fallback: kernels not compiled in time)", t_load, took, True, False,
                   stats, report)  # fmt: skip


def stderr_progress(message: str) -> None:
    """Progress lines: overwritten in place on a terminal, one terse line each otherwise."""
    if sys.stderr.isatty():
        print("\r" + message.ljust(78), end="", file=sys.stderr, flush=True)
    else:
        print(message, file=sys.stderr, flush=True)
