"""``spyreopt bench --suite rates``: re-measure the machine-calibrated rates of ``spyreopt.rates`` on this machine.

One row per rate: what this machine does (``note``: measured, beside the nominal value the budgets use). A nominal
rate should stay below the measured one (a budget then ends before the clock does); a machine that measures below
a nominal rate ends runs on the clock, and plans say so (``stats["limits"]``). Run it idle: under load every rate
measures low. Timings are wall seconds of single runs on the built-in workloads (``rate_workloads``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from spyreopt import rates, workloads
from spyreopt.bench.report import Row
from spyreopt.model.problem import Problem
from spyreopt.solvers.anneal.search import DEFAULTS as ANNEAL
from spyreopt.solvers.registry import solve_formulation
from spyreopt.solving import pipeline

RATE_WORKLOADS = ("transformer_block", "mha", "layer_stack")


def _find(stats: dict, key: str):
    """``key``'s value anywhere in nested stats (a backend's own stats sit under the chain's)."""
    if key in stats:
        return stats[key]
    for v in stats.values():
        if isinstance(v, dict) and (found := _find(v, key)) is not None:
            return found
    return None


def _row(
    name: str, what: str, measured: float, nominal: float, seconds: float, ops: int, higher_is_faster: bool
) -> Row:
    ok = measured >= nominal if higher_is_faster else measured <= nominal
    note = f"measured {measured:.4g}, nominal {nominal:.4g} ({'budget ends first' if ok else 'the clock may cut'})"
    return Row("rates", name, what, "measured", None, None, None, round(seconds, 3), True, ops, note)


def _timed(fn: Callable, *args, **kwargs) -> tuple:
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def rate_rows(names: tuple[str, ...] = RATE_WORKLOADS, seed: int = 0) -> list[Row]:
    """Every rate of ``spyreopt.rates`` that a run can observe, measured on ``names`` (summed over them)."""
    build = finish = units = greedy_s = looks = look_s = dtime = cpsat_s = 0.0
    ops = 0
    for name in names:
        graph = workloads.get(name)
        problem, seconds = _timed(Problem, graph)
        _, more = _timed(getattr, problem, "formulation")
        build += seconds + more
        ops += len(problem.ops)
        f = problem.formulation
        work = 4 * rates.WINDOW_UNITS_PER_SECOND  # 4 s nominal
        sol, seconds = _timed(solve_formulation, f, "greedy", time_limit=60.0, seed=seed, window_work=work)
        units += sol.stats.get("window_work", 0)
        greedy_s += seconds
        _, seconds = _timed(pipeline.finish, problem, sol, "greedy", seed)
        finish += seconds
        sol = solve_formulation(f, "anneal", time_limit=60.0, seed=seed, presolve=False, rounds=0, steps=200_000)
        mix = ANNEAL["mix"]
        compound = 1 + ANNEAL["flood_size"]
        per_step = sum(w * c for w, c in zip(mix, (1, compound, compound, 3, ANNEAL["window_size"]))) / sum(mix)
        looks += sol.stats["steps"] * per_step
        look_s += sol.stats["steps"] / max(sol.stats["moves_per_second"], 1e-9)
        sol, seconds = _timed(solve_formulation, f, "cpsat", time_limit=10.0, seed=seed)
        dtime += float(_find(sol.stats, "deterministic_time") or 0.0)
        cpsat_s += seconds
    return [
        _row("build_s_per_op", "Problem and Formulation built", build / ops, rates.BUILD_SECONDS_PER_OP, build, ops, False),
        _row("finish_s_per_op", "decode and validate", finish / ops, rates.FINISH_SECONDS_PER_OP, finish, ops, False),
        _row("window_units_per_s", "greedy, window work 4 s nominal", units / greedy_s, rates.WINDOW_UNITS_PER_SECOND,
             greedy_s, ops, True),
        _row("anneal_look_s", "anneal, 200,000 steps, no rounds", look_s / looks, rates.LOOK_SECONDS, look_s, ops, False),
        _row("cpsat_dtime_per_s", "cpsat, 10 s limit (its model build counted: a lower bound)", dtime / cpsat_s,
             rates.DTIME_PER_SECOND, cpsat_s, ops, True),
    ]  # fmt: skip
