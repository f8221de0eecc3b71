"""CP-SAT search: the whole model, or large-neighbourhood windows that each call ``presolve.domains``."""

from __future__ import annotations

import math
import time
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from spyreopt.errors import SolverError
from spyreopt.model.formulation import BufferKey, Formulation
from spyreopt.rates import (
    DTIME_PER_SECOND,
    DTIME_PER_SECOND_PLACED,
    FULL_MODEL_SIZE_PER_SECOND,
    FULL_MODEL_SIZE_PER_SECOND_PLACED,
)
from spyreopt.solvers.addresses import place_assignment
from spyreopt.solvers.cpsat.model import Built, build_model, estimate_size
from spyreopt.solvers.presolve import Domains, domains
from spyreopt.solvers.presolve.windows import layers

# The rates (deterministic time and model size per second of limit) are ``spyreopt.rates``'; where a model runs
# slower than they assume, the clock ends the run and stats["wall_limit_hit"] says so.
WINDOW_COST = 1e-4  # deterministic-time charge per node and edge for building one LNS window (Python work)
MIN_WINDOW = 8


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


class Search:
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
        self, red: Domains, incumbent: Incumbent | None, guide: Incumbent | None, seconds: float, lns, window
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

    def _build(self, red: Domains, pinned: dict | None) -> Built:
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

    def _lns(self, red: Domains, incumbent: Incumbent, budget: float, planned: float, window: int, stats: dict) -> Run:
        """Windows until ``budget`` deterministic time is spent; each gets a twelfth of ``planned``."""
        f = self.f
        n = len(f.nodes)
        windows = _Windows(f, red)
        width = min(n, window or max(MIN_WINDOW, n // 10))
        per_window = max(planned / 12, 0.05)
        spent, count, improved, status, bound, largest, transplanted = 0.0, 0, 0, "timeout", None, 0, 0
        while spent < budget and time.perf_counter() < self.deadline:
            chosen = windows.next(width, incumbent)
            masks = [
                red.masks[i].copy() if i in chosen else _one_hot(red.masks[i].shape[0], incumbent.assignment[i])
                for i in range(n)
            ]
            sub = domains(f, masks, upper_bound=incumbent.objective, forbid_huge=red.threshold is not None)
            if sub.conflict:
                sub = domains(f, masks, upper_bound=incumbent.objective)
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
                if windows.last_layers:  # identical layers: the improved layer's choices may help the others
                    incumbent, copied = self._transplant(windows, incumbent)
                    transplanted += copied
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
            layer_transplants=transplanted,
            deterministic_time=spent,
        )
        if incumbent.source != "cpsat":
            return Run(None, status, bound, stats)
        return Run(incumbent, status, bound, stats)

    def _transplant(self, windows: _Windows, incumbent: Incumbent) -> tuple[Incumbent, int]:
        """Copy the choices of the layers just improved onto every layer of the same shape (same op
        names after the layer prefix, same candidate counts), one layer at a time, keeping each copy
        that is valid (placed anew when there are addresses) and better; how many were kept."""
        f = self.f
        kept = 0
        for source in windows.last_layers:
            for target, nodes in enumerate(windows.layers):
                if target in windows.last_layers or _shape(f, nodes) != _shape(f, windows.layers[source]):
                    continue
                a = list(incumbent.assignment)
                for i, j in zip(windows.layers[source], nodes):
                    a[j] = a[i]
                value = f.evaluate(a)
                if value >= incumbent.objective or any("no address" not in v for v in f.violations(a, None)):
                    continue
                offsets = place_assignment(f, a, time_limit=0.2, seed=self.seed)
                if offsets is None or f.violations(a, offsets if f.placement else None):
                    continue
                incumbent, kept = Incumbent(tuple(a), offsets, value, "cpsat"), kept + 1
        return incumbent, kept


def _shape(f: Formulation, nodes: list[int]) -> tuple:
    return tuple((f.nodes[i].name.partition(".")[2], f.nodes[i].num_candidates) for i in nodes)


class _Windows:
    """The nodes an LNS window frees, in rotation: a slice of the schedule (in interval order), the
    graph neighbourhood (breadth first over edges) of a costly term of the incumbent, taken in
    decreasing order of its excess over the term's minimum, restarting after an improvement, and,
    when the graph has layers (``presolve.windows.layers``), the next layer (with its successors
    while they fit the width)."""

    def __init__(self, f: Formulation, red: Domains):
        self.f, self.red = f, red
        self.layers = layers(f) or []
        self.layer_pos = 0
        self.last_layers: list[int] = []  # the layers the last window freed (empty for other kinds)
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
        self.last_layers = []
        if self.layers and self.count % 3 == 0 and width < n:
            return self._layer_window(width)
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

    def _layer_window(self, width: int) -> set[int]:
        chosen: set[int] = set()
        while len(self.last_layers) < len(self.layers):
            layer = (self.layer_pos + len(self.last_layers)) % len(self.layers)
            if chosen and len(chosen) + len(self.layers[layer]) > width:
                break
            chosen.update(self.layers[layer])
            self.last_layers.append(layer)
        self.layer_pos = (self.layer_pos + 1) % len(self.layers)
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
