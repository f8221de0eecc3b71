"""The ``spyre`` suite: every built-in workload x backend, with the baselines, the bound and the simulator.

One row each with the plan's predicted and simulated time, the backend's bound,
solve time and validity; ``workload_facts`` answers what the published Spyre
comparisons ask of the best plan (scores kept on chip, relayout chosen). The
workloads that need tiled loops (``workloads.TILED``) get a second row per
planning backend with ``forbid=("tiling",)``, and their loops and speedups.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from tqdm import tqdm

from spyreopt import workloads
from spyreopt.bench.report import Row
from spyreopt.errors import SpyreoptError
from spyreopt.hw.simulator import simulate
from spyreopt.model.bounds import lower_bound_us
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem
from spyreopt.model.restrict import make_problem
from spyreopt.solving.entry import solve

SPYRE_BACKENDS = ("greedy", "anneal", "cpsat", "milp", "independent", "hbm")
NO_TILING = " no-tiling"  # suffix of the rows of the same backend with forbid=("tiling",), on the tiled workloads


def simulated_us(plan: Plan) -> float:
    return simulate(plan).time_us


def plan_row(
    suite: str, name: str, backend: str, problem: Problem, time_limit: float, seed: int
) -> tuple[Row, Plan | None]:
    start = time.perf_counter()
    try:
        plan = solve(problem, backend=backend, time_limit=time_limit, seed=seed)
    except SpyreoptError as exc:
        row = Row.failed(suite, name, backend, time.perf_counter() - start, len(problem.ops), exc)
        return row, None
    seconds = time.perf_counter() - start
    sim = simulated_us(plan)  # raises PlanError on an illegal plan: never a silent pass
    bound = plan.bound_us
    return Row(suite, name, backend, plan.status, plan.cost_us, sim, bound, seconds, True, len(problem.ops)), plan


def spyre_suite(
    backends: Iterable[str], time_limit: float, seed: int = 0, progress: bool = True
) -> tuple[list[Row], dict]:
    """Rows for every workload and backend, and the per-workload facts the targets need."""
    rows: list[Row] = []
    facts: dict[str, dict] = {}
    names = workloads.names() + list(workloads.TILED)
    backends = list(backends)
    planners = [b for b in backends if b not in ("independent", "hbm")]
    total = len(names) * (len(backends) + 1) + len(workloads.TILED) * len(planners)
    bar = tqdm(total=total, disable=not progress, desc="spyre suite", unit="solve")
    for name in names:
        problem = Problem(workloads.get(name))
        assert problem.formulation.nodes  # build the standard form once, outside every backend's time
        lb = lower_bound_us(problem)
        rows.append(Row("spyre", name, "lower-bound", "bound", None, None, lb, 0.0, True, len(problem.ops)))
        bar.update()
        plans = {}
        for backend in backends:
            bar.set_postfix_str(f"{name}/{backend}")
            row, plan = plan_row("spyre", name, backend, problem, time_limit, seed)
            rows.append(row)
            if plan is not None:
                plans[backend] = plan
            bar.update()
        untiled = {}
        if name in workloads.TILED:  # the same backends without tiled loops, side by side
            plain = make_problem(workloads.get(name), forbid=("tiling",))
            assert plain.formulation.nodes
            for backend in planners:
                bar.set_postfix_str(f"{name}/{backend}{NO_TILING}")
                row, plan = plan_row("spyre", name, backend, plain, time_limit, seed)
                row.backend += NO_TILING
                rows.append(row)
                if plan is not None:
                    untiled[backend] = plan
                bar.update()
        facts[name] = workload_facts(name, plans) | loop_facts(plans, untiled)
    bar.close()
    return rows, facts


def loop_facts(plans: dict[str, Plan], untiled: dict[str, Plan]) -> dict:
    """Per backend: its loops (ops, dim, tiles) and its simulated speedup over the same backend without tiling."""
    out: dict = {}
    for backend, plan in plans.items():
        if backend not in untiled:
            continue
        loops = "; ".join(f"{'+'.join(x.ops)} over {x.dim} x{x.tiles}" for x in plan.loops) or "none"
        out[f"{backend}_loops"] = loops
        out[f"{backend}_speedup_vs_no_tiling"] = round(simulated_us(untiled[backend]) / simulated_us(plan), 3)
    return out


def workload_facts(name: str, plans: dict[str, Plan]) -> dict:
    """What the published comparisons ask about a workload's best plan."""
    if not plans:
        return {}
    best_backend = min(
        (b for b in plans if b not in ("hbm", "independent")), key=lambda b: plans[b].cost_us, default=None
    )
    if best_backend is None:
        return {}
    best = plans[best_backend]
    facts: dict = {"best_backend": best_backend}
    if name in ("sdpa", "mha", "transformer_block", "long_attention"):
        scores = [t for t in best.tensors if t.name.endswith("scores") or ".sub" in t.name or ".exp" in t.name]
        facts["scores_on_chip"] = bool(scores) and all(t.residency != "hbm" for t in scores)
        if name == "long_attention":
            facts["scores_in_loop"] = best.op("scores").loop is not None
    if name == "relayout":
        facts["relayout_chosen"] = any(e.mode == "relayout" for e in best.edges)
    return facts
