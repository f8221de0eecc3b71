"""CP-SAT backend: the exact model of ``cpsat_model``, warm-started, deterministic, never worse than greedy.

1. Warm start: the ``hint`` (a Solution or an assignment) or else the greedy
   backend's plan, checked with ``Formulation.violations`` (an invalid one only
   guides the search) and mapped through the dominance replacements (no worse,
   still valid). It is the incumbent: whatever CP-SAT returns is kept only if
   it is at least as good, otherwise the incumbent comes back with status
   ``"feasible"`` and ``stats["source"] == "greedy-hint"`` (or ``"hint"``).
   Every variable of the model, auxiliary ones included, is hinted.
2. Exact reductions and the model (``cpsat_model``). The sentinel rule (IOPDDL's
   1e18 costs) is exact when the reduced model is feasible; if CP-SAT proves it
   infeasible, the model is rebuilt without that rule and, if its objective
   would leave int64, with every cost excess capped (a surrogate objective:
   solutions are still evaluated exactly, but neither optimality nor a bound
   is claimed).
3. Search. A model whose estimated size (variables plus constraints) is at most
   ``FULL_MODEL_SIZE_PER_SECOND`` (``..._PLACED`` with addresses) per second of
   the limit is solved whole.
   A larger one is solved by large-neighbourhood search: a window of nodes
   keeps its candidates, every other node is fixed to the incumbent, and
   buffers not live during the window keep their addresses. Windows alternate
   between a slice of the schedule (nodes in interval order, sliding by half a
   width) and the graph neighbourhood of a costly term of the incumbent (terms
   by decreasing excess over their minimum); they grow after a window is solved
   to optimality quickly and shrink after one times out without gain. A window
   that covers every node is the whole model, so "optimal" is still reported
   when proven. Whenever CP-SAT gives no bound (LNS, or no solution in time)
   the bound reported is the sum of the cost terms' minima.
4. Determinism: CP-SAT runs with ``num_workers=workers`` (``interleave_search``
   when more than one), ``random_seed=seed`` and a deterministic-time limit that
   depends only on ``time_limit`` and on the mode (``DTIME_PER_SECOND``, or
   ``DTIME_PER_SECOND_PLACED`` for a whole model with addresses; each LNS window is also
   charged ``WINDOW_COST`` per node and edge for its Python work). The
   wall-clock limit is a safety net at the deadline, and
   ``stats["wall_limit_hit"]`` says when it (and not the deterministic budget)
   stopped a search, the one case where a rerun may differ. The option
   ``deterministic=False`` gives the search the whole wall-clock budget instead.
5. Parameters: ``linearization_level=2`` (the LP of the pair links is what
   proves IOPDDL-like instances) and no probing in presolve (it can spend a
   whole budget before the hint is tried).

The reported objective is always ``Formulation.evaluate`` of the returned
assignment; the bound is CP-SAT's best objective bound in the Formulation's
unit (rounded up: objectives are integers).
"""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model.formulation import BufferKey, Formulation, Solution
from spyreopt.solvers.cpsat_model import (
    Built,
    Reduction,
    build_model,
    estimate_size,
    memory_limit,
    reduce_formulation,
    term_minima_bound,
)

# CP-SAT deterministic time per wall second, measured with one worker: about 0.19 on IOPDDL and in LNS windows,
# 0.1 to 1.0 for a whole model with a NoOverlap2D placement (0.7-1.2 on the Spyre kernels, whose proofs need up
# to 5 units: SDPA 4.1, MHA 5.2). The placed rate is set so those proofs fit in 10 s on an unloaded 2-core machine;
# where a model runs slower than that, the wall clock ends the run and stats["wall_limit_hit"] says so.
DTIME_PER_SECOND = 0.16
DTIME_PER_SECOND_PLACED = 0.6
WINDOW_COST = 1e-4  # deterministic-time charge per node and edge for building one LNS window (Python work)
GREEDY_SHARE = 0.1  # share of the time limit the greedy warm start may use
FULL_MODEL_SIZE_PER_SECOND = 4000  # variables + constraints the whole model may have per second of limit
FULL_MODEL_SIZE_PER_SECOND_PLACED = 4000  # with addresses; kernels up to ~40k solve whole in 10 s; larger models go to LNS
MIN_WINDOW = 8
OPTIONS = {"deterministic", "lns", "log", "window"}


@dataclass
class Incumbent:
    assignment: tuple[int, ...]
    offsets: dict[BufferKey, int]
    objective: int
    source: str
    valid: bool = True  # an invalid user hint still guides the search but is never returned


@dataclass
class Run:
    """What the search phase produced, for the report."""

    best: Incumbent | None
    status: str  # optimal | timeout | infeasible | unknown
    bound: int | None = None
    stats: dict = field(default_factory=dict)


def solve(f: Formulation, *, time_limit: float, seed: int, workers: int = 1, hint=None, **options) -> Solution:
    """Best plan within ``time_limit`` (module docstring). Options: ``lns`` ("auto", True, False),
    ``window`` (first LNS window width), ``deterministic`` (default True), ``log`` (CP-SAT's search log)."""
    start = time.perf_counter()
    deadline = start + time_limit
    unknown = set(options) - OPTIONS
    if unknown:
        raise SolverError(f"cpsat: unknown option(s) {sorted(unknown)}; known: {sorted(OPTIONS)}")
    if not isinstance(workers, int) or workers < 1:
        raise SolverError(f"cpsat: workers must be a positive integer, got {workers!r}")
    lns = options.get("lns", "auto")
    if lns not in ("auto", True, False):
        raise SolverError(f"cpsat: option lns must be 'auto', True or False, got {lns!r}")
    window = options.get("window")
    if window is not None and (not isinstance(window, int) or window < 1):
        raise SolverError(f"cpsat: option window must be a positive integer, got {window!r}")

    stats: dict = {"workers": workers, "seed": seed}
    warm = _warm_start(f, hint, time_limit, seed, stats)
    red = reduce_formulation(f)
    if red.conflict and red.threshold is not None:
        stats["sentinel_rule"] = f"dropped: {red.conflict}"
        red = reduce_formulation(f, forbid_huge=False)
    stats["reductions"] = dict(red.counts)
    stats["sentinel_threshold"] = red.threshold
    if red.conflict:
        if warm is not None and warm.valid:
            raise SolverError(f"cpsat: reductions found a conflict ({red.conflict}) but the warm start is valid")
        return _infeasible(f, red, red.conflict, stats, start)
    incumbent = _mapped(f, red, warm, stats)
    guide = incumbent or warm

    seconds = time_limit * (1 - GREEDY_SHARE)  # what the search may use; greedy had the rest
    if not options.get("deterministic", True):  # the whole wall-clock budget, at the price of run-to-run differences
        seconds = math.inf
    search = _Search(f, seed, workers, deadline, bool(options.get("log", False)))
    run = search.run(red, incumbent, guide, seconds, lns, window)
    if run.status == "infeasible" and red.threshold is not None:
        stats["sentinel_rule"] = "dropped: the model without sentinel entries is infeasible"
        red = reduce_formulation(f, forbid_huge=False)
        incumbent = _mapped(f, red, warm, stats)
        run = search.run(red, incumbent, incumbent or warm, seconds, lns, window)
    stats.update(run.stats)
    if run.bound is None and run.status != "infeasible":
        run.bound = term_minima_bound(f, red)  # CP-SAT gave none (LNS, or no solution): the trivial bound
        stats["bound_source"] = "term minima"
    if run.status == "infeasible":
        if incumbent is not None:
            raise SolverError("cpsat: CP-SAT proved the model infeasible but the warm start is valid (model bug)")
        return _infeasible(f, red, "CP-SAT proved that no assignment satisfies the constraints", stats, start)
    return _report(f, run, incumbent, stats, start)


# ---------------------------------------------------------------- warm start
def _warm_start(f: Formulation, hint, time_limit: float, seed: int, stats: dict) -> Incumbent | None:
    """The hint, or greedy's plan; None (said in stats) when neither gives a valid plan."""
    if hint is not None:
        if isinstance(hint, Solution):
            assignment, offsets = tuple(int(s) for s in hint.assignment), dict(hint.offsets)
        else:
            assignment, offsets = tuple(int(s) for s in hint), {}
        try:
            bad = f.violations(assignment, offsets)
        except ValueError as exc:
            raise SolverError(f"cpsat: hint does not fit the formulation: {exc}") from exc
        if bad:
            stats["hint"] = f"invalid, used only as a search hint: {bad[0]}"
            return Incumbent(assignment, offsets, f.evaluate(assignment), "hint", valid=False)
        stats["hint"] = "given"
        return Incumbent(assignment, offsets, f.evaluate(assignment), "hint")
    try:
        from spyreopt.solvers import greedy
    except ImportError as exc:
        stats["hint"] = f"greedy unavailable: {exc}"
        return None
    try:
        sol = greedy.solve(f, time_limit=max(GREEDY_SHARE * time_limit, 0.05), seed=seed)
    except InfeasibleError as exc:
        stats["hint"] = f"greedy found no plan: {exc}"
        return None
    assignment, offsets = tuple(sol.assignment), dict(sol.offsets)
    bad = f.violations(assignment, offsets)
    stats["greedy_objective"] = sol.objective
    if bad:  # never trusted blindly: an invalid greedy plan only guides the search
        stats["hint"] = f"greedy plan invalid, used only as a search hint: {bad[0]}"
        return Incumbent(assignment, offsets, f.evaluate(assignment), "greedy-hint", valid=False)
    stats["hint"] = "greedy"
    return Incumbent(assignment, offsets, f.evaluate(assignment), "greedy-hint")


def _mapped(f: Formulation, red: Reduction, warm: Incumbent | None, stats: dict) -> Incumbent | None:
    """The warm start with dominated candidates replaced, when that stays valid and is no worse."""
    if warm is None or not warm.valid:
        return None
    a = tuple(red.map_assignment(warm.assignment))
    if a == warm.assignment:
        return warm
    offsets = {b.key: warm.offsets[b.key] for b in f.buffers(a) if b.key in warm.offsets}
    if f.violations(a, offsets if f.placement else None):
        return warm
    value = f.evaluate(a)
    if value > warm.objective:
        return warm
    stats["hint_mapped_gain"] = warm.objective - value
    return Incumbent(a, offsets, value, warm.source)


# ---------------------------------------------------------------- search
class _Search:
    """Full-model solve or schedule-window LNS, with one set of CP-SAT parameters."""

    def __init__(self, f: Formulation, seed: int, workers: int, deadline: float, log: bool):
        self.f, self.seed, self.workers, self.deadline, self.log = f, seed, workers, deadline, log
        self.wall_hit = False

    def _solver(self, dtime: float) -> cp_model.CpSolver:
        s = cp_model.CpSolver()
        p = s.parameters
        p.num_workers = self.workers
        p.interleave_search = self.workers > 1
        p.random_seed = self.seed
        p.max_deterministic_time = max(dtime, 0.01)
        p.linearization_level = 2  # the LP of the pair links is what proves IOPDDL-like instances
        p.cp_model_probing_level = 0  # probing in presolve can eat a whole budget before the hint is tried
        p.max_time_in_seconds = max(self.deadline - time.perf_counter(), 0.05)
        p.log_search_progress = self.log
        return s

    def _solve(self, built: Built, dtime: float, hint: Incumbent | None, fixed=None):
        if hint is not None:
            built.hint(self.f, hint.assignment, hint.offsets)
        solver = self._solver(dtime)
        code = solver.solve(built.model)
        if code == cp_model.MODEL_INVALID:
            raise SolverError(f"cpsat: invalid model: {built.model.validate()}")
        if solver.wall_time >= solver.parameters.max_time_in_seconds * 0.99:
            self.wall_hit = True
        found = None
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            a, offsets = built.decode(self.f, solver, fixed)
            bad = self.f.violations(a, offsets if self.f.placement else None)
            if bad:
                raise SolverError(f"cpsat: decoded solution is invalid (model bug): {bad[:3]}")
            found = Incumbent(a, offsets, self.f.evaluate(a), "cpsat")
        return code, solver, found

    def run(
        self, red: Reduction, incumbent: Incumbent | None, guide: Incumbent | None, seconds: float, lns, window
    ) -> Run:
        """Solve within ``seconds`` of search (inf: until the deadline, without a deterministic budget)."""
        size = estimate_size(self.f, red)
        wall = self.deadline - time.perf_counter() if math.isinf(seconds) else seconds
        per_second = FULL_MODEL_SIZE_PER_SECOND_PLACED if self.f.placement else FULL_MODEL_SIZE_PER_SECOND
        limit_size = per_second * wall
        use_lns = lns is True or (lns == "auto" and size > limit_size and incumbent is not None)
        if use_lns and incumbent is None:
            raise SolverError("cpsat: lns needs a valid warm start (hint or greedy plan)")
        stats: dict = {"full_model_estimate": size}
        if use_lns:
            result = self._lns(red, incumbent, DTIME_PER_SECOND * seconds, DTIME_PER_SECOND * wall, window or 0, stats)
        else:
            built = self._build(red, None)
            stats.update(
                variables=len(built.model.proto.variables),
                constraints=len(built.model.proto.constraints),
                objective_capped=built.capped,
                **built.counts,
            )
            rate = DTIME_PER_SECOND_PLACED if self.f.placement is not None else DTIME_PER_SECOND
            # interleaved workers share one core and overrun the limit by a batch: scale the budget down twice
            result = self._full(built, guide, rate * seconds / self.workers**2, stats)
        result.stats["wall_limit_hit"] = self.wall_hit
        return result

    def _build(self, red: Reduction, pinned: dict | None) -> Built:
        """The model; with every cost excess capped when the exact objective would leave int64."""
        try:
            return build_model(self.f, red, fixed_offsets=pinned)
        except OverflowError:
            return build_model(self.f, red, fixed_offsets=pinned, cap=_cap(self.f))

    def _full(self, built: Built, guide: Incumbent | None, budget: float, stats: dict) -> Run:
        capped = built.capped
        code, solver, found = self._solve(built, budget, guide)
        stats.update(mode="full", cpsat_status=solver.status_name(code), deterministic_time=solver.deterministic_time)
        if code == cp_model.INFEASIBLE:
            return Run(None, "infeasible", stats=stats)
        bound = None
        if code in (cp_model.OPTIMAL, cp_model.FEASIBLE) and not capped:
            bound = math.ceil(solver.best_objective_bound - 1e-6) + built.offset
            stats["model_objective"] = round(solver.objective_value) + built.offset
        status = "optimal" if code == cp_model.OPTIMAL and not capped else ("timeout" if found else "unknown")
        return Run(found, status, bound, stats)

    def _lns(
        self, red: Reduction, incumbent: Incumbent, budget: float, planned: float, window: int, stats: dict
    ) -> Run:
        """Windows until ``budget`` deterministic time is spent; each gets a twelfth of ``planned``."""
        f = self.f
        n = len(f.nodes)
        windows = _Windows(f, red)
        width = min(n, window or max(MIN_WINDOW, n // 10))
        per_window = max(planned / 12, 0.05)
        spent, count, improved, status, bound, largest = 0.0, 0, 0, "timeout", None, 0
        while spent < budget and time.perf_counter() < self.deadline:
            chosen = windows.next(width, incumbent)
            masks = [
                red.masks[i].copy() if i in chosen else _one_hot(red.masks[i].shape[0], incumbent.assignment[i])
                for i in range(n)
            ]
            sub = reduce_formulation(f, masks, forbid_huge=red.threshold is not None)
            if sub.conflict:
                sub = reduce_formulation(f, masks, forbid_huge=False)
            pinned = _pinned(f, chosen, incumbent)
            built = self._build(sub, pinned)
            largest = max(largest, len(built.model.proto.variables) + len(built.model.proto.constraints))
            dtime = min(per_window, budget - spent)
            mapped = tuple(sub.map_assignment(incumbent.assignment))  # the window's own dominance
            guide = Incumbent(mapped, incumbent.offsets, incumbent.objective, incumbent.source)
            code, solver, found = self._solve(built, dtime, guide, pinned)
            spent += max(solver.deterministic_time, 0.01) + WINDOW_COST * (n + len(f.edges))
            count += 1
            gained = found is not None and found.objective < incumbent.objective
            if gained:
                incumbent, improved = found, improved + 1
                windows.rank = 0
            if len(chosen) == n and code == cp_model.OPTIMAL and not built.capped:
                status, bound = "optimal", incumbent.objective
                break
            if code == cp_model.OPTIMAL and solver.deterministic_time < dtime / 2:
                width = min(n, int(width * 1.25) + 1)
            elif code != cp_model.OPTIMAL and not gained:
                width = max(MIN_WINDOW, int(width * 0.8))
        if spent < budget and status != "optimal":
            self.wall_hit = True  # stopped by the clock, not by the deterministic budget
        stats.update(
            mode="lns",
            windows=count,
            improvements=improved,
            final_window=width,
            largest_window_model=largest,
            deterministic_time=spent,
        )
        if incumbent.source != "cpsat":
            return Run(None, status, bound, stats)
        return Run(incumbent, status, bound, stats)


class _Windows:
    """The nodes an LNS window frees: alternately a slice of the schedule (in interval order) and
    the graph neighbourhood (breadth first over edges) of a costly term of the incumbent, taken
    in decreasing order of its excess over the term's minimum, restarting after an improvement."""

    def __init__(self, f: Formulation, red: Reduction):
        self.f, self.red = f, red
        self.order = sorted(range(len(f.nodes)), key=lambda i: (f.nodes[i].interval[0], i))
        self.adjacent = [
            sorted({f.edges[k].u for k in f.incident_edges(i)} | {f.edges[k].v for k in f.incident_edges(i)} - {i})
            for i in range(len(f.nodes))
        ]
        self.pos = 0
        self.rank = 0
        self.count = 0

    def next(self, width: int, incumbent: Incumbent) -> set[int]:
        n = len(self.order)
        self.count += 1
        if self.count % 2 or width >= n:
            chosen = {self.order[(self.pos + j) % n] for j in range(width)}
            self.pos = (self.pos + max(width // 2, 1)) % n
            return chosen
        costly = self._costly(incumbent.assignment)
        if not costly:
            return self.next(width, incumbent)
        seeds = costly[self.rank % len(costly)]
        self.rank += 1
        chosen: set[int] = set()
        queue = deque(seeds)
        while queue and len(chosen) < width:
            i = queue.popleft()
            if i in chosen:
                continue
            chosen.add(i)
            queue.extend(j for j in self.adjacent[i] if j not in chosen)
        return chosen

    def _costly(self, a) -> list[tuple[int, ...]]:
        """Node and edge terms with a positive excess under ``a``, costliest first."""
        f, red = self.f, self.red
        terms = []
        for i, n in enumerate(f.nodes):
            excess = int(n.costs[a[i]]) - int(n.costs[red.masks[i]].min())
            if excess > 0:
                terms.append((-excess, 0, i, (i,)))
        for k, e in enumerate(f.edges):
            ok = red.allowed[k] & red.masks[e.u][:, None] & red.masks[e.v][None, :]
            excess = int(e.costs[a[e.u], a[e.v]]) - int(e.costs[ok].min())
            if excess > 0:
                terms.append((-excess, 1, k, (e.u, e.v)))
        terms.sort()
        return [t[3] for t in terms]


def _one_hot(size: int, s: int) -> np.ndarray:
    mask = np.zeros(size, bool)
    mask[s] = True
    return mask


def _pinned(f: Formulation, chosen: set[int], incumbent: Incumbent) -> dict[BufferKey, int]:
    """Incumbent buffers that keep their address in a window: those not live during the window's span."""
    if f.placement is None:
        return {}
    spans = [f.nodes[i].interval for i in chosen] + [f.edges[k].interval for i in chosen for k in f.incident_edges(i)]
    spans = [s for s in spans if s[1] > s[0]]
    if not spans:
        return dict(incumbent.offsets)
    lo, hi = min(s[0] for s in spans), max(s[1] for s in spans)
    return {
        b.key: incumbent.offsets[b.key] for b in f.buffers(incumbent.assignment) if not (b.lower < hi and lo < b.upper)
    }


def _cap(f: Formulation) -> int:
    """A per-term cost cap that keeps the capped objective inside int64."""
    terms = len(f.nodes) + len(f.edges) + len(f.max_terms) + 1
    return 2**60 // terms


# ---------------------------------------------------------------- reporting
def _report(f: Formulation, run: Run, incumbent: Incumbent | None, stats: dict, start: float) -> Solution:
    best, status = run.best, run.status
    if best is None or (incumbent is not None and incumbent.objective < best.objective):
        if incumbent is None:
            stats["source"] = "none"
            return Solution(
                (),
                {},
                "timeout",
                None,
                run.bound,
                time.perf_counter() - start,
                stats,
                "cpsat found no solution within the time limit and no warm start was available",
            )
        best = incumbent
        status = "optimal" if status == "optimal" else "feasible"
        message = f"CP-SAT found nothing better than the {incumbent.source} plan; returning it"
    else:
        message = {"optimal": "proven optimal", "timeout": "time limit reached; best plan found"}.get(status, "")
    stats["source"] = best.source
    bound = run.bound
    if bound is not None:
        bound = min(bound, best.objective)
        stats["gap"] = (best.objective - bound) / max(1, abs(best.objective))
    return Solution(
        assignment=best.assignment,
        offsets=best.offsets if f.placement else {},
        status=status,
        objective=best.objective,
        bound=bound,
        seconds=time.perf_counter() - start,
        stats=stats,
        message=message,
    )


def _infeasible(f: Formulation, red: Reduction, reason: str, stats: dict, start: float) -> Solution:
    """An infeasible result with a diagnosis: the step whose unavoidable usage is largest."""
    limit = memory_limit(f)
    diagnosis: dict = {"reason": reason}
    if limit is not None and f.num_steps:
        floor = np.zeros(f.num_steps, dtype=np.int64)
        for i, n in enumerate(f.nodes):
            lo, hi = n.interval
            if hi > lo and red.masks[i].any():
                floor[lo:hi] += int(n.usages[red.masks[i]].min())
        t = int(np.argmax(floor))
        mandatory = [
            f.nodes[i].name
            for i, n in enumerate(f.nodes)
            if n.interval[0] <= t < n.interval[1] and red.masks[i].any() and n.usages[red.masks[i]].min() > 0
        ]
        diagnosis.update(
            time_step=t,
            min_usage=int(floor[t]),
            limit=limit,
            over=max(0, int(floor[t]) - limit),
            min_limit_at_least=int(floor.max()),
            unavoidable_buffers=mandatory,
        )
        reason += (
            f"; the smallest possible usage at step {t} is {int(floor[t])} (limit {limit}), "
            f"so the limit must be at least {int(floor.max())}"
            + (
                " and the conflict involves edge copies, forbidden pairs or address fragmentation"
                if floor.max() <= limit
                else ""
            )
        )
    stats["diagnosis"] = diagnosis
    stats["source"] = "none"
    return Solution((), {}, "infeasible", None, None, time.perf_counter() - start, stats, reason)
