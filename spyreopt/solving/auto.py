"""``backend="auto"``: one time budget (the problem build included), the method chosen per problem.

* **layers**: when the schedule splits into segments that repeat (``segments.split``:
  transformer layers), each distinct segment is planned once as below and the
  plans are stitched onto the full graph (``auto_layers``, through the one
  decomposition of ``layers``). The tensor
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

from tqdm import tqdm

from spyreopt import limits
from spyreopt.costmodel.coefficients import Coefficients, default
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.rates import BUILD_SECONDS_PER_OP, FINISH_SECONDS_PER_OP
from spyreopt.solving import pipeline
from spyreopt.solving.auto_layers import solve_layers
from spyreopt.solving.segments import split
from spyreopt.solving.stages import STAGES, Progress, Run, plan_problem, report, slowdown


def solve(
    graph: Graph | Problem,
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    hardware: HardwareSpec | None = None,
    coefficients: Coefficients | None = None,
    progress: bool | None = None,
    on_stage: Progress | None = None,
) -> Plan:
    """Plan ``graph`` within ``time_limit`` seconds from this call; ``plan.stats["auto"]`` says what was done.

    ``progress`` None shows a bar only when stderr is a terminal; ``on_stage`` is
    called with a label after every stage (and may raise KeyboardInterrupt, as
    Ctrl-C would).
    """
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
            plan = solve_layers(graph, segs, hw, coef, time_limit, seed, run)
        else:
            began = time.perf_counter()
            problem = graph if isinstance(graph, Problem) else Problem(graph, hw, coef)
            problem.formulation  # noqa: B018 -- built here (a lazy property), so the build is timed as such
            run.timed("build", began)
            built = 0 if isinstance(graph, Problem) else BUILD_SECONDS_PER_OP * len(problem.ops)
            run.slowdown = slowdown(run.phases["build"], built) if built else 1.0
            run.reserve = FINISH_SECONDS_PER_OP * len(problem.ops)
            budget = limits.search_budget(time_limit, len(problem.ops), built=bool(built))
            bar.total = STAGES
            sol, method = plan_problem(problem, budget, seed, run)
            if sol is None:  # interrupted before any valid plan
                raise KeyboardInterrupt
            sol.stats = {}
            began = time.perf_counter()
            plan = pipeline.finish(problem, sol, "auto", seed)
            run.timed("decode", began)
            plan.stats["auto"] = report(method, run, problem_ops=len(problem.ops))
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
