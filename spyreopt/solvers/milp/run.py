"""Running a PuLP problem on HiGHS (in process) or CBC, with a MIP start, quietly, and
reading back what the solver actually proved.

PuLP's ``prob.status`` says "Optimal" for HiGHS even when the time limit stopped
it with a mere incumbent; ``prob.sol_status`` tells the two apart, and the
solver's own dual bound says how far from optimal the incumbent may be.
"""

from __future__ import annotations

import math
import os
import re
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pulp

from spyreopt.errors import SolverError
from spyreopt.rates import READ_SECONDS_PER_VARIABLE
from spyreopt.solvers.quiet import quiet_stdout

ABS_GAP = 0.999
"""Costs are integers, so a gap below 1 proves optimality; asking for less only burns time.
Runners take it divided by the model's unit (``MilpModel.unit`` cost units per model unit)."""

PROBING_OFF = 1 << 15
"""HiGHS's presolve rule mask bit for probing: probing checks the clock too rarely (1.7 s against a 0.9 s
limit on long_attention's 12k-column model) and no interrupt callback runs inside it."""

CBC_SHARE = 0.85
"""CBC overruns its ``-sec`` limit by up to ~12% on 45k-variable models (root cuts and heuristics do not check the clock)."""


@dataclass
class RunResult:
    """What one solver call established about the problem it was given."""

    has_solution: bool
    proven: bool  # the solution is optimal for this problem (gap below abs_gap)
    infeasible: bool
    hit_limit: bool  # stopped by the time limit
    bound: float | None  # dual bound of the problem's objective, None when unknown
    detail: str  # the solver's own status words


Runner = Callable[..., RunResult]


def _seconds_left(deadline: float, prob: pulp.LpProblem, share: float = 1.0) -> float:
    """The solver's own time limit, taken as late as possible: what remains, less the read-back."""
    reserve = READ_SECONDS_PER_VARIABLE * prob.numVariables()
    return max(share * (deadline - time.perf_counter()) - reserve, 0.01)


class _HiGHS(pulp.HiGHS):
    """PuLP's in-process HiGHS plus a MIP start (PuLP's HiGHS API ignores warmStart), no banner,
    and the time limit set after PuLP has built the model (building takes seconds on large ones)."""

    def __init__(self, start: dict[pulp.LpVariable, float] | None, deadline: float, **kwargs):
        super().__init__(**kwargs)
        self.start = start
        self.deadline = deadline

    def createAndConfigureSolver(self, lp):
        with quiet_stdout():
            super().createAndConfigureSolver(lp)

    def callSolver(self, lp):
        if self.start:
            index = np.array([v.index for v in self.start], dtype=np.int32)
            value = np.array(list(self.start.values()), dtype=np.float64)
            lp.solverModel.setSolution(len(index), index, value)
        h = lp.solverModel
        h.setOptionValue("time_limit", _seconds_left(self.deadline, lp))
        h.setOptionValue("presolve_rule_off", PROBING_OFF)
        stop_at = self.deadline - READ_SECONDS_PER_VARIABLE * lp.numVariables()

        def past_deadline(event) -> None:  # HiGHS checks its own limit too rarely: presolve and root cuts overran by 0.7 s
            if time.perf_counter() >= stop_at:
                event.interrupt()

        for kind in (h.cbMipInterrupt, h.cbSimplexInterrupt, h.cbIpmInterrupt):
            kind += past_deadline
        h.run()


def run_highs(prob: pulp.LpProblem, *, deadline: float, seed: int, start, abs_gap: float = ABS_GAP) -> RunResult:
    import highspy  # present whenever this runner is selected (checked by ``runner``)

    solver = _HiGHS(
        start,
        deadline,
        msg=False,
        threads=1,
        gapRel=0.0,
        gapAbs=abs_gap,
        log_to_console=False,
        random_seed=seed,
    )
    prob.solve(solver)
    h = prob.solverModel
    status = h.getModelStatus()
    info = h.getInfo()
    stopped = status in (highspy.HighsModelStatus.kTimeLimit, highspy.HighsModelStatus.kInterrupt)
    # PuLP maps an interrupt to "integer feasible" even when there is no solution: ask HiGHS (2 = feasible)
    has = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible) and (
        info.primal_solution_status == 2
    )
    bound = info.mip_dual_bound if info.mip_node_count >= 0 else None
    if has and prob.sol_status == pulp.LpSolutionOptimal and (bound is None or not math.isfinite(bound)):
        bound = info.objective_function_value  # a pure LP: no branch and bound, its optimum is the bound
    return RunResult(
        has_solution=has,
        proven=prob.sol_status == pulp.LpSolutionOptimal,
        infeasible=prob.status == pulp.LpStatusInfeasible,
        hit_limit=stopped,
        bound=bound if bound is not None and math.isfinite(bound) else None,
        detail=f"{h.modelStatusToString(status)}; {pulp.LpSolution[prob.sol_status]}",
    )


def run_cbc(prob: pulp.LpProblem, *, deadline: float, seed: int, start, abs_gap: float = ABS_GAP) -> RunResult:
    for v in prob.variables():
        v.varValue = None if start is None else start.get(v)
    with tempfile.TemporaryDirectory() as tmp:
        log_path = os.path.join(tmp, "cbc.log")
        with warnings.catch_warnings():  # PuLP 3.3 announces PULP_CBC_CMD's removal in 4.0 on every use
            warnings.simplefilter("ignore", DeprecationWarning)
            solver = _CBC(prob, deadline, seed, start is not None, log_path, abs_gap)
        prob.solve(solver)
        with open(log_path) as fh:
            log = fh.read()
    has = prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    proven = prob.sol_status == pulp.LpSolutionOptimal
    bound = _cbc_number(log, "Lower bound") if not proven else _cbc_number(log, "Objective value")
    result = re.search(r"Result - (.*)", log)
    return RunResult(
        has_solution=has,
        proven=proven,
        infeasible=prob.status == pulp.LpStatusInfeasible,
        hit_limit=bool(re.search(r"Result - Stopped on time", log)),
        bound=bound,
        detail=f"{result.group(1).strip() if result else 'no result line'}; {pulp.LpSolution[prob.sol_status]}",
    )


class _CBC(pulp.PULP_CBC_CMD):
    """PuLP's CBC whose ``-sec`` is computed when the command line is built, after the MPS file is written."""

    def __init__(self, prob: pulp.LpProblem, deadline: float, seed: int, warm: bool, log_path: str, abs_gap: float):
        self.prob, self.deadline = prob, deadline
        super().__init__(
            msg=False,
            threads=1,
            gapRel=0.0,
            gapAbs=abs_gap,
            warmStart=warm,
            logPath=log_path,
            options=[f"randomCbcSeed {seed + 1}", f"randomSeed {seed + 1}"],
        )

    @property
    def timeLimit(self) -> float:
        return _seconds_left(self.deadline, self.prob, CBC_SHARE)

    @timeLimit.setter
    def timeLimit(self, _value) -> None:
        """PuLP's constructor assigns it; the deadline decides instead."""


def _cbc_number(log: str, label: str) -> float | None:
    match = re.search(rf"^{label}:\s*(\S+)", log, re.MULTILINE)
    if not match:
        return None
    try:
        value = float(match.group(1))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _highs_available() -> bool:
    return pulp.HiGHS(msg=False).available()


def _cbc_available() -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(pulp.PULP_CBC_CMD(msg=False).available())


SOLVERS: dict[str, tuple[Runner, Callable[[], bool]]] = {
    "highs": (run_highs, _highs_available),
    "cbc": (run_cbc, _cbc_available),
}


def runner(name: str) -> Runner:
    """The run function of a solver by name; SolverError naming the available ones otherwise."""
    available = [n for n, (_, ok) in SOLVERS.items() if ok()]
    if name not in SOLVERS or name not in available:
        what = "unknown" if name not in SOLVERS else "unavailable"
        raise SolverError(f"milp: {what} solver {name!r}; available solvers: {', '.join(available) or 'none'}")
    return SOLVERS[name][0]
