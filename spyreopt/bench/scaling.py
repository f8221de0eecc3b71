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


# ---- greedy at real widths: ms per op, build included ---------------------------------------------------------
REAL_WIDTHS = {"hidden": 4096, "heads": 32, "kv_heads": 8, "intermediate": 14336, "seq": 128}  # a Llama-3-8B layer
GREEDY_OPS = (300, 1000, 2000, 5000)
TARGET_MS_PER_OP = 1.0  # issue 30: greedy, build included, from 300 to 5,000 ops


def real_width_layers(ops: int) -> int:
    """Decoder layers giving about ``ops`` compute ops at real widths (40 a layer, 5 around them)."""
    return max(1, round((ops - 5) / 40))


def greedy_one(layers: int, time_limit: float = 10.0) -> dict:
    """One ``so.solve(g, backend="greedy")`` of a real-width decoder in this process: wall and CPU seconds from
    the call (Problem build, presolve, search, decode and validation included), and the plan's digest."""
    import hashlib

    import spyreopt as so

    g = so.presets.decoder(layers=layers, **REAL_WIDTHS)
    wall, cpu = time.perf_counter(), time.process_time()
    plan = so.solve(g, backend="greedy", time_limit=time_limit)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    text = plan.to_json()
    return {
        "layers": layers,
        "ops": len(plan.ops),
        "wall_s": wall,
        "cpu_s": cpu,
        "ms_per_op": 1000 * wall / len(plan.ops),
        "cpu_ms_per_op": 1000 * cpu / len(plan.ops),
        "cost_us": plan.cost_us,
        "plan_sha256": hashlib.sha256(text.encode()).hexdigest()[:16],
        "cut_by_clock": '"cut_by_clock": true' in text,
    }


def greedy_scaling(ops=GREEDY_OPS, time_limit: float = 10.0) -> list[dict]:
    """``greedy_one`` per size, each in a fresh process (no memo carried over from a smaller size)."""
    import json
    import subprocess
    import sys

    rows = []
    for n in ops:
        call = f"greedy_one({real_width_layers(n)}, {time_limit!r})"
        code = f"import json; from spyreopt.bench.scaling import greedy_one; print(json.dumps({call}))"
        out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
        rows.append(json.loads(out.strip().splitlines()[-1]))
    return rows


def greedy_scaling_table(rows: list[dict]) -> str:
    """The rows as a Markdown table, each size against ``TARGET_MS_PER_OP``."""
    lines = [
        "| ops | layers | wall s | ms/op | CPU s | CPU ms/op | within 1 ms/op | presolve cut by clock | plan sha256 |",
        "|---:|---:|---:|---:|---:|---:|---|---|---|",
    ]
    for r in rows:
        ok = "yes" if r["ms_per_op"] <= TARGET_MS_PER_OP else "no"
        lines.append(
            f"| {r['ops']} | {r['layers']} | {r['wall_s']:.2f} | {r['ms_per_op']:.2f} | {r['cpu_s']:.2f} "
            f"| {r['cpu_ms_per_op']:.2f} | {ok} | {'yes' if r['cut_by_clock'] else 'no'} | {r['plan_sha256']} |"
        )
    return "\n".join(lines)
