"""The public IOPDDL suite at the contest's time limits: one row per instance, judged independently."""

from __future__ import annotations

import time
from pathlib import Path

from spyreopt.contest.solve import solve_instance
from spyreopt.formats.iopddl import contest_table, evaluate_iopddl, read_instance

NAMES = ["A", "B", "C", "G", "K", "L", "M", "N", "S"]


def find_instance(data_dir: str | Path, letter: str) -> Path:
    """``asplos-2025-iopddl-<letter>.json.gz`` in data_dir or its ``production/`` folder."""
    name = f"asplos-2025-iopddl-{letter}.json.gz"
    for p in (Path(data_dir) / name, Path(data_dir) / "production" / name):
        if p.exists():
            return p
    raise FileNotFoundError(f"{name} not found under {data_dir} or {data_dir}/production")


def run(
    data_dir: str | Path, names: list[str] = NAMES, *, seed: int = 0, time_limit: float | None = None
) -> list[dict]:
    """Solve each instance with the default method (its contest limit unless ``time_limit``); the score table."""
    table = contest_table()
    rows = []
    for letter in names:
        start = time.monotonic()
        inst = read_instance(find_instance(data_dir, letter))
        limit = time_limit if time_limit is not None else table[inst.name]["time_limit"]
        out = solve_instance(inst, limit, seed=seed, start=start)
        wall = time.monotonic() - start
        cost, feasible, _ = evaluate_iopddl(inst, out.solution)
        best = table[inst.name]["best_cost"]
        rows.append(
            {
                "instance": letter,
                "nodes": out.stats["nodes"],
                "edges": out.stats["edges"],
                "time_limit": limit,
                "cost": cost,
                "feasible": feasible,
                "best": best,
                "score": best / cost if feasible and cost > 0 else 0.0,
                "load_s": round(out.seconds_load, 1),
                "best_s": round(out.seconds_to_best, 1),
                "wall_s": round(wall, 1),
                "method": out.method,
            }
        )
    return rows


def markdown(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    head = "| inst | nodes | edges | limit s | cost | best | score | load s | s to best | wall s | method |"
    lines = [head, "|" + " --- |" * 11]
    for r in rows:
        lines.append(
            f"| {r['instance']} | {r['nodes']:,} | {r['edges']:,} | {r['time_limit']:g} | {r['cost']:,} | {r['best']:,} "
            f"| {r['score']:.6f} | {r['load_s']} | {r['best_s']} | {r['wall_s']} | {r['method']} |"
        )
    return "\n".join(lines)
