"""`place` and `minimize_capacity`: input checks, method dispatch, time budget, and a final validation."""

from __future__ import annotations

import time
from collections.abc import Sequence
from numbers import Integral

from spyreopt.errors import SolverError
from spyreopt.solvers.placement.bestfit import best_fit, best_fit_lowest
from spyreopt.solvers.placement.diagnose import diagnose, peak
from spyreopt.solvers.placement.search import search_place
from spyreopt.solvers.placement.sweep import Sweep, sweep
from spyreopt.solvers.placement.types import Buffer, PlacementInputError, PlacementResult
from spyreopt.solvers.placement.validate import validate

METHODS = ("auto", "bestfit", "cpsat", "search")

# Share of the time left that "auto" gives the exact search before CP-SAT, and
# that each capacity probe of `minimize_capacity` may use.
_SEARCH_SHARE = 2 / 3
_PROBE_SHARE = 1 / 2


def place(
    buffers: Sequence[Buffer],
    capacity: int,
    *,
    method: str = "auto",
    time_limit: float = 10.0,
    seed: int = 0,
) -> PlacementResult:
    """Offsets for every buffer within capacity, a proof that none exist, or a timeout.

    "auto" runs best-fit, then the exact search, then CP-SAT with the time
    left, within `time_limit` overall. `seed` feeds CP-SAT; the other methods
    are deterministic without one. An infeasible result names the method
    "bound" when the live bytes or the pre-placed buffers alone rule it out.
    """
    start = time.monotonic()
    buffers = _checked(buffers, method)
    if not isinstance(capacity, Integral) or isinstance(capacity, bool) or capacity < 0:
        raise PlacementInputError(f"capacity must be a non-negative integer, got {capacity!r}")
    capacity = int(capacity)
    if not buffers:
        return PlacementResult("placed", {}, method, time.monotonic() - start, {"buffers": 0, "height": 0})
    sw = sweep(buffers)
    live, k = peak(buffers, sw)
    stats: dict = {"buffers": len(buffers), "peak_live": live, "peak_time": sw.section_time[k]}
    reason = diagnose(buffers, capacity, sw)
    if reason is not None:
        stats.update(reason.details)
        return PlacementResult("infeasible", None, "bound", time.monotonic() - start, stats, reason.message)
    status, offsets, used = _run(buffers, capacity, sw, method, start + time_limit, seed, stats)
    if offsets is not None:
        result = _placed(buffers, capacity, offsets, used, stats)
    else:
        result = PlacementResult(status, None, used, 0.0, stats, _failure_message(status, used, capacity, stats))
    result.seconds = time.monotonic() - start
    return result


def minimize_capacity(
    buffers: Sequence[Buffer], *, time_limit: float = 10.0, method: str = "auto", seed: int = 0
) -> PlacementResult:
    """Offsets with the smallest heap found; stats["capacity"] is that height.

    Best-fit gives a first height; "search" then probes capacities from the
    live-bytes lower bound upward by bisection, "cpsat" minimises the height
    from the best-fit hint, and "auto" does both, in that order.
    stats["proved_optimal"] says whether no smaller capacity can work.
    """
    start = time.monotonic()
    deadline = start + time_limit
    buffers = _checked(buffers, method)
    if not buffers:
        stats = {"buffers": 0, "capacity": 0, "lower_bound": 0, "proved_optimal": True}
        return PlacementResult("placed", {}, method, time.monotonic() - start, stats)
    sw = sweep(buffers)
    live, _ = peak(buffers, sw)
    lower = max([live] + [b.offset + b.size for b in buffers if b.offset is not None])
    stats: dict = {"buffers": len(buffers), "peak_live": live, "lower_bound": lower}
    unbounded = sum(b.size + b.alignment for b in buffers) + lower
    reason = diagnose(buffers, unbounded, sw)
    if reason is not None:
        stats.update(reason.details)
        return PlacementResult("infeasible", None, "bound", time.monotonic() - start, stats, reason.message)
    offsets = best_fit_lowest(buffers, sw)
    best, used = _height(buffers, offsets), "bestfit"
    proved_lower = lower
    if method in ("auto", "search"):
        offsets, best, proved_lower, found_any = _bisect(buffers, sw, offsets, best, lower, deadline, stats)
        used = "search" if found_any else used
    if method == "cpsat" or (method == "auto" and proved_lower < best and _left(deadline) > 0):
        from spyreopt.solvers.placement.cpsat import cpsat_place  # OR-Tools loads only when CP-SAT runs

        status, found, cp_stats = cpsat_place(buffers, best, _left(deadline), seed, minimize_height=True, hint=offsets)
        stats.update(cp_stats)
        if found is not None and _height(buffers, found) < best:
            offsets, best, used = found, _height(buffers, found), "cpsat"
        if found is not None:
            proved_lower = max(proved_lower, cp_stats["best_bound"])
    stats.update(capacity=best, proved_optimal=proved_lower >= best, proved_lower_bound=min(proved_lower, best))
    result = _placed(buffers, best, offsets, used, stats)
    result.message = f"capacity {best}; live-bytes lower bound {lower}" + (
        "; proved optimal" if proved_lower >= best else f"; no capacity below {proved_lower} can work"
    )
    result.seconds = time.monotonic() - start
    return result


def _bisect(
    buffers: list[Buffer], sw: Sweep, offsets: list[int], best: int, lower: int, deadline: float, stats: dict
) -> tuple[list[int], int, int, bool]:
    """Probe capacities between the proved lower bound and the best height with the exact search.

    Starts at the lower bound (production instances often pack perfectly). A
    probe that times out proves nothing, so probing moves above it; one that is
    infeasible raises the proved bound. Returns (offsets, height, proved lower
    bound, whether the search improved on the given offsets).
    """
    proved, untried, found_any = lower, lower, False
    stats["nodes"] = 0
    while untried < best and _left(deadline) > 0:
        probe = lower if untried == lower == proved else (untried + best - 1) // 2
        status, found, search_stats = search_place(buffers, probe, _left(deadline) * _PROBE_SHARE, sw)
        stats["nodes"] += search_stats["nodes"]
        if found is not None:
            offsets, best, found_any = found, _height(buffers, found), True
        else:
            untried = probe + 1
            if status == "infeasible":
                proved = probe + 1  # infeasibility is monotone: every smaller capacity fails too
    return offsets, best, proved, found_any


def _checked(buffers: Sequence[Buffer], method: str) -> list[Buffer]:
    if method not in METHODS:
        raise PlacementInputError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    buffers = list(buffers)
    seen: set[str] = set()
    for b in buffers:
        if not isinstance(b, Buffer):
            raise PlacementInputError(f"expected a Buffer, got {type(b).__name__}")
        if b.id in seen:
            raise PlacementInputError(f"duplicate buffer id {b.id!r}")
        seen.add(b.id)
    return buffers


def _run(
    buffers: list[Buffer], capacity: int, sw: Sweep, method: str, deadline: float, seed: int, stats: dict
) -> tuple[str, list[int] | None, str]:
    """(status, offsets by index, method that decided) for one method or the auto chain."""
    if method in ("auto", "bestfit"):
        offsets = best_fit(buffers, capacity, sw)
        if offsets is not None or method == "bestfit":
            return ("placed" if offsets is not None else "timeout"), offsets, "bestfit"
    if method in ("auto", "search"):
        share = _SEARCH_SHARE if method == "auto" else 1.0
        status, offsets, search_stats = search_place(buffers, capacity, _left(deadline) * share, sw)
        stats.update(search_stats)
        if status != "timeout" or method == "search":
            return status, offsets, "search"
    from spyreopt.solvers.placement.cpsat import cpsat_place  # OR-Tools loads only when CP-SAT runs

    status, offsets, cp_stats = cpsat_place(buffers, capacity, _left(deadline), seed)
    stats.update(cp_stats)
    return status, offsets, "cpsat"


def _placed(buffers: list[Buffer], capacity: int, offsets: list[int], used: str, stats: dict) -> PlacementResult:
    """The result for a found placement, after checking it with the independent validator."""
    by_id = {b.id: o for b, o in zip(buffers, offsets)}
    issues = validate(buffers, by_id, capacity)
    if issues:
        raise SolverError(f"placement method {used!r} produced an invalid placement: {issues[0].message}")
    stats["height"] = _height(buffers, offsets)
    return PlacementResult("placed", by_id, used, 0.0, stats, f"placed {len(buffers)} buffers by {used}")


def _failure_message(status: str, used: str, capacity: int, stats: dict) -> str:
    where = f"peak live bytes {stats['peak_live']} at time {stats['peak_time']} fit in capacity {capacity}"
    if status == "infeasible":
        prover = "exhaustive search" if used == "search" else "CP-SAT"
        return (
            f"no placement exists: {where}, but {prover} proved that fragmentation cannot be avoided; "
            "minimize_capacity() finds the smallest capacity that works"
        )
    if used == "bestfit":
        return f"best-fit found no placement; {where}; best-fit is a heuristic, method 'search' can decide"
    return f"no placement found in the time limit, and none proved impossible; {where}"


def _height(buffers: Sequence[Buffer], offsets: Sequence[int]) -> int:
    return max(o + b.size for o, b in zip(offsets, buffers))


def _left(deadline: float) -> float:
    return max(deadline - time.monotonic(), 0.0)
