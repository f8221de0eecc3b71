"""auto's stages on one problem: the start plan, then the search stages of its size class, within a planned budget.

Budgets and methods are described in ``solving.auto``; each stage hands the backend its budget in the backend's
own work units (greedy's window work, anneal's rounds and steps, the engine's budget, CP-SAT's deterministic time)
from the rates of ``spyreopt.rates``.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from spyreopt import limits
from spyreopt.costmodel.analytic import COST_UNIT_US
from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model.formulation import Solution
from spyreopt.model.problem import Problem
from spyreopt.rates import (
    ENGINE_LOAD_SECONDS,
    ENGINE_MIN_SECONDS,
    EXACT_MIN_SECONDS,
    LNS_MIN_SECONDS,
)
from spyreopt.solvers import registry
from spyreopt.solvers.anneal.search import work_for as anneal_work
from spyreopt.solving import pipeline
from spyreopt.solving.pipeline import START_SHARE  # greedy's start, as for one backend: never worse than greedy

EXACT_OPS = 24  # at or below this many compute ops CP-SAT gets the first stage (it proves the Spyre kernels)
STAGES = 3  # progress steps per problem: start plan, first search, second search
EXACT_CPSAT_SHARE = 0.5  # of a small problem's search budget: CP-SAT's (the rest: anneal)
ANNEAL_TRWS_SHARE = 0.7  # of a large problem's search budget: anneal's and the engine's (the rest: CP-SAT's LNS)
TRWS_SHARE = 0.2  # of a large problem's search budget: the contest engine's start ("trws"), taken from anneal's
LNS_MAX_SHARE = 0.5  # CP-SAT's LNS stage is raised to ``rates.LNS_MIN_SECONDS`` while that is at most this share
MIN_STAGE_SECONDS = 0.2
MAX_SLOWDOWN = 2.0  # the safety net scales the reserved work by the measured build slowdown, at most this

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


def slowdown(measured: float, nominal: float) -> float:
    """How much slower than nominal the builds ran, between 1 and ``MAX_SLOWDOWN`` (a segment's build is
    heavier per op than the stitch it predicts, so the ratio is damped)."""
    return min(max(1.0, measured / nominal), MAX_SLOWDOWN)


def report(method: str, run: Run, **extra: Any) -> dict:
    return {
        "method": method,
        "stages": [{k: v for k, v in s.items() if k != "seconds"} for s in run.stages],
        "interrupted": run.interrupted,
        **extra,
    }


def stage(run: Run, problem: Problem, backend: str, planned: float, seed: int, hint: Solution | None, **tags: Any):
    """One backend run on ``problem`` (hinted); recorded in ``run.stages``. None if it raised a typed error."""
    began = time.perf_counter()
    record: dict[str, Any] = {"backend": backend, **tags, "planned_s": round(planned, 3)}
    if hint is not None:
        record["start"] = int(hint.objective)
    opts: dict[str, Any] = {"hint": hint} if hint is not None else {}
    if backend == "anneal":  # budgets in rounds and steps; the time limit is only the safety net
        f = problem.formulation
        opts.update(zip(("rounds", "steps"), anneal_work(planned, len(f.nodes) + len(f.edges))))
        limit = run.left()
    elif backend == "trws":  # the contest engine's start only (anneal follows as its own stage); rounds budgeted
        opts.update(budget=planned, then_anneal=False)
        limit = run.left()
    elif backend == "hbm":  # no search: runs to completion
        limit = run.left()
    elif backend == "greedy":  # as ``backend="greedy"`` at this limit: its window work fixed, the clock a safety net
        opts["window_work"] = pipeline.greedy_work(planned)
        limit = run.left()
    else:  # CP-SAT turns its limit into deterministic time
        limit = run.limit(planned, backend)
    try:
        sol = registry.solve(problem, backend, time_limit=limit, seed=seed, **opts)
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
        if pipeline.clock_cut(sol):
            run.cut(backend, sol.objective)
    record["seconds"] = time.perf_counter() - began
    run.stages.append(record)
    return sol


def better(best: Solution | None, sol: Solution | None) -> Solution | None:
    if sol is None or sol.objective is None:
        return best
    if best is None or sol.objective < best.objective or (sol.status == "optimal" and sol.objective <= best.objective):
        return sol
    return best


def plan_problem(problem: Problem, budget: float, seed: int, run: Run, **tags: Any) -> tuple[Solution | None, str]:
    """The start plan, then the search stages of the problem's size class, within ``budget`` seconds."""
    small = len(problem.ops) <= EXACT_OPS
    method = "exact" if small else "anneal+lns"
    label = f"segment {tags['segment']}" if "segment" in tags else problem.graph.name
    best = None
    try:
        best = better(best, stage(run, problem, "hbm", MIN_STAGE_SECONDS, seed, None, **tags))
        # unhinted and with the whole budget as its limit: the plan ``backend="greedy"`` gives at this limit
        best = better(best, stage(run, problem, "greedy", budget, seed, None, **tags))
        if best is None:
            raise InfeasibleError(f"auto: neither greedy nor the hbm baseline found a plan of {problem.graph.name!r}")
        run.done(f"{label}: start")
        search = budget * (1 - START_SHARE)
        first, second = ("cpsat", "anneal") if small else ("anneal", "cpsat")
        share = EXACT_CPSAT_SHARE if small else ANNEAL_TRWS_SHARE
        lns_planned = search * (1 - share)
        if not small and lns_planned < LNS_MIN_SECONDS <= LNS_MAX_SHARE * search:
            lns_planned = LNS_MIN_SECONDS  # raised to its floor, before the engine's and anneal's shares are set
        lns = search * share >= EXACT_MIN_SECONDS if small else lns_planned >= LNS_MIN_SECONDS
        rest = search - lns_planned if lns and not small else search * share  # anneal's, with the engine's
        after = rest - search * TRWS_SHARE - ENGINE_LOAD_SECONDS  # anneal's budget when the engine runs
        engine = not small and min(search * TRWS_SHARE, after) >= ENGINE_MIN_SECONDS
        planned = after if engine else rest
        if not lns:  # too short for CP-SAT to finish on its own budget rather than the clock: anneal gets it all
            planned = search if small else planned + search * (1 - share)
            first, method = "anneal", "anneal"
        if engine:  # the contest engine's start (TRW-S + forest DP under usage prices); anneal goes on from the best
            method = "trws+" + method
            best = better(best, stage(run, problem, "trws", search * TRWS_SHARE, seed, best, **tags))
        best = better(best, stage(run, problem, first, planned, seed, best, **tags))
        run.done(f"{label}: {first}")
        if best.status != "optimal" and lns:
            best = better(best, stage(run, problem, second, lns_planned, seed, best, **tags))
        run.done(f"{label}: {second}")
    except KeyboardInterrupt:
        run.interrupted = True
    return best, method
