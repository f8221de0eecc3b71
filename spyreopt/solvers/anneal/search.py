"""Simulated-annealing backend: a joint local search over the whole Formulation.

The backend of choice for graphs too large for the exact solvers. Four parts:

1. Start from the greedy plan (or a hint).
2. Merge nodes whose candidates force each other into units (``anneal.units``):
   every later move changes a whole dependent chain at once.
3. Guide (``anneal.guide``): rounds of message passing on the unit graph with
   per-time-step memory prices, each labeling repaired into a valid plan and
   descended. This crosses between plans that differ everywhere, which no
   local move can.
4. Anneal (``anneal.moves``) from the best plan so far: single, flood,
   residency-flip, edge-pair and tree-window moves, each evaluated
   incrementally, under a cooling schedule with reheats; keep the best valid
   plan. Finally addresses by the placement engine, spilling when placement
   fails.

Schedule: the annealing steps are split into ``cycles`` equal cycles; each
cycle restarts from the best assignment so far (a *reheat*) and cools
geometrically from its start temperature to ``t_end``; successive cycles start
cooler. Temperatures are multiples of a scale measured on the plan the
annealing starts from (the median smallest uphill step of a unit), so no
setting depends on cost units.

Determinism: every decision is a function of the formulation, the start, the
seed, the number of guide rounds and the number of annealing steps. The clock
is only read to stop. Without ``steps``/``rounds`` both come from the time
limit through fixed *nominal* costs per round and per step (derived from the
problem's size, never measured), so a run that finishes within its time limit
is identical on every machine. On a machine too slow to finish them, the time
limit cuts the run short and the result can differ: the status is then
"timeout" and ``stats["budget_done"]`` is False.
"""

from __future__ import annotations

import math
import time

import numpy as np

from spyreopt.errors import SolverError
from spyreopt.model.formulation import Formulation, Solution
from spyreopt.rates import LOOK_SECONDS, ROUND_SECONDS_PER_TERM
from spyreopt.solvers import greedy
from spyreopt.solvers.addresses import spill_until_placed
from spyreopt.solvers.anneal.guide import guide
from spyreopt.solvers.anneal.model import NEAR, CompiledModel
from spyreopt.solvers.anneal.moves import Moves, Stream
from spyreopt.solvers.anneal.state import SearchState
from spyreopt.solvers.anneal.units import merge_units, singletons
from spyreopt.solvers.local import LocalView
from spyreopt.solvers.presolve.limits import memory_limit

DEFAULTS = {
    "rounds": None,  # guide rounds (None: from the time limit and the nominal cost of a round)
    "guide_share": 0.5,  # share of the time limit planned for the guide when rounds/steps are derived
    "sweeps": 3,  # message-passing sweeps per guide round (messages stay warm between rounds)
    "cycles": 8,  # cooling cycles; each one after the first is a reheat from the best
    "t_start": 1.0,  # start temperature of the first cycle, in units of the measured scale
    "t_end": 1e-3,  # end temperature of every cycle, same units
    "cycle_decay": 0.7,  # start temperature of each cycle relative to the previous one
    "mix": (0.6, 0.2, 0.1, 0.1, 0.05),  # weights of single, flood, flip, pair, window moves
    "window_size": 40,  # units in a window move
    "flood_size": 8,  # units re-optimised after the first unit of a flood or flip move
    "merge": True,  # merge nodes whose candidates force each other into units
    "reserve": 0.1,  # share of the time limit kept for placement at the end
}
ACCEPTS = frozenset(DEFAULTS) | {"steps", "hint"}  # options besides time_limit and seed


def solve(
    f: Formulation, *, time_limit: float = 10.0, seed: int = 0, steps: int | None = None, hint=None, **options
) -> Solution:
    """Guide, then anneal, from ``hint`` (a Solution or an assignment) or from the greedy plan."""
    start = time.perf_counter()
    deadline = start + time_limit
    opts = _options(options)
    if steps is not None and steps < 0:
        raise SolverError(f"anneal: steps must be >= 0, got {steps}")

    first = _start(f, hint, time_limit, seed)
    sizes = np.array([nd.num_candidates for nd in f.nodes], dtype=np.int64)
    units = merge_units(f, NEAR) if opts["merge"] else singletons(f)
    units = units.split_conflicts(first.assignment, sizes)
    model = CompiledModel(f, units)
    state = SearchState(model, units.contract(first.assignment))
    if state.nbad > 0 or _over_limit(state):
        raise SolverError("anneal: the start assignment is not valid (forbidden pair or over the memory limit)")
    moves = Moves(
        state, Stream(np.random.default_rng(seed)), flood_size=opts["flood_size"], window_size=opts["window_size"]
    )
    rounds, budget = _budgets(model, opts, time_limit, steps)

    search_deadline = deadline - opts["reserve"] * time_limit
    guided = guide(state, moves.movable, rounds, opts["sweeps"], search_deadline, time.perf_counter)
    scale = _temperature_scale(state, moves)
    run = _anneal(state, moves, budget, scale, opts, search_deadline)

    plans = [run["best"]] + ([guided["best"]] if not np.array_equal(run["best"], guided["best"]) else [])
    best, offsets, objective, spills = _place(f, [units.expand(p) for p in plans], deadline, seed)
    start_objective = f.evaluate(first.assignment)
    kept_start = best is None or objective > start_objective
    if kept_start:  # placement failed, or its repair made the plan worse than where we began
        best, offsets, objective = list(first.assignment), dict(first.offsets), start_objective
    elapsed = time.perf_counter() - start
    budget_done = not guided["cut"] and run["budget_done"]
    status = "feasible" if budget_done and elapsed <= time_limit else "timeout"
    stats = {
        "units": units.count,
        "rounds": guided["rounds"],
        "rounds_budget": rounds,
        "best_round": guided["best_round"],
        "guide_cost": guided["cost"],
        "steps": run["steps"],
        "steps_budget": budget,
        "budget_done": budget_done,
        "accepted": run["accepted"],
        "moves_per_second": run["steps"] / max(run["seconds"], 1e-9),
        "reheats": run["reheats"],
        "best_step": run["best_step"],
        "start_objective": start_objective,
        "temperature_scale": scale,
        "spills": spills,
        "kept_start": kept_start,
    }
    message = (
        "placement failed or its repair made the annealed plan worse; returned the start plan" if kept_start else ""
    )
    return Solution(tuple(best), offsets, status, objective, seconds=elapsed, stats=stats, message=message)


def _place(f: Formulation, plans: list[np.ndarray], deadline: float, seed: int):
    """Addresses for the best plan that places; plans are in increasing cost.

    A plan whose placement fails is repaired by spilling (``spill_until_placed``);
    the next plan is tried too when the repair spilled, and the cheapest
    result wins. Returns (assignment, offsets, objective, spills), or Nones
    when no plan could be placed.
    """
    found = (None, {}, None, 0)
    for plan in plans:
        a = [int(x) for x in plan]
        if f.placement is None:
            return a, {}, f.evaluate(a), 0
        try:
            a, offsets, spills = spill_until_placed(f, LocalView(f), a, deadline=deadline, seed=seed)
        except RuntimeError:
            continue
        objective = f.evaluate(a)
        if found[2] is None or objective < found[2]:
            found = (a, offsets, objective, spills)
        if spills == 0:
            break
    return found


def _options(options: dict) -> dict:
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise SolverError(f"anneal: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(DEFAULTS))}")
    opts = {**DEFAULTS, **options}
    mix = opts["mix"]
    if len(mix) != 5 or min(mix) < 0 or sum(mix) <= 0:
        raise SolverError(
            f"anneal: mix must be 5 non-negative weights (single, flood, flip, pair, window), got {mix!r}"
        )
    if opts["rounds"] is not None and opts["rounds"] < 0:
        raise SolverError(f"anneal: rounds must be >= 0, got {opts['rounds']}")
    if not 0 <= opts["guide_share"] <= 1:
        raise SolverError(f"anneal: guide_share must be within [0, 1], got {opts['guide_share']}")
    return opts


def _budgets(model: CompiledModel, opts: dict, time_limit: float, steps: int | None) -> tuple[int, int]:
    """Guide rounds and annealing steps: given, or from the time limit at nominal costs."""
    rounds, nominal_steps = work_for(time_limit, model.n + len(model.pairs), opts)
    return (rounds if opts["rounds"] is None else opts["rounds"]), (nominal_steps if steps is None else steps)


def work_for(seconds: float, terms: int, opts: dict | None = None) -> tuple[int, int]:
    """Guide rounds and annealing steps worth ``seconds`` at the nominal rates (``spyreopt.rates``, never
    measured) on a unit graph of ``terms`` units plus pairs; ``opts`` default to ``DEFAULTS``."""
    opts = DEFAULTS if opts is None else opts
    usable = seconds * (1 - opts["reserve"])
    rounds = int(usable * opts["guide_share"] / (ROUND_SECONDS_PER_TERM * (terms + 1)))
    mix = np.asarray(opts["mix"], dtype=np.float64)
    compound = 1 + opts["flood_size"]
    looks = float(mix @ [1, compound, compound, 3, opts["window_size"]]) / mix.sum()
    return rounds, int(usable * (1 - opts["guide_share"]) / (LOOK_SECONDS * looks))


def _start(f: Formulation, hint, time_limit: float, seed: int) -> Solution:
    """The start: a hint Solution, a hint assignment (addresses found at the end), or greedy."""
    if hint is None:
        return greedy.solve(f, time_limit=max(0.2 * time_limit, 0.05), seed=seed)
    if isinstance(hint, Solution):
        return hint
    assignment = [int(x) for x in hint]
    try:
        f.evaluate(assignment)
    except ValueError as exc:
        raise SolverError(f"anneal: hint is not an assignment of this formulation: {exc}") from exc
    offsets: dict = {}
    if f.placement is not None and not _plain_violations(f, assignment):
        assignment, offsets, _ = spill_until_placed(
            f, LocalView(f), assignment, deadline=time.perf_counter() + 0.2 * time_limit, seed=seed
        )
    return Solution(tuple(assignment), offsets, "feasible", f.evaluate(assignment))


def _plain_violations(f: Formulation, assignment) -> bool:
    """Forbidden pairs or usage over the limits (the constraints that do not need addresses)."""
    if any(not e.is_allowed(assignment[e.u], assignment[e.v]) for e in f.edges):
        return True
    limit = memory_limit(f)
    return limit is not None and max(f.usage_profile(assignment), default=0) > limit


def _over_limit(state: SearchState) -> bool:
    return state.m.limit is not None and int(state.prof.max(initial=0)) > state.m.limit


def _temperature_scale(state: SearchState, moves: Moves, samples: int = 256) -> float:
    """Median over sampled units of the smallest uphill cost step (1.0 when nothing is uphill).

    Steps to near-forbidden costs are left out: they would set the scale of
    the whole schedule to a cost no good plan ever pays.
    """
    gaps = []
    movable = moves.movable
    if not len(movable):
        return 1.0
    picks = movable if len(movable) <= samples else movable[:: math.ceil(len(movable) / samples)]
    for i in picks:
        lk = state.look(int(i))
        up = lk.cost[state.allowed(lk)] - lk.cost[state.a[i]]
        up = up[(up > 0) & (up < NEAR / 4)]
        if len(up):
            gaps.append(float(up.min()))
    return float(np.median(gaps)) if gaps else 1.0


def _anneal(state: SearchState, moves: Moves, budget: int, scale: float, opts: dict, deadline: float) -> dict:
    kinds = (moves.single, moves.flood, moves.flip, moves.pair, moves.window)
    if not len(moves.movable):
        budget = 0  # every unit has a single candidate: nothing to move
    weights = np.asarray(opts["mix"], dtype=np.float64)
    thresholds = np.cumsum(weights / weights.sum()).tolist()
    cycles = max(1, min(int(opts["cycles"]), budget or 1))
    per_cycle = budget // cycles
    t_end = opts["t_end"] * scale
    best = state.assignment.copy()
    best_cost = state.cost
    best_step = 0
    accepted = reheats = step = 0
    began = time.perf_counter()
    stopped = False
    t_hi = opts["t_start"] * scale
    for c in range(cycles):
        if c:
            reheats += 1
            t_hi *= opts["cycle_decay"]
            state.reset(best)
        length = per_cycle if c < cycles - 1 else budget - per_cycle * (cycles - 1)
        ratio = (t_end / t_hi) ** (1.0 / max(length, 1)) if t_hi > t_end else 1.0
        temp = max(t_hi, t_end)
        for _ in range(length):
            if time.perf_counter() > deadline:
                stopped = True
                break
            u = moves.r.uniform()
            kind = 0
            while kind < 4 and u > thresholds[kind]:
                kind += 1
            if kinds[kind](temp):
                accepted += 1
                if state.cost < best_cost:
                    best_cost = state.cost
                    best = state.assignment.copy()
                    best_step = step
            temp *= ratio
            step += 1
        if stopped:
            break
    return {
        "best": best,
        "steps": step,
        "accepted": accepted,
        "reheats": reheats,
        "best_step": best_step,
        "budget_done": not stopped,
        "seconds": time.perf_counter() - began,
    }
