"""The Inductor adapter on its example models: what it captures and how the captured graphs plan.

Each model in ``spyreopt.integrations.inductor.examples`` is compiled with the ``spyreopt``
torch.compile backend (analysis mode unless ``--full``): inference under ``no_grad``, and a
training step (forward and backward graphs) for models with parameters. Per captured graph:
spyreopt ops by kind, opaque ops, copies and device-memory reads the translation added,
capture (translation) and solve seconds, the plan's predicted time and the simulator's time.

    python benchmarks/bench_inductor.py --backend greedy --time-limit 10 --size small
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

import spyreopt as so
import spyreopt.integrations.inductor as si
from spyreopt.integrations.inductor import examples

KINDS = ("matmul", "pointwise", "reduce", "reshape", "view")


def compile_model(name: str, size: str, train: bool, options: dict) -> tuple[float, list[si.CapturedGraph]]:
    """Compile and run one model (one training step if ``train``); (wall seconds, its captured graphs)."""
    torch._dynamo.reset()
    si.clear()
    torch.manual_seed(0)
    model, inputs, _ = examples.get(name, size)
    start = time.perf_counter()
    compiled = torch.compile(model, backend="spyreopt", options=options, dynamic=False)
    if train:
        compiled(*inputs).square().mean().backward()
    else:
        with torch.no_grad():
            compiled(*inputs)
    return time.perf_counter() - start, si.plans()


def row(model: str, r: si.CapturedGraph) -> dict:
    out = {
        "model": model,
        "graph": r.kind,
        **{k: r.counts.get(k, 0) for k in KINDS},
        "opaque": r.counts.get("opaque", 0),
    }
    out["added"] = len(r.notes)
    out["capture_s"] = round(r.capture_seconds, 3)
    out["solve_s"] = round(r.solve_seconds, 3) if r.solve_seconds is not None else None
    out["status"] = r.plan.status if r.plan else "-"
    out["predicted_us"] = round(r.plan.cost_us, 2) if r.plan else None
    out["simulated_us"] = None
    out["error"] = r.error
    if r.plan is not None:
        try:
            out["simulated_us"] = round(so.simulate(r.plan).time_us, 2)
        except Exception as exc:  # noqa: BLE001 - the simulator's verdict is reported, whatever it is
            out["error"] = f"simulate: {type(exc).__name__}: {exc}"
    out["opaque_reasons"] = sorted(set(r.opaque.values()))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="greedy")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=examples.SIZES, default="small")
    ap.add_argument("--full", action="store_true", help="let Inductor generate and run code (slower)")
    ap.add_argument("--models", default=",".join(examples.names()))
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    options = {"backend": args.backend, "time_limit": args.time_limit, "seed": args.seed}
    options["mode"] = "full" if args.full else "analysis"
    rows = []
    for name in args.models.split(","):
        trainable = examples.get(name, args.size)[2]
        for train in (False, True) if trainable else (False,):
            seconds, records = compile_model(name, args.size, train, options)
            label = f"{name}{' (train)' if train else ''}"
            print(f"# {label}: compile and run {seconds:.1f} s, {len(records)} graph(s)", file=sys.stderr)
            rows += [row(label, r) for r in records]
    cols = [
        "model",
        "graph",
        *KINDS,
        "opaque",
        "added",
        "capture_s",
        "solve_s",
        "status",
        "predicted_us",
        "simulated_us",
    ]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join("-" if r[c] is None else str(r[c]) for c in cols) + " |")
    for r in rows:
        if r["error"] or r["opaque_reasons"]:
            print(f"\n{r['model']} [{r['graph']}]: error={r['error']} opaque={r['opaque_reasons']}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(r["error"] is None for r in rows) else 1
