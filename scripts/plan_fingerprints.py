"""Fingerprint the plans of every built-in workload, two 8B presets and IOPDDL B and G, to show a refactor changed none.

    python scripts/plan_fingerprints.py --out before.json          # on the old tree
    python scripts/plan_fingerprints.py --compare before.json      # on the new tree: exit 1 on any difference

On a loaded machine give both runs ``--slow-clock 16``: every deadline then passes 16 times later in real time
(``time.perf_counter`` and ``time.monotonic`` run slow), while every work budget, a function of the limits only,
stays the same; so runs end on their budgets, and two trees compare where the clock would otherwise cut them.

Each record is the SHA-256 of the plan's JSON without timings (``Plan.to_json()``), or of the IOPDDL strategy
list, per backend. Only backends that stop on a work budget (greedy, anneal, CP-SAT with deterministic time,
trws, and auto) are compared, and a record whose run a clock cut is marked so: those may differ honestly.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import spyreopt as so
from spyreopt import workloads
from spyreopt.errors import SpyreoptError
from spyreopt.formats.iopddl import load_iopddl
from spyreopt.presets import get as preset
from spyreopt.solvers.registry import solve_formulation

ROOT = Path(__file__).resolve().parents[1]
BACKENDS = ("greedy", "anneal", "cpsat", "auto")
PRESETS = (("llama-3-8b", "prefill"), ("llama-3-8b", "decode"))
IOPDDL = ("B", "G")
IOPDDL_BACKENDS = ("greedy", "trws", "cpsat")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _clock_cut(plan) -> bool:
    return any(c.get("by") == "clock" for c in plan.stats.get("limits", {}).get("cut", []))


def _plan_record(graph, backend: str, time_limit: float) -> dict:
    plan = so.solve(graph, backend=backend, time_limit=time_limit, seed=0)
    return {"sha": _digest(plan.to_json()), "clock_cut": _clock_cut(plan), "cost_us": round(plan.cost_us, 3)}


def fingerprints(quick: bool) -> dict[str, dict]:
    """Every record, keyed ``case/backend``."""
    out: dict[str, dict] = {}
    for name in workloads.names():
        for backend in ("greedy", "auto") if quick else BACKENDS:
            out[f"{name}/{backend}"] = _plan_record(workloads.get(name), backend, 60.0)
            print(name, backend, out[f"{name}/{backend}"], file=sys.stderr)
    for name, phase in PRESETS:
        graph = preset(name, phase=phase)
        for backend in ("greedy", "auto"):
            out[f"model:{name}:{phase}/{backend}"] = _plan_record(graph, backend, 10.0)
            print(name, phase, backend, out[f"model:{name}:{phase}/{backend}"], file=sys.stderr)
    for letter in IOPDDL:
        f = load_iopddl(ROOT / "tests" / "data" / "iopddl" / f"asplos-2025-iopddl-{letter}.json.gz")
        for backend in IOPDDL_BACKENDS:
            key = f"iopddl-{letter}/{backend}"
            try:
                sol = solve_formulation(f, backend, time_limit=10.0, seed=0)
            except SpyreoptError as exc:  # greedy finds no feasible answer on B: that, too, must not change
                out[key] = {"sha": f"{type(exc).__name__}: {exc}"}
            else:
                out[key] = {"sha": _digest(json.dumps([int(s) for s in sol.assignment])), "cost": float(sol.objective)}
            print(key, out[key], file=sys.stderr)
    return out


def _slow_clock(factor: float) -> None:
    """``time.perf_counter`` and ``time.monotonic`` running ``factor`` times slow from now on."""
    import time

    for name in ("perf_counter", "monotonic"):
        real = getattr(time, name)
        t0 = real()
        setattr(time, name, lambda real=real, t0=t0: t0 + (real() - t0) / factor)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--out", help="write the fingerprints here")
    g.add_argument("--compare", help="compare with fingerprints written before; exit 1 on a difference")
    p.add_argument("--quick", action="store_true", help="greedy and auto only on the workloads")
    p.add_argument("--slow-clock", type=float, default=1.0, help="run the clock this many times slow (load)")
    args = p.parse_args(argv)
    if args.slow_clock != 1.0:
        _slow_clock(args.slow_clock)
    now = fingerprints(args.quick)
    if args.out:
        Path(args.out).write_text(json.dumps(now, indent=1, sort_keys=True))
        return 0
    before = json.loads(Path(args.compare).read_text())
    differ = [k for k in now if k in before and now[k]["sha"] != before[k]["sha"]]
    honest = [k for k in differ if now[k].get("clock_cut") or before[k].get("clock_cut")]
    for k in differ:
        print(f"DIFFERS {k}: {before[k]} -> {now[k]}" + ("  (a clock cut one run)" if k in honest else ""))
    same = sum(1 for k in now if k in before) - len(differ)
    print(f"{same} identical, {len(differ)} differ ({len(honest)} of them cut by the clock), "
          f"{len(set(now) ^ set(before))} not in both")  # fmt: skip
    return 1 if len(differ) > len(honest) else 0


if __name__ == "__main__":
    sys.exit(main())
