"""The ``models`` benchmark suite: whole decoders planned end to end, ``auto`` against anneal given more time.

Each case is a preset's prefill or decode step. ``auto`` runs with the time
limit counted from before the graph is built; each baseline backend gets
``baseline_factor`` times that limit (through ``so.solve``, so its problem build
comes on top, outside its limit). Every plan is validated; ``simulate=True``
also runs the simulator on it (slow for thousands of ops). Rows are
``spyreopt.bench.report.Row`` so the suite prints with the others.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from tqdm import tqdm

from spyreopt.bench.report import Row
from spyreopt.errors import SpyreoptError
from spyreopt.presets.catalog import get as preset
from spyreopt.solving.entry import solve

# (preset, phase, seq, context): the whole-model cases
CASES = (("llama-3-8b", "prefill", 2048, None), ("llama-3-8b", "decode", 1, 4096))


def run(
    cases: Iterable[tuple[str, str, int, int | None]] = CASES,
    *,
    time_limit: float = 60.0,
    baselines: Iterable[str] = ("anneal",),
    baseline_factor: float = 10.0,
    layers: int | None = None,
    seed: int = 0,
    simulate: bool = False,
    progress: bool = True,
) -> list[Row]:
    """One row per case and backend: ``auto`` first, then each baseline; the note compares with auto."""
    cases, baselines = list(cases), list(baselines)
    rows: list[Row] = []
    bar = tqdm(total=len(cases) * (1 + len(baselines)), disable=not progress, desc="models", unit="solve")
    for name, phase, seq, context in cases:
        bar.set_postfix_str(f"{name} {phase}/auto")
        auto = _row(name, phase, seq, context, layers, "auto", time_limit, seed, simulate)
        within = auto.valid and auto.solve_s <= time_limit
        auto.note = f"{'within' if within else 'over'} {time_limit:g} s wall (build included); {auto.note}"
        rows.append(auto)
        bar.update()
        for backend in baselines:
            bar.set_postfix_str(f"{name} {phase}/{backend}")
            row = _row(name, phase, seq, context, layers, backend, baseline_factor * time_limit, seed, simulate)
            if row.cost_us and auto.cost_us:
                row.note = f"limit {baseline_factor * time_limit:g} s + build; auto/{backend} cost {auto.cost_us / row.cost_us:.4f}"
            rows.append(row)
            bar.update()
    bar.close()
    return rows


def _row(name, phase, seq, context, layers, backend, time_limit, seed, simulate) -> Row:
    start = time.perf_counter()
    graph = None
    try:
        graph = preset(name, phase=phase, seq=seq, context=context, layers=layers)
        plan = solve(graph, backend=backend, time_limit=time_limit, seed=seed)
    except SpyreoptError as exc:
        ops = 0 if graph is None else len(graph.compute_ops())
        return Row(
            "models", name, backend, "error", None, None, None, time.perf_counter() - start, False, ops, str(exc)[:200]
        )
    wall = time.perf_counter() - start
    plan.validate()  # raises PlanError: never a silent pass
    sim = None
    if simulate:
        from spyreopt.hw.simulator import simulate as run_simulator

        sim = run_simulator(plan).time_us
    note = plan.message.split(";")[0] if backend == "auto" else ""
    return Row(
        "models", graph.name, backend, plan.status, plan.cost_us, sim, plan.bound_us, wall, True, len(plan.ops), note
    )
