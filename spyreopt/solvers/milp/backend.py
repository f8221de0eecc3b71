"""MILP backend: the Formulation as a mixed-integer program (PuLP), solved by HiGHS or CBC.

It gives an LP-based lower bound and an independent cross-check of CP-SAT.

1. Start from greedy's plan (or a valid ``hint``), checked with
   ``Formulation.violations`` (an invalid one is dropped): it is the MIP start
   and the incumbent the shared presolve prunes against (``milp.model.milp_domains``).
2. Solve the model under the remaining time.
3. With ``f.placement``: place the chosen buffers with the placement engine;
   if they do not fit, find the time-connected group of buffers that does not
   fit, forbid holding all of them at those sizes or larger (a no-good cut,
   valid because bigger buffers never place more easily) and re-solve.
4. Return the MILP's plan if it is strictly better than the start, else the
   start (``stats["source"]`` says which).

The objective is always ``f.evaluate`` of the returned assignment (exact
integers); the solver's floats only guide the search and give the bound.
"optimal" means proven: the solver closed the gap (PuLP's ``sol_status``, not
its ``status``, which says Optimal at a time limit too), every placement cut
was proven by the placement engine, and no heuristically dropped 1e18 cost
could do better; otherwise "timeout" (time ran out) or "feasible". A verdict of
"infeasible" while the valid start satisfies the model is a numerical failure,
never a proof (``stats["numerics"]``). The bound
is the solver's dual bound (floored) of a model whose cuts are all proven.
"""

from __future__ import annotations

import math
import time

from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model.formulation import BufferSpec, Formulation, Solution
from spyreopt.solvers import greedy, options
from spyreopt.solvers.addresses import place_assignment
from spyreopt.solvers.milp.model import MilpModel, ModelTimeout, milp_domains
from spyreopt.solvers.milp.run import ABS_GAP, RunResult, runner
from spyreopt.solvers.placement import Buffer, place

ACCEPTS = options.MILP  # options besides time_limit and seed


def solve(
    f: Formulation, *, time_limit: float, seed: int, solver: str = "highs", hint: Solution | None = None, **options
) -> Solution:
    if options:
        raise SolverError(f"milp: unknown option(s) {', '.join(sorted(options))}; known options: solver, hint")
    run = runner(solver)
    start = time.perf_counter()
    deadline = start + time_limit
    stats: dict = {"solver": solver}
    incumbent = _incumbent(f, hint, time_limit, seed, stats)
    dom = milp_domains(f, incumbent.objective if incumbent else None)
    stats["reductions"] = dict(dom.counts)
    try:
        model = MilpModel(f, dom, deadline=deadline) if dom.conflict is None else None
    except ModelTimeout as exc:
        stats["solver_status"] = f"not run: model build exceeded the time limit ({exc})"
        result = RunResult(False, False, False, True, None, stats["solver_status"])
        return _finish(f, incumbent, None, result, None, dom.floor, True, stats, start, deadline)
    if model is None or model.infeasible:
        reason = model.infeasible if model else dom.conflict
        result = RunResult(False, False, True, False, None, f"infeasible before solving: {reason}")
        stats["solver_status"] = result.detail
        return _finish(f, incumbent, None, result, math.inf, dom.floor, True, stats, start, deadline)
    stats.update(model.size())
    stats["model_seconds"] = round(time.perf_counter() - start, 3)
    warm = model.start_values(incumbent.assignment) if incumbent else None
    stats["warm_start"] = warm is not None
    found, result, bound, proven_cuts = _rounds(f, model, run, deadline, seed, warm, stats)
    return _finish(f, incumbent, found, result, bound, dom.floor, proven_cuts, stats, start, deadline)


def _rounds(f: Formulation, model: MilpModel, run, deadline: float, seed: int, warm, stats: dict):
    """Solve, place, cut the unplaceable group, repeat: (found, last result, valid bound, cuts all proven)."""
    found, result, bound, rounds, proven_cuts = None, None, None, 0, True
    while time.perf_counter() < deadline:
        result = _run(run, model, deadline, seed, warm)
        if result.infeasible and warm is not None:  # the start satisfies the model (no cut excludes a placed plan)
            stats["numerics"] = f"solver called the model infeasible ({result.detail}) although the start satisfies it"
            result = RunResult(
                False, False, False, result.hit_limit, None, f"{result.detail}, contradicted by the start"
            )
            break
        if proven_cuts and (result.bound is not None or result.infeasible):
            bound = math.inf if result.infeasible else result.bound * model.unit + model.offset
        if not result.has_solution:
            break
        a = model.assignment()
        bad = _hard_violations(f, a)
        if bad:  # the solver's tolerances let a forbidden pair or an overfull step through
            stats["numerics"] = "; ".join(bad[:3])
            break
        rounds += 1
        offsets = place_assignment(f, a, time_limit=max(deadline - time.perf_counter(), 0.1), seed=seed)
        if offsets is not None:
            found = (a, offsets)
            break
        group, proven = _unplaceable_group(f, a, time_limit=max(deadline - time.perf_counter(), 0.1), seed=seed)
        proven_cuts &= proven
        model.add_nogood(group)
    if f.placement is not None:
        stats.update(placement_rounds=rounds, nogood_cuts=model.cuts, cuts_proven=proven_cuts)
    if result is not None:
        stats["solver_status"] = result.detail
    return found, result, bound, proven_cuts


def _incumbent(f: Formulation, hint: Solution | None, time_limit: float, seed: int, stats: dict) -> Solution | None:
    """A valid plan to start from: the hint if valid, else greedy's; None if neither exists."""
    if hint is not None:
        problems = f.violations(hint.assignment, hint.offsets)
        if not problems:
            stats["start"] = "hint"
            return Solution(tuple(hint.assignment), dict(hint.offsets), "feasible", f.evaluate(hint.assignment))
        stats["hint"] = f"ignored: {problems[0]}"
    try:
        sol = greedy.solve(f, time_limit=max(0.2 * time_limit, 0.05), seed=seed)
    except (InfeasibleError, RuntimeError) as exc:
        stats["start"] = f"none (greedy failed: {exc})"
        return None
    problems = f.violations(sol.assignment, sol.offsets)
    if problems:  # never trusted blindly: it would prune the domains and could come back as the answer
        stats["start"] = f"none (greedy plan invalid: {problems[0]})"
        return None
    stats["start"] = "greedy"
    stats["start_objective"] = sol.objective
    return sol


def _run(run, model: MilpModel, deadline: float, seed: int, warm) -> RunResult:
    if model.infeasible:
        return RunResult(False, False, True, False, None, f"infeasible: {model.infeasible}")
    if not model.prob.variables():  # every node fixed by domain reduction: nothing left to search
        return RunResult(True, True, False, False, 0.0, "no variables left after domain reduction")
    return run(model.prob, deadline=deadline, seed=seed, start=warm, abs_gap=ABS_GAP / model.unit)


def _hard_violations(f: Formulation, a) -> list[str]:
    """Pair and memory violations (addresses come later): the MILP should never produce them."""
    return [v for v in f.violations(a, None) if "no address" not in v]


def _unplaceable_group(f: Formulation, a, *, time_limit: float, seed: int) -> tuple[list[BufferSpec], bool]:
    """A time-connected group of the assignment's buffers that cannot be placed, and whether that is proven.

    Buffers sharing an address (``Formulation.address_groups``) are placed as one, as the placement engine
    does. Groups whose lifetimes never meet are placed independently, so the one that fails alone is a
    valid (and smaller) no-good over its buffers, unless an in-place output is tied to an operand's address
    in it: a plan holding the same buffers without that tie places differently, so that cut is not proven.
    Falls back to every buffer, unproven, if each group places on its own.
    """
    assert f.placement is not None
    raw = {b.key: b for b in f.buffers(a)}
    aliased = {b for _, b in f.address_links(a) if b[0] == "node"}
    groups = sorted(_time_components(f.address_groups(a)), key=lambda g: -sum(b.size for b in g))
    for group in groups:
        buffers = [
            Buffer(f"{b.key[0]}:{b.key[1]}", b.lower, b.upper, b.size, alignment=f.placement.alignment) for b in group
        ]
        result = place(buffers, f.placement.capacity, time_limit=time_limit / len(groups), seed=seed)
        if result.status != "placed":
            keys = [k for b in group for k in (b.key, *b.members)]
            return [raw[k] for k in keys], result.status == "infeasible" and not aliased.intersection(keys)
    return list(raw.values()), False


def _time_components(specs: list[BufferSpec]) -> list[list[BufferSpec]]:
    out: list[list[BufferSpec]] = []
    end = None
    for b in sorted(specs, key=lambda b: (b.lower, b.upper, b.key)):
        if end is None or b.lower >= end:
            out.append([])
            end = b.upper
        out[-1].append(b)
        end = max(end, b.upper)
    return out


def _combined_bound(bound: float | None, floor: int | None, objective: int) -> int | None:
    """The least objective any assignment can have: the model's bound (floored), the heuristic floor, the objective."""
    parts = [objective]
    if bound is not None:
        parts.append(bound if bound == math.inf else math.floor(bound + 1e-6))
    if floor is not None:
        parts.append(floor)
    return int(min(parts)) if len(parts) > 1 else None


def _finish(f, incumbent, found, result, bound, floor, proven_cuts, stats, start, deadline) -> Solution:
    """Pick the better of MILP and start, and say honestly what is proven."""
    milp_obj = f.evaluate(found[0]) if found else None
    if found and (incumbent is None or milp_obj < incumbent.objective):
        assignment, offsets, objective = found[0], found[1], milp_obj
        stats["source"] = "milp"
    elif incumbent is not None:
        assignment, offsets, objective = incumbent.assignment, incumbent.offsets, incumbent.objective
        stats["source"] = stats["start"]
    else:
        if result is not None and result.infeasible and proven_cuts and floor is None:
            raise InfeasibleError(f"milp: the model is infeasible ({result.detail})")
        raise SolverError(
            f"milp: no solution within {deadline - start:.1f} s and no valid start ({stats.get('start')})"
        )
    problems = f.violations(assignment, offsets)
    if problems:  # every source was checked above: this is a bug, never a plan to return
        raise SolverError(f"milp: the {stats['source']} plan violates the formulation: {'; '.join(problems[:3])}")
    if found and result.proven and milp_obj > objective:  # an "optimum" worse than a known plan: tolerances
        stats["numerics"] = f"solver's optimum {milp_obj} is worse than the start's {objective}; bound dropped"
        bound = None
    solver_proof = (
        found is not None
        and result.proven
        and proven_cuts
        and milp_obj <= objective
        and (floor is None or floor >= objective)
    )
    bound_int = objective if solver_proof else _combined_bound(bound, floor, objective)
    if bound_int is not None and bound_int >= objective:
        status = "optimal"
    elif time.perf_counter() >= deadline or (result is not None and result.hit_limit):
        status = "timeout"
    else:
        status = "feasible"
    if bound_int is not None:
        stats["gap"] = (objective - bound_int) / max(abs(objective), 1)
    message = f"{stats['solver']}: {stats.get('solver_status', 'not run')}"
    if stats["source"] != "milp":
        message += f"; the MILP found nothing better than the {stats['source']} start, returning it"
    return Solution(
        assignment=tuple(int(s) for s in assignment),
        offsets=dict(offsets),
        status=status,
        objective=objective,
        bound=bound_int,
        seconds=time.perf_counter() - start,
        stats=stats,
        message=message,
    )
