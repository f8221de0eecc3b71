"""Builder vs captured: the Llama-3-8B decoder planned from ``so.presets.get`` and from
``torch.compile`` of Hugging Face's ``LlamaForCausalLM`` (weights on ``meta``), side by side.

Each side runs in its own process (so each peak resident memory is its own) with the default
method: ops by kind, predicted and simulated time, solve seconds, peak memory, the load average
when it ended. Sides: the builder; the captured graph of Hugging Face's default attention path on
this machine (``repeat_kv`` copies the keys and values to every query head); the captured graph of
its grouped-query path (``captured_gqa``: the kernel broadcasts them, as the builder does). The
captured sides also report the compile's own wall time and the pass's share of it (translation +
solve). Then, per phase, the predicted time per op group (``inductor_groups``): the groups both
sides compute alike, and every documented difference, with the shared total's gap to the builder.
Last, the family coverage table (``inductor_families``).

    python -m spyreopt.bench.inductor_llama                      # prefill 1,024 and decode at 1,024
    python -m spyreopt.bench.inductor_llama --seq 512 --context 4096 --layers 8
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from collections import Counter

from spyreopt.bench.inductor_families import FAMILIES
from spyreopt.bench.inductor_groups import builder_group, captured_groups, difference_table, grouped

SIDES = ("builder", "captured", "captured_gqa")


def _peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def builder_side(layers: int, phase: str, seq: int, context: int, time_limit: float) -> dict:
    import spyreopt as so

    g = so.presets.get("llama-3-8b", phase=phase, seq=seq if phase == "prefill" else 1, context=context
                         if phase == "decode" else None, layers=layers)  # fmt: skip
    start = time.perf_counter()
    plan = so.solve(g, time_limit=time_limit)
    solve_s = time.perf_counter() - start
    return {
        "side": "builder", "ops": dict(sorted(Counter(o.kind for o in g.ops.values()).items())),
        "predicted_us": round(plan.cost_us, 1), "simulated_us": round(so.simulate(plan).time_us, 1),
        "solve_s": round(solve_s, 2), "method": plan.stats.get("auto", {}).get("method"), "cut": _cut(plan),
        "groups": grouped({o.name: builder_group(o.name) for o in plan.ops}, plan), "peak_mb": _peak_mb(),
        "load": _load(),
    }  # fmt: skip


def captured_side(layers: int, phase: str, seq: int, context: int, time_limit: float, gqa: bool = False) -> dict:
    import spyreopt as so
    from spyreopt.bench.inductor import compile_llama

    side = "captured_gqa" if gqa else "captured"
    compile_s, records = compile_llama(
        layers, seq, context if phase == "decode" else 0, {"mode": "analysis", "time_limit": time_limit}, gqa
    )
    (r,) = [x for x in records if x.graph is not None] or records
    if r.plan is None:
        return {"side": side, "error": r.error, "peak_mb": _peak_mb()}

    return {
        "side": side, "ops": {k: v for k, v in r.counts.items() if v}, "predicted_us": round(r.plan.cost_us, 1),
        "simulated_us": round(so.simulate(r.plan).time_us, 1), "solve_s": round(r.solve_seconds, 2),
        "method": r.plan.stats.get("auto", {}).get("method"), "cut": _cut(r.plan), "compile_s": round(compile_s, 1),
        "pass_s": round(r.capture_seconds + r.solve_seconds, 2), "unnamed": len(r.unnamed),
        "groups": grouped(captured_groups(r), r.plan), "peak_mb": _peak_mb(),
        "load": _load(), "where_s": _where(r),
    }  # fmt: skip


def _where(r) -> dict[str, float]:
    """Where the pass's seconds went: translation (with the names), then auto's phases and its search stages."""
    auto = r.plan.stats.get("timing", {}).get("auto", {})
    out = {"translate": r.capture_seconds} | dict(auto.get("phases", {})) | {"search": sum(auto.get("stages", []))}
    return {k: round(v, 2) for k, v in out.items()}


def _cut(plan) -> bool:
    """A stage stopped on the clock, not on its deterministic budget: the plan depends on the load."""
    return bool(plan.stats.get("timing", {}).get("auto", {}).get("budget_cut"))


def _child(side: str, layers: int, phase: str, seq: int, context: int, time_limit: float) -> dict:
    cmd = [sys.executable, "-m", "spyreopt.bench.inductor_llama", "--child", side, "--layers", str(layers),
           "--phase", phase, "--seq", str(seq), "--context", str(context), "--time-limit", str(time_limit)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        return {"side": side, "error": (out.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def table(rows: list[dict]) -> str:
    cols = ["phase", "side", "ops", "predicted_us", "simulated_us", "solve_s", "peak_mb", "method", "cut", "compile_s",
            "pass_s", "unnamed", "load"]  # fmt: skip
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(", ".join(f"{k} {n}" for k, n in v.items()) if isinstance(v, dict) else "-" if v is None else
                         str(v))  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    where = [r for r in rows if r.get("where_s")]
    if where:
        keys = list(dict.fromkeys(k for r in where for k in r["where_s"]))
        lines += ["", "where the pass's seconds went", "", "| phase | side | " + " | ".join(keys) + " |",
                  "|---|---|" + "---:|" * len(keys)]  # fmt: skip
        lines += [f"| {r['phase']} | {r['side']} | " + " | ".join(str(r["where_s"].get(k, "-")) for k in keys) + " |"
                  for r in where]  # fmt: skip
    return "\n".join(lines) + "\n" + difference_table(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--seq", type=int, default=1024, help="prefill tokens")
    ap.add_argument("--context", type=int, default=1024, help="decode: cached positions attended")
    ap.add_argument("--time-limit", type=float, default=30.0, help="both sides (the pass's default)")
    ap.add_argument("--phases", default="prefill,decode")
    ap.add_argument("--sides", default=",".join(SIDES), help=f"any of {', '.join(SIDES)}")
    ap.add_argument("--child", choices=SIDES, help=argparse.SUPPRESS)
    ap.add_argument("--phase", default="prefill", help=argparse.SUPPRESS)
    ap.add_argument("--families", default=",".join(FAMILIES), help="family coverage after the tables ('' skips)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    if args.child:
        run = builder_side if args.child == "builder" else captured_side
        extra = (True,) if args.child == "captured_gqa" else ()
        print(json.dumps(run(args.layers, args.phase, args.seq, args.context, args.time_limit, *extra)))
        return 0
    rows = []
    for phase in args.phases.split(","):
        for side in args.sides.split(","):
            print(f"# {phase}: {side} ...", file=sys.stderr)
            rows.append({"phase": phase} | _child(side, args.layers, phase, args.seq, args.context, args.time_limit))
    print(table(rows))
    covered = 0
    if args.families:  # in its own process too: its peak memory and compiles are not the sides'
        print("\nfamily coverage (the pass's default options)\n", flush=True)
        cmd = [sys.executable, "-m", "spyreopt.bench.inductor_families", "--names", args.families]
        covered = subprocess.run(cmd, check=False).returncode
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if covered == 0 and all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
