"""Where the time of a whole-model ``auto`` solve goes: wall seconds per phase and per stage.

For each case (a preset's prefill or decode step) it builds the graph, runs
``so.solve`` with ``auto`` (the default backend) and reads the timing auto
records (``plan.stats["timing"]["auto"]``): the split into segments, their
keys, the problem builds, the stages (backend, segment, planned and measured
seconds), the decodes and the stitch of the whole graph with its check. The
process-wide build memo (``model.memo``) is cleared first, so every case is
timed cold, as a fresh command would run it; ``cli=True`` also times the
command itself (``python -m spyreopt solve model:...``) in a new process, the
import of the package included: the figure a user sees.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterable

from spyreopt.model import memo
from spyreopt.presets.catalog import get as preset
from spyreopt.solving.entry import solve

# (preset, phase, seq): the whole-model cases at the default limit
CASES = (("llama-3-8b", "prefill", 2048), ("llama-3-8b", "prefill", 4096), ("llama-3-8b", "decode", 1))


def run(
    cases: Iterable[tuple[str, str, int]] = CASES,
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    layers: int | None = None,
    cli: bool = False,
) -> list[dict]:
    """One row per case: cost, status, whether the clock cut a stage, and the seconds of every phase."""
    rows = []
    for name, phase, seq in cases:
        memo.clear()
        began = time.perf_counter()
        graph = preset(name, phase=phase, seq=seq, layers=layers)
        built = time.perf_counter()
        plan = solve(graph, time_limit=time_limit, seed=seed)
        done = time.perf_counter()
        timing = plan.stats["timing"]["auto"]
        stages = [
            {**{k: s[k] for k in ("backend", "planned_s") if k in s}, "segment": s.get("segment"), "seconds": sec}
            for s, sec in zip(plan.stats["auto"]["stages"], timing["stages"])
        ]
        row = {
            "case": f"{name} {phase} seq {seq}" + (f" {layers} layers" if layers else ""),
            "ops": len(plan.ops),
            "cost_us": plan.cost_us,
            "status": plan.status,
            "budget_cut": timing["budget_cut"],
            "loops": len(plan.loops),
            "graph_s": round(built - began, 3),
            "solve_s": round(done - built, 3),
            "phases": dict(timing["phases"]),
            "stages_s": round(sum(s["seconds"] for s in stages), 3),
            "stages": stages,
        }
        if cli:
            row["cli_s"] = cli_seconds(name, phase, seq, time_limit, seed, layers)
        rows.append(row)
    return rows


def cli_seconds(name: str, phase: str, seq: int, time_limit: float, seed: int, layers: int | None = None) -> float:
    """Wall seconds of ``spyreopt solve model:NAME`` in a new process, start-up included."""
    cmd = [sys.executable, "-m", "spyreopt", "solve", f"model:{name}", "--phase", phase, "--seq", str(seq)]
    cmd += ["--time-limit", str(time_limit), "--seed", str(seed)] + (["--layers", str(layers)] if layers else [])
    began = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return round(time.perf_counter() - began, 3)


def markdown(rows: list[dict]) -> str:
    """A table: one row per case, one column per phase (seconds)."""
    names = sorted({p for r in rows for p in r["phases"]}, key=lambda p: PHASE_ORDER.get(p, len(PHASE_ORDER)))
    head = ["case", "ops", "cost µs", "loops", "cut", "graph", *names, "stages", "solve"] + (
        ["cli"] if any("cli_s" in r for r in rows) else []
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["case"], str(r["ops"]), f"{r['cost_us']:,.3f}", str(r["loops"]), "yes" if r["budget_cut"] else "no"]
        cells += [f"{r['graph_s']:.2f}"] + [f"{r['phases'].get(p, 0.0):.2f}" for p in names]
        cells += [f"{r['stages_s']:.2f}", f"{r['solve_s']:.2f}"] + ([f"{r['cli_s']:.2f}"] if "cli_s" in r else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


PHASE_ORDER = {p: k for k, p in enumerate(("split", "keys", "build", "decode", "stitch", "cuts_build", "cuts_decode"))}


def main(argv: list[str] | None = None) -> int:
    """``python benchmarks/bench_phases.py [--time-limit S] [--cases NAME:PHASE:SEQ ...] [--cli] [--json OUT]``"""
    import argparse
    import json
    from pathlib import Path

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--time-limit", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--layers", type=int, default=None, help="override the presets' depth")
    p.add_argument("--cases", nargs="*", default=None, help="preset:phase:seq, e.g. llama-3-8b:prefill:2048")
    p.add_argument("--cli", action="store_true", help="also time the command in a new process (start-up included)")
    p.add_argument("--json", default=None, help="write the rows here")
    args = p.parse_args(argv)
    cases = (
        CASES if args.cases is None else [(c.split(":")[0], c.split(":")[1], int(c.split(":")[2])) for c in args.cases]
    )
    rows = run(cases, time_limit=args.time_limit, seed=args.seed, layers=args.layers, cli=args.cli)
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0
