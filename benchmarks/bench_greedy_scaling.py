"""Greedy at real widths (hidden 4,096, intermediate 14,336, 32 heads, 8 KV heads, 128 tokens): ms per op, build included.

Each size is a ``so.presets.decoder`` stack solved with ``so.solve(g, backend="greedy")`` in a fresh process;
the clock starts at the call, so the Problem build, presolve, search, decode and the plan check all count.
Wall and process CPU time are both printed: on a shared, loaded machine the CPU figure is the one to trust.
Target (issue 30): at most 1 ms per op from 300 to 5,000 ops.

    python benchmarks/bench_greedy_scaling.py [--ops 300 1000 2000 5000] [--time-limit 10] [--json]
"""

from __future__ import annotations

import argparse
import json

from spyreopt.bench.scaling import GREEDY_OPS, greedy_scaling, greedy_scaling_table


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, nargs="+", default=list(GREEDY_OPS), help="approximate op counts")
    ap.add_argument("--time-limit", type=float, default=10.0, help="so.solve's time_limit (default 10)")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    rows = greedy_scaling(args.ops, args.time_limit)
    print(json.dumps(rows, indent=1) if args.json else greedy_scaling_table(rows))
    return rows


if __name__ == "__main__":
    main()
