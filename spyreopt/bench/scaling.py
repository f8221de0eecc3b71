"""The ``scaling`` suite: synthetic layer stacks of 10 to 3,000 ops, solve time and cost per backend."""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from tqdm import tqdm

from spyreopt import workloads
from spyreopt.bench.report import Row
from spyreopt.bench.spyre import plan_row
from spyreopt.model.problem import Problem


def scaling_suite(
    backends: Iterable[str],
    time_limit: float,
    sizes=(10, 30, 100, 300, 1000, 3000),
    seed: int = 0,
    progress: bool = True,
) -> list[Row]:
    rows = []
    backends = list(backends)
    bar = tqdm(total=len(sizes) * len(backends), disable=not progress, desc="scaling", unit="solve")
    for ops in sizes:
        graph = scaling_graph(ops)
        began = time.perf_counter()
        problem = Problem(graph)
        assert problem.formulation.nodes  # build the standard form once, outside every backend's time
        built = time.perf_counter() - began
        rows.append(Row("scaling", graph.name, "(problem build)", "built", None, None, None, built, True,
                        len(problem.ops), f"Graph -> Problem -> Formulation: {built:.2f} s"))  # fmt: skip
        for backend in backends:
            bar.set_postfix_str(f"{len(problem.ops)} ops/{backend}")
            row, _ = plan_row("scaling", graph.name, backend, problem, time_limit, seed)
            rows.append(row)
            bar.update()
    bar.close()
    return rows


def scaling_graph(ops: int):
    """A layer stack with about ``ops`` compute ops (a decode-like layer has 25)."""
    if ops < 25:
        return workloads.get("swiglu", tokens=32) if ops < 10 else workloads.get("rmsnorm", rows=32, cols=256)
    return workloads.get("layer_stack", layers=max(ops // 25, 1))


def scaling_plot(rows: list[Row], path: str | Path) -> None:
    """Solve time against graph size per backend (log-log)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for backend in sorted({r.backend for r in rows}):
        pts = sorted((r.ops, r.solve_s) for r in rows if r.backend == backend and r.valid)
        if pts:
            ax.plot(*zip(*pts), marker="o", label=backend)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("ops in graph")
    ax.set_ylabel("solve time (s)")
    ax.set_title("spyreopt scaling: layer stacks")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
