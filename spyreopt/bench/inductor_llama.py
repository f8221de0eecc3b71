"""Builder vs captured: the Llama-3-8B decoder planned from ``so.presets.get`` and from
``torch.compile`` of Hugging Face's ``LlamaForCausalLM`` (weights on ``meta``), side by side.

Each side runs in its own process (so each peak resident memory is its own) with the default
method (``auto``, 10 s): ops by kind, predicted and simulated time, solve seconds, peak memory,
and the predicted time per part of the model (attention, MLP, norms, LM head, the rest), which
is where the two graphs' op differences show (docs/inductor.md lists them). The captured side
also reports the compile's own wall time and the pass's share of it (translation + solve).

    python -m spyreopt.bench.inductor_llama                      # prefill 1,024 and decode at 1,024
    python -m spyreopt.bench.inductor_llama --seq 512 --context 4096 --layers 8
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from collections import Counter

PARTS = ("attention", "mlp", "norms", "lm_head", "other")


def _part_of_builder(op: str) -> str:
    if op.startswith("lm_head"):
        return "lm_head"
    if "norm" in op:
        return "norms"
    tail = op.split(".", 1)[-1]
    if tail.startswith(("gate_proj", "up_proj", "down_proj", "silu", "glu")):
        return "mlp"
    if op[:1] == "l" and op[1:2].isdigit() and not tail.startswith("resid"):
        return "attention"
    return "other"


def _part_of_module(module: str | None) -> str:
    if not module:
        return "other"
    if module == "lm_head":
        return "lm_head"
    if "norm" in module:
        return "norms"
    if ".mlp" in module:
        return "mlp"
    if ".self_attn" in module:
        return "attention"
    return "other"


def _parts(plan, part_of) -> dict[str, float]:
    out = dict.fromkeys(PARTS, 0.0)
    for o in plan.ops:
        out[part_of(o.name)] += o.predicted_us
    return {k: round(v, 1) for k, v in out.items()}


def _peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def builder_side(layers: int, phase: str, seq: int, context: int) -> dict:
    import spyreopt as so

    g = so.presets.get("llama-3-8b", phase=phase, seq=seq if phase == "prefill" else 1, context=context
                         if phase == "decode" else None, layers=layers)  # fmt: skip
    start = time.perf_counter()
    plan = so.solve(g)
    solve_s = time.perf_counter() - start
    return {
        "side": "builder", "ops": dict(sorted(Counter(o.kind for o in g.ops.values()).items())),
        "predicted_us": round(plan.cost_us, 1), "simulated_us": round(so.simulate(plan).time_us, 1),
        "solve_s": round(solve_s, 2), "method": plan.stats.get("auto", {}).get("method"),
        "parts": _parts(plan, lambda op: _part_of_builder(op)), "peak_mb": _peak_mb(),
    }  # fmt: skip


def captured_side(layers: int, phase: str, seq: int, context: int) -> dict:
    import spyreopt as so
    from spyreopt.bench.inductor import compile_llama

    compile_s, records = compile_llama(layers, seq, context if phase == "decode" else 0, {"mode": "analysis"})
    (r,) = [x for x in records if x.graph is not None] or records
    if r.plan is None:
        return {"side": "captured", "error": r.error, "peak_mb": _peak_mb()}
    return {
        "side": "captured", "ops": {k: v for k, v in r.counts.items() if v}, "predicted_us": round(r.plan.cost_us, 1),
        "simulated_us": round(so.simulate(r.plan).time_us, 1), "solve_s": round(r.solve_seconds, 2),
        "method": r.plan.stats.get("auto", {}).get("method"), "compile_s": round(compile_s, 1),
        "pass_s": round(r.capture_seconds + r.solve_seconds, 2), "unnamed": len(r.unnamed),
        "parts": _parts(r.plan, lambda op: _part_of_module(r.origin(op).module)), "peak_mb": _peak_mb(),
    }  # fmt: skip


def _child(side: str, layers: int, phase: str, seq: int, context: int) -> dict:
    cmd = [sys.executable, "-m", "spyreopt.bench.inductor_llama", "--child", side, "--layers", str(layers),
           "--phase", phase, "--seq", str(seq), "--context", str(context)]  # fmt: skip
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode or not lines:
        return {"side": side, "error": (out.stderr.strip().splitlines() or ["no output"])[-1]}
    return json.loads(lines[-1])


def table(rows: list[dict]) -> str:
    cols = ["phase", "side", "ops", "predicted_us", "simulated_us", "solve_s", "peak_mb", "method", "compile_s",
            "pass_s", "unnamed"]  # fmt: skip
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c)
            cells.append(", ".join(f"{k} {n}" for k, n in v.items()) if isinstance(v, dict) else "-" if v is None else
                         str(v))  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| phase | side | " + " | ".join(f"{p} us" for p in PARTS) + " |", "|" + "---|" * (len(PARTS) + 2)]
    for r in rows:
        parts = r.get("parts") or {}
        lines.append(f"| {r['phase']} | {r['side']} | " + " | ".join(str(parts.get(p, "-")) for p in PARTS) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--seq", type=int, default=1024, help="prefill tokens")
    ap.add_argument("--context", type=int, default=1024, help="decode: cached positions attended")
    ap.add_argument("--phases", default="prefill,decode")
    ap.add_argument("--child", choices=("builder", "captured"), help=argparse.SUPPRESS)
    ap.add_argument("--phase", default="prefill", help=argparse.SUPPRESS)
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    if args.child:
        run = builder_side if args.child == "builder" else captured_side
        print(json.dumps(run(args.layers, args.phase, args.seq, args.context)))
        return 0
    rows = []
    for phase in args.phases.split(","):
        for side in ("builder", "captured"):
            print(f"# {phase}: {side} ...", file=sys.stderr)
            rows.append({"phase": phase} | _child(side, args.layers, phase, args.seq, args.context))
    print(table(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
