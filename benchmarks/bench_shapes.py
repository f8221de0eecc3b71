"""Whole decoders at shapes the tests do not use: public model configs, prefill and decode, odd token counts.

Each case is ``spyreopt.presets.decoder`` (a Llama-family decoder) at one public
config's sizes (layers, hidden, heads, KV heads, intermediate, vocabulary, head
dim), solved with ``auto`` at the default limit, the clock started before the
graph is built, and validated. What it is for: a planner tuned to the presets
fails here first (no legal division, no loop, an invalid plan, a stage cut by
the clock). ``python benchmarks/bench_shapes.py [--only NAME,...] [--json OUT]``
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import spyreopt as so
from spyreopt.errors import SpyreoptError
from spyreopt.presets import decoder

# name: (layers, hidden, heads, kv_heads, intermediate, vocab, head_dim or None), from each model's config.json
CONFIGS = {
    "qwen2.5-7b": (28, 3584, 28, 4, 18944, 152064, None),
    "gemma-2b": (18, 2048, 8, 1, 16384, 256000, 256),
    "phi-3-mini": (32, 3072, 32, 32, 8192, 32064, None),
    "llama-3.2-1b": (16, 2048, 32, 8, 8192, 128256, None),
    "llama-2-13b": (40, 5120, 40, 40, 13824, 32000, None),
    "qwen2-1.5b": (28, 1536, 12, 2, 8960, 151936, None),
    "granite-3.1-2b": (40, 2048, 32, 8, 8192, 49155, None),
    "smollm-360m": (32, 960, 15, 5, 2560, 49152, None),
    "qwen2-0.5b": (24, 896, 14, 2, 4864, 151936, None),
}
SHAPES = (("prefill", 1000, None), ("prefill", 2048, None), ("decode", 1, 3000), ("decode", 8, 4096))


def run_case(name: str, phase: str, seq: int, context: int | None, time_limit: float = 10.0) -> dict:
    layers, hidden, heads, kv, ff, vocab, head_dim = CONFIGS[name]
    row = {"model": name, "phase": phase, "seq": seq, "context": context}
    start = time.perf_counter()
    try:
        g = decoder(layers, hidden, heads, kv, ff, seq, phase=phase, context=context, vocab=vocab, head_dim=head_dim)
        plan = so.solve(g, time_limit=time_limit, seed=0)
        row["wall_s"] = round(time.perf_counter() - start, 2)
        plan.validate()
    except SpyreoptError as exc:
        return {**row, "error": f"{type(exc).__name__}: {exc}"}
    cut = plan.stats.get("timing", {}).get("auto", {}).get("budget_cut", False)
    return {**row, "ops": len(g.ops), "cost_us": round(plan.cost_us, 1), "loops": len(plan.loops), "cut": cut}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated config names (default: all)")
    parser.add_argument("--time-limit", type=float, default=10.0)
    parser.add_argument("--json", help="write the rows as JSON")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(CONFIGS)
    unknown = sorted(set(names) - set(CONFIGS))
    if unknown:
        parser.error(f"unknown config(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    rows = []
    print("| model | phase | tokens | context | ops | wall s | predicted µs | loops | cut by clock |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        for phase, seq, context in SHAPES:
            r = run_case(name, phase, seq, context, args.time_limit)
            rows.append(r)
            if "error" in r:
                print(f"| {name} | {phase} | {seq} | {context or '-'} | | | {r['error']} | | |", flush=True)
                continue
            print(
                f"| {name} | {phase} | {seq} | {context or '-'} | {r['ops']} | {r['wall_s']:.2f} | "
                f"{r['cost_us']:,.1f} | {r['loops']} | {'yes' if r['cut'] else 'no'} |",
                flush=True,
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
