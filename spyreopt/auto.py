"""``backend="auto"``: one time budget (the problem build included), the method chosen per problem.

* **layers**: when the schedule splits into segments that repeat (``cache.segments.split``:
  transformer layers), each distinct segment is planned once as below and the
  plans are stitched onto the full graph (``cache.repeated.stitch``). The tensor
  crossing each cut goes through device memory; when the budget allows, the ops
  around the cuts are then re-planned on the full graph (every other op fixed,
  annealed from the stitched plan), which may keep a crossing tensor on chip.
  When its nominal cost fits ``WHOLE_SHARE`` of the limit, greedy also plans
  the whole graph (its window moves cross the cuts, which a stitched plan
  cannot) and the cheaper plan is kept. Feasible, never claimed optimal.
* **exact**: a problem of at most ``EXACT_OPS`` compute ops goes to CP-SAT from
  the start plan; CP-SAT proves optimality when it can. If it does not, anneal
  continues from the best plan so far and the better plan is kept. When CP-SAT's
  share is under ``EXACT_MIN_SECONDS`` anneal gets the search (method **anneal**).
* **trws+anneal+lns**: a larger problem gets the contest engine's plan
  (``solvers.trws``: TRW-S and forest DP under usage prices, made
  valid and placed; kept when better than the start plan; skipped, and the
  method is then **anneal+lns**, when its share of the budget is under
  ``ENGINE_MIN_SECONDS``), is annealed from the better start, then CP-SAT's
  large-neighbourhood search (exact windows over the schedule and around
  costly terms) continues from anneal's best; when that search's share is
  under ``LNS_MIN_SECONDS`` anneal gets it instead (method **anneal**, or
  **trws+anneal**).

The start plan is the better of greedy and the ``hbm`` baseline (nothing on
chip, always valid); each later stage is hinted with the best plan so far, so
a stage never makes the result worse.

Budgets are deterministic: the share of the time limit each stage gets depends
only on the time limit and the problem's structure (a nominal build cost per op,
never a measured one), and each stage turns its share into deterministic work:
greedy's window moves into work units, anneal into rounds and steps, CP-SAT into
deterministic time. So a run that finishes within its limit gives the same
plan on every machine. The clock is a safety net: a stage never runs past the
deadline, and if one had to be cut, ``stats["auto"]["budget_cut"]`` is True
(the one case where reruns may differ). Ctrl-C (KeyboardInterrupt) after the
first valid plan stops the search and returns the best plan so far with status
``"interrupted"``. A progress bar is shown on a terminal (stderr a TTY).
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from spyreopt import limits
from spyreopt.cache.key import digest, key_payload
from spyreopt.cache.relabel import to_canonical
from spyreopt.cache.repeated import restricted_problem, stitch
from spyreopt.cache.segments import split
from spyreopt.costmodel.analytic import COST_UNIT_US
from spyreopt.costmodel.coefficients import Coefficients, default
from spyreopt.direct import clock_cut, greedy_work
from spyreopt.errors import InfeasibleError, PlanError, SolverError
from spyreopt.limits import BUILD_SECONDS_PER_OP, FINISH_SECONDS_PER_OP, SEARCH_SHARE
from spyreopt.model.candidates import resolve
from spyreopt.model.decode import decode
from spyreopt.model.formulation import Formulation, Solution
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.opspace import op_space
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.solvers.anneal import search as anneal  # its step-budget constants
from spyreopt.solvers.registry import get_problem_backend, solve_formulation

EXACT_OPS = 24  # at or below this many compute ops CP-SAT gets the first stage (it proves the Spyre kernels)
START_SHARE = 0.4  # of a problem's stage budget: what greedy's start is planned to take (it runs exactly as
# ``backend="greedy"`` at the same limit, so auto is never worse than greedy), the rest the search stages'
STAGES = 3  # progress steps per problem: start plan, first search, second search
EXACT_SHARE = 0.5  # of a small problem's search budget: CP-SAT's (the rest: anneal)
ANNEAL_SHARE = 0.7  # of a large problem's search budget: anneal's and the engine's (the rest: CP-SAT's LNS)
ENGINE_SHARE = 0.2  # of a large problem's search budget: the contest engine's start ("trws"), taken from anneal's
EXACT_MIN_SECONDS = 0.5  # a small problem's CP-SAT stage below this planned budget ends on the clock (its model and
# chain alone take 0.2 to 0.5 s), so anneal gets the search
LNS_MIN_SECONDS = 2.0  # below this planned budget CP-SAT's reductions (its LP) alone may overrun on a large problem
# (1.3 s on a Llama-3-8B attention layer; on transformer_block a 1.2 s CP-SAT stage ends on the clock, a 2 s one
# proves the optimum in 1.1 s): a shorter share is raised to this floor, taken from anneal's, while the floor is
# at most LNS_MAX_SHARE of the search; below that the large-neighbourhood search is left out
LNS_MAX_SHARE = 0.5
ENGINE_MIN_SECONDS = 0.5  # below this planned budget the engine's fixed work (reductions, repair, placement) dominates
ENGINE_LOAD_SECONDS = 1.5  # nominal: importing numba and loading the engine's cached kernels, taken from anneal's share
REFINE_SHARE = 0.4  # of the layers method's search budget: the cut windows' (the rest: the distinct segments')
MIN_STAGE_SECONDS = 0.2
MAX_SLOWDOWN = 2.0  # the safety net scales the reserved work by the measured build slowdown, at most this
CUTS_BACKEND = (
    "anneal"  # re-plans the cut windows (it reached CP-SAT's bound on an 8-layer decode; CP-SAT did not move)
)
MIN_SEGMENT_SECONDS = 2.0  # the cut windows get a share only if every distinct segment keeps at least this
SEGMENT_FLOOR_SECONDS = 0.5  # each distinct segment's budget floor; the rest goes by ops x copies
WHOLE_SECONDS_PER_OP = 0.02  # nominal: building the whole graph (repeated layers share tables) and greedy on it
WHOLE_SHARE = 0.5  # whole-graph greedy is a layers candidate when its nominal cost fits this share of the limit

Progress = Callable[[str], None]


@dataclass
class Run:
    """Book-keeping of one auto solve: the deadline, the stages run, progress and interruption."""

    deadline: float
    bar: Any
    stages: list[dict] = field(default_factory=list)
    budget_cut: bool = False
    interrupted: bool = False
    on_stage: Progress | None = None
    reserve: float = 0.0  # nominal seconds of work after the current stage (builds to come, the stitch)
    slowdown: float = 1.0  # measured build seconds / nominal ones so far: scales the reserve of the safety net
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds outside the stages, for stats["timing"]
    sigint: Any = None  # the SIGINT handler to restore after each stage (CP-SAT leaves SIGINT at SIG_DFL)
    clock: limits.Deadline | None = None  # where cuts are recorded (``spyreopt.limits``)

    def cut(self, stage: str, reached: int | None = None) -> None:
        """A stage given less than its plan, stopped on the clock, or skipped: recorded, and reruns may differ."""
        self.budget_cut = True
        if self.clock is not None:
            self.clock.cut(stage, "clock", None if reached is None else reached * COST_UNIT_US)

    def timed(self, phase: str, began: float) -> None:
        self.phases[phase] = round(self.phases.get(phase, 0.0) + time.perf_counter() - began, 3)

    def left(self) -> float:
        """Seconds until the deadline, less the work still to come (nominal, scaled by the measured slowdown)."""
        return max(self.deadline - self.reserve * self.slowdown - time.perf_counter(), 0.05)

    def limit(self, planned: float, stage: str) -> float:
        """The stage's planned budget, cut to the time left (and said so) when the clock runs short."""
        left = self.left()
        if left < planned:
            self.cut(stage)
            return left
        return planned

    def done(self, label: str) -> None:
        self.bar.set_postfix_str(label, refresh=False)
        self.bar.update(1)
        if self.on_stage is not None:
            self.on_stage(label)


def solve(
    graph: Graph | Problem,
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    progress: bool | None = None,
    on_stage: Progress | None = None,
    **options: Any,
) -> Plan:
    """Plan ``graph`` within ``time_limit`` seconds from this call; ``plan.stats["auto"]`` says what was done.

    ``progress`` None shows a bar only when stderr is a terminal; ``on_stage`` is
    called with a label after every stage (and may raise KeyboardInterrupt, as
    Ctrl-C would).
    """
    if options:
        raise SolverError(f"auto: unknown option(s) {', '.join(sorted(options))}; known: progress, on_stage")
    with limits.deadline(limits.check_limit(time_limit)) as clock:
        plan = _solve(graph, time_limit, seed, hardware, coefficients, progress, on_stage, clock)
        limits.attach(plan, clock)
    return plan


def _solve(graph, time_limit, seed, hardware, coefficients, progress, on_stage, clock: limits.Deadline) -> Plan:
    start = time.perf_counter()
    show = sys.stderr.isatty() if progress is None else progress
    if isinstance(graph, Problem):
        hw, coef, segs = graph.hw, graph.coef, None
    else:
        graph.check()
        hw, coef = hardware or HardwareSpec(), coefficients or default()
        segs = split(graph, hw, coef)
    layered = segs is not None and len(segs) > 1
    bar = tqdm(total=0, disable=not show, desc="auto", unit="stage", leave=False)
    run = Run(clock.at, bar, on_stage=on_stage, clock=clock)
    if threading.current_thread() is threading.main_thread():
        run.sigint = signal.getsignal(signal.SIGINT)
    run.timed("split", start)
    try:
        if layered:
            plan = _layers(graph, segs, hw, coef, time_limit, seed, run)
        else:
            began = time.perf_counter()
            problem = graph if isinstance(graph, Problem) else Problem(graph, hw, coef)
            assert problem.formulation is not None  # built here, so the build is timed as such
            run.timed("build", began)
            built = 0 if isinstance(graph, Problem) else BUILD_SECONDS_PER_OP * len(problem.ops)
            run.slowdown = _slowdown(run.phases["build"], built) if built else 1.0
            run.reserve = FINISH_SECONDS_PER_OP * len(problem.ops)
            budget = limits.search_budget(time_limit, len(problem.ops), built=bool(built))
            bar.total = STAGES
            sol, method = _plan_problem(problem, budget, seed, run)
            if sol is None:  # interrupted before any valid plan
                raise KeyboardInterrupt
            sol.stats = {}
            began = time.perf_counter()
            plan = decode(problem, sol, backend="auto", seed=seed)
            try:
                plan.validate()
            except PlanError as exc:
                raise PlanError(f"backend 'auto' returned an invalid plan: {exc}") from exc
            run.timed("decode", began)
            plan.stats["auto"] = _report(method, run, problem_ops=len(problem.ops))
    finally:
        bar.close()
    if run.interrupted:
        plan.status = "interrupted"
    plan.solve_seconds = round(time.perf_counter() - start, 6)
    plan.stats.setdefault("timing", {})["auto"] = {
        "seconds": plan.solve_seconds,
        "budget_cut": run.budget_cut,
        "phases": run.phases,
        "stages": [round(s["seconds"], 3) for s in run.stages],
    }
    plan.message = _summary(plan.stats["auto"], run) + (f"; {plan.message}" if plan.message else "")
    return plan


def _slowdown(measured: float, nominal: float) -> float:
    """How much slower than nominal the builds ran, between 1 and ``MAX_SLOWDOWN`` (a segment's build is
    heavier per op than the stitch it predicts, so the ratio is damped)."""
    return min(max(1.0, measured / nominal), MAX_SLOWDOWN)


def _report(method: str, run: Run, **extra: Any) -> dict:
    return {
        "method": method,
        "stages": [{k: v for k, v in s.items() if k != "seconds"} for s in run.stages],
        "interrupted": run.interrupted,
        **extra,
    }


def _summary(report: dict, run: Run) -> str:
    chain = " -> ".join(f"{s['backend']}({s['status']})" for s in report["stages"] if "segment" not in s)
    text = f"auto: {report['method']}"
    if "segments" in report:
        text += f" over {report['segments']} segments ({report['distinct']} distinct)"
    if chain:
        text += f": {chain}"
    engine = [s for s in report["stages"] if s["backend"] == "trws"]
    if engine:
        used = sum(bool(s.get("engine_used")) for s in engine)
        text += f"; the contest engine's start (trws) was kept in {used} of {len(engine)} problem(s)"
    if run.interrupted:
        text += "; interrupted (Ctrl-C): best plan so far"
    if run.budget_cut:
        text += "; a stage stopped on the clock, not on its deterministic budget (a rerun may differ)"
    return text


def _stage(run: Run, problem: Problem, backend: str, planned: float, seed: int, hint: Solution | None, **tags: Any):
    """One backend run on ``problem`` (hinted); recorded in ``run.stages``. None if it raised a typed error."""
    began = time.perf_counter()
    record: dict[str, Any] = {"backend": backend, **tags, "planned_s": round(planned, 3)}
    if hint is not None:
        record["start"] = int(hint.objective)
    opts: dict[str, Any] = {"hint": hint} if hint is not None else {}
    if backend == "anneal":  # budgets in rounds and steps; the time limit is only the safety net
        opts.update(_anneal_budget(problem.formulation, planned))
        limit = run.left()
    elif backend == "trws":  # the contest engine's start only (anneal follows as its own stage); rounds budgeted
        opts.update(budget=planned, then_anneal=False)
        limit = run.left()
    elif backend == "hbm":  # no search: runs to completion
        limit = run.left()
    elif backend == "greedy":  # as ``backend="greedy"`` at this limit: its window work fixed, the clock a safety net
        opts["window_work"] = greedy_work(planned)
        limit = run.left()
    else:  # CP-SAT turns its limit into deterministic time
        limit = run.limit(planned, backend)
    try:
        baseline = get_problem_backend(backend)
        if baseline is not None:
            sol = baseline(problem, time_limit=limit, seed=seed)
        else:
            sol = solve_formulation(problem.formulation, backend, time_limit=limit, seed=seed, **opts)
    except (SolverError, InfeasibleError) as exc:
        record.update(status="error", error=str(exc))
        sol = None
    finally:  # CP-SAT catches SIGINT during its search and then resets it to the default (kill): restore Ctrl-C
        if run.sigint is not None:
            signal.signal(signal.SIGINT, run.sigint)
    if sol is not None:
        record.update(status=sol.status, objective=int(sol.objective))
        if backend == "trws":
            record["engine_used"] = bool(sol.stats.get("engine", {}).get("used"))
        if sol.bound is not None:
            record["bound"] = int(sol.bound)
        if clock_cut(sol):
            run.cut(backend, sol.objective)
    record["seconds"] = time.perf_counter() - began
    run.stages.append(record)
    return sol


def _anneal_budget(f: Formulation, planned: float) -> dict[str, int]:
    """Guide rounds and annealing steps worth ``planned`` seconds at anneal's nominal costs (never measured).

    The unit graph is at most the formulation's nodes and edges, so this errs on fewer rounds."""
    usable = planned * (1 - anneal.DEFAULTS["reserve"])
    share = anneal.DEFAULTS["guide_share"]
    rounds = int(usable * share / (anneal.ROUND_SECONDS_PER_TERM * (len(f.nodes) + len(f.edges) + 1)))
    mix = np.asarray(anneal.DEFAULTS["mix"], dtype=np.float64)
    compound = 1 + anneal.DEFAULTS["flood_size"]
    looks = float(mix @ [1, compound, compound, 3, anneal.DEFAULTS["window_size"]]) / mix.sum()
    return {"rounds": rounds, "steps": int(usable * (1 - share) / (anneal.LOOK_SECONDS * looks))}


def _better(best: Solution | None, sol: Solution | None) -> Solution | None:
    if sol is None or sol.objective is None:
        return best
    if best is None or sol.objective < best.objective or (sol.status == "optimal" and sol.objective <= best.objective):
        return sol
    return best


def _plan_problem(problem: Problem, budget: float, seed: int, run: Run, **tags: Any) -> tuple[Solution | None, str]:
    """The start plan, then the search stages of the problem's size class, within ``budget`` seconds."""
    small = len(problem.ops) <= EXACT_OPS
    method = "exact" if small else "anneal+lns"
    label = f"segment {tags['segment']}" if "segment" in tags else problem.graph.name
    best = None
    try:
        best = _better(best, _stage(run, problem, "hbm", MIN_STAGE_SECONDS, seed, None, **tags))
        # unhinted and with the whole budget as its limit: the plan ``backend="greedy"`` gives at this limit
        best = _better(best, _stage(run, problem, "greedy", budget, seed, None, **tags))
        if best is None:
            raise InfeasibleError(f"auto: neither greedy nor the hbm baseline found a plan of {problem.graph.name!r}")
        run.done(f"{label}: start")
        search = budget * (1 - START_SHARE)
        first, second = ("cpsat", "anneal") if small else ("anneal", "cpsat")
        share = EXACT_SHARE if small else ANNEAL_SHARE
        lns_planned = search * (1 - share)
        if not small and lns_planned < LNS_MIN_SECONDS <= LNS_MAX_SHARE * search:
            lns_planned = LNS_MIN_SECONDS  # raised to its floor, before the engine's and anneal's shares are set
        lns = search * share >= EXACT_MIN_SECONDS if small else lns_planned >= LNS_MIN_SECONDS
        rest = search - lns_planned if lns and not small else search * share  # anneal's, with the engine's
        after = rest - search * ENGINE_SHARE - ENGINE_LOAD_SECONDS  # anneal's budget when the engine runs
        engine = not small and min(search * ENGINE_SHARE, after) >= ENGINE_MIN_SECONDS
        planned = after if engine else rest
        if not lns:  # too short for CP-SAT to finish on its own budget rather than the clock: anneal gets it all
            planned = search if small else planned + search * (1 - share)
            first, method = "anneal", "anneal"
        if engine:  # the contest engine's start (TRW-S + forest DP under usage prices); anneal goes on from the best
            method = "trws+" + method
            best = _better(best, _stage(run, problem, "trws", search * ENGINE_SHARE, seed, best, **tags))
        best = _better(best, _stage(run, problem, first, planned, seed, best, **tags))
        run.done(f"{label}: {first}")
        if best.status != "optimal" and lns:
            best = _better(best, _stage(run, problem, second, lns_planned, seed, best, **tags))
        run.done(f"{label}: {second}")
    except KeyboardInterrupt:
        run.interrupted = True
    return best, method


def _layers(graph: Graph, segs, hw: HardwareSpec, coef: Coefficients, time_limit: float, seed: int, run: Run) -> Plan:
    """Plan each distinct segment once, then stitch; budgets split evenly over the distinct segments."""
    began, keyed = time.perf_counter(), []
    for seg in segs:
        payload, canon = key_payload(
            seg.graph, "auto", {"seed": seed}, hardware=hw, coefficients=coef, extra=seg.extra()
        )
        keyed.append((digest(payload), canon, seg))
    distinct = {}
    for key, _, seg in keyed:
        distinct.setdefault(key, seg)
    run.timed("keys", began)
    seg_ops = [len(s.graph.compute_ops()) for s in distinct.values()]
    free = cut_ops(graph, segs)
    finish = FINISH_SECONDS_PER_OP * len(graph.compute_ops())
    # the windows' problem (its freed ops repeat cut after cut: the build shares their tables), then its decode
    refine_cost = BUILD_SECONDS_PER_OP * len(free) * len(distinct) / len(segs) + 2 * finish
    n_ops = len(graph.compute_ops())
    whole = WHOLE_SECONDS_PER_OP * n_ops + finish
    whole = whole if whole <= WHOLE_SHARE * time_limit else 0.0
    nominal = BUILD_SECONDS_PER_OP * sum(seg_ops) + finish + whole
    search = SEARCH_SHARE * (time_limit - nominal - refine_cost)
    refine = REFINE_SHARE * search if search * (1 - REFINE_SHARE) >= len(distinct) * MIN_SEGMENT_SECONDS else 0.0
    if refine:  # planned, but the segments' safety net reserves only the stitch: the windows are optional
        search *= 1 - REFINE_SHARE
    else:
        search = SEARCH_SHARE * (time_limit - nominal)
    budgets = _segment_budgets(search, seg_ops, [sum(k == key for k, _, _ in keyed) for key in distinct])
    run.bar.total = STAGES * len(distinct) + (1 if refine else 0) + (1 if whole else 0)
    solved: dict[str, dict] = {}
    methods = []
    for n, (key, seg) in enumerate(distinct.items()):
        if run.interrupted:
            break
        run.reserve = BUILD_SECONDS_PER_OP * sum(seg_ops[n + 1 :]) + finish + whole
        try:
            began = time.perf_counter()
            problem = restricted_problem(seg, hw, coef)
            assert problem.formulation is not None  # built here, so the build is timed as such
            run.timed("build", began)
            run.slowdown = _slowdown(run.phases["build"], BUILD_SECONDS_PER_OP * sum(seg_ops[: n + 1]))
        except KeyboardInterrupt:
            run.interrupted = True
            break
        sol, method = _plan_problem(problem, budgets[n], seed, run, segment=n)
        if sol is None:
            break
        sol.stats = {}
        began = time.perf_counter()
        solved[key] = to_canonical(decode(problem, sol, backend="auto", seed=seed), _canon(keyed, key))
        run.timed("decode", began)
        methods.append(method)
    if len(solved) < len(distinct):
        raise KeyboardInterrupt  # interrupted before every distinct segment had a valid plan
    parts = [(solved[key], canon) for key, canon, _ in keyed]
    status = "feasible"
    message = f"decomposed into {len(segs)} segments at {len(segs) - 1} cuts, crossing tensors in device memory"
    began = time.perf_counter()
    try:
        plan = stitch(graph, hw, coef, parts, backend="auto", seed=seed, status=status, message=message)
    except PlanError as exc:  # not even fresh addresses make it valid: the whole graph re-planned, never given up
        plan = _replanned(graph, hw, coef, seed, run, exc)
    run.timed("stitch", began)
    refined = None
    if refine and not run.interrupted:
        run.reserve = finish + whole  # the refined plan's decode, then the whole graph's greedy
        if run.left() < (refine_cost - finish) * run.slowdown:  # the clock says no: skipped, and said so
            run.cut("cuts")
        else:
            refined = refine_cuts(graph, plan, free, hw, coef, seed, run, refine)
    plan = refined or plan
    kept = None
    if whole and not run.interrupted:
        run.reserve = 0.0
        if run.left() < whole * run.slowdown:  # the clock says no: skipped, and said so
            run.cut("whole")
        else:
            kept = whole_greedy(graph, plan, hw, coef, seed, run, whole)
    plan = kept or plan
    plan.stats["auto"] = _report(
        "layers/" + "+".join(sorted(set(methods))) + ("+cuts" if refine else "") + ("+whole" if whole else ""),
        run, segments=len(segs), distinct=len(distinct), segment_budgets_s=[round(b, 3) for b in budgets],
        cut_ops=len(free) if refine else 0, whole_greedy_kept=kept is not None,
    )  # fmt: skip
    return plan


def whole_greedy(graph: Graph, plan: Plan, hw, coef, seed: int, run: Run, planned: float) -> Plan | None:
    """Greedy on the whole graph: its window moves may cross the cuts, where the stitched plan keeps every crossing
    tensor in device memory. Its plan if cheaper than ``plan`` (ties keep the layered one), else None."""
    began = time.perf_counter()
    try:
        problem = Problem(graph, hw, coef)
        assert problem.formulation is not None  # built here, so the build is timed as such
    except KeyboardInterrupt:
        run.interrupted = True
        return None
    run.timed("whole_build", began)
    start = _stage(run, problem, "hbm", MIN_STAGE_SECONDS, seed, None, segment="whole")
    sol = _better(start, _stage(run, problem, "greedy", planned, seed, start, segment="whole"))
    run.done("whole: greedy")
    if sol is None:
        return None
    began = time.perf_counter()
    sol.stats = {}
    candidate = decode(problem, sol, backend="auto", seed=seed)
    run.timed("whole_decode", began)
    if candidate.cost_us >= plan.cost_us:
        return None
    try:
        candidate.validate()
    except PlanError as exc:
        raise PlanError(f"auto: the whole graph's greedy plan is invalid: {exc}") from exc
    candidate.status = plan.status  # the layers method claims feasibility only
    candidate.message = plan.message + "; whole-graph greedy was cheaper than the stitched plan, kept"
    return candidate


def _replanned(graph: Graph, hw, coef, seed: int, run: Run, why: PlanError) -> Plan:
    """Greedy on the whole graph, when the stitched plan is invalid there; recorded as a fallback."""
    problem = Problem(graph, hw, coef)
    sol = _better(_stage(run, problem, "hbm", MIN_STAGE_SECONDS, seed, None, segment="whole"),
                  _stage(run, problem, "greedy", MIN_STAGE_SECONDS, seed, None, segment="whole"))  # fmt: skip
    sol.stats = {}
    plan = decode(problem, sol, backend="auto", seed=seed)
    plan.validate()
    plan.status, plan.message = "feasible", f"the stitched plan was invalid ({why}); the whole graph re-planned"
    if run.clock is not None:
        run.clock.fall_back("greedy (whole graph)")
    return plan


def _segment_budgets(search: float, ops: list[int], copies: list[int]) -> list[float]:
    """Each distinct segment's share of ``search`` seconds: a floor, the rest by ops x copies (a gain on a
    segment that repeats 32 times counts 32 times)."""
    floor = min(SEGMENT_FLOOR_SECONDS, max(search, 0.0) / len(ops))
    weights = [o * c for o, c in zip(ops, copies)]
    rest = max(search - floor * len(ops), 0.0)
    return [max(floor + rest * w / sum(weights), MIN_STAGE_SECONDS) for w in weights]


def cut_ops(graph: Graph, segs) -> set[str]:
    """The ops whose decisions the cuts restrict: the producer of each tensor crossing a cut and its consumers."""
    leaving = {t for seg in segs for t in seg.restrict if t not in graph.outputs}
    return {
        o.name
        for o in graph.ops.values()
        if o.kind != "view" and (o.output in leaving or any(resolve(graph, x).base in leaving for x in o.inputs))
    }


def _tiling_key(layout, space) -> tuple[str, int] | None:
    """A layout's tiled loop as a plan names it: (its tiled dim, the tile count), None when untiled."""
    return None if layout.tile is None else (space.dims[layout.tile.dim], layout.tile.tiles)


def refine_cuts(graph: Graph, plan: Plan, free: set[str], hw, coef, seed: int, run: Run, planned: float) -> Plan | None:
    """Re-plan the ops around the cuts on the full graph, every other op fixed to the stitched plan.

    The stitched plan is the start (so the result is never worse); None if it cannot be expressed (a
    stitched choice outside a freed op's candidates) or nothing better was found."""
    began = time.perf_counter()
    decided = {o.name: o for o in plan.ops}
    loops = plan.loops  # a fixed op keeps its tiled loop: (its tiled dim, the tile count, the staged tensors)
    tiling = {n: (x.op_dims[n], x.tiles, tuple(x.staged)) for x in loops for n in x.ops}
    fixed = {
        name: (
            tuple(o.division[d] for d in op_space(graph, graph.ops[name]).dims),
            o.stick,
            o.residency,
            tiling.get(name),
        )
        for name, o in decided.items()
        if name not in free
    }
    problem = Problem(graph, hw, coef, fixed=fixed)
    start = []
    for i, o in enumerate(problem.ops):
        d, space = decided[o.name], problem.cands[i].space
        match = [
            s
            for s, c in enumerate(problem.candidates[i])
            if c.residency == d.residency
            and problem.layout(i, s).stick == d.stick
            and problem.layout(i, s).division.as_dict(space) == d.division
            and _tiling_key(problem.layout(i, s), space) == (tiling[o.name][:2] if o.name in tiling else None)
        ]
        if not match:
            return None
        start.append(match[0])
    start = list(problem.normalize(start))
    address = {t.name: t.address for t in plan.tensors}
    copies = {(e.consumer, e.operand): e.copy_address for e in plan.edges}
    offsets = {("node", i): address[o.output] for i, o in enumerate(problem.ops) if address.get(o.output) is not None}
    for k, e in enumerate(problem.edges):
        if copies.get((problem.ops[e.consumer].name, e.operand)) is not None:
            offsets[("edge", k)] = copies[(problem.ops[e.consumer].name, e.operand)]
    hint = Solution(tuple(start), offsets, "feasible", problem.formulation.evaluate(start))
    run.timed("cuts_build", began)
    sol = _stage(run, problem, CUTS_BACKEND, planned, seed, hint, segment="cuts")
    run.done(f"cuts: {CUTS_BACKEND}")
    if sol is None or sol.objective >= hint.objective:
        return None
    began = time.perf_counter()
    sol.stats = {}
    refined = decode(problem, sol, backend="auto", seed=seed)
    try:
        refined.validate()
    except PlanError as exc:
        raise PlanError(f"auto: the plan with re-planned cuts is invalid: {exc}") from exc
    run.timed("cuts_decode", began)
    refined.status = plan.status  # the layers method claims feasibility, whatever the windows' solver said
    refined.message = plan.message + f"; {len(free)} ops around the cuts re-planned on the full graph"
    return refined


def _canon(keyed, key):
    return next(c for k, c, _ in keyed if k == key)
