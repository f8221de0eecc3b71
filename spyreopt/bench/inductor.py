"""The Inductor adapter on its example models: what it captures and how the captured graphs plan.

Each model in ``spyreopt.integrations.inductor.examples`` is compiled with the ``spyreopt``
torch.compile backend (analysis mode unless ``--full``): inference under ``no_grad``, and a
training step (forward and backward graphs) for models with parameters. Per captured graph:
spyreopt ops by kind, opaque ops, copies and device-memory reads the translation added,
capture (translation) and solve seconds, the plan's predicted time and the simulator's time.

``--hf gpt2,bert,qwen2,mistral,t5,vit`` compiles the tiny Hugging Face families instead (inference,
outputs checked against eager), with the share of Inductor's nodes that stayed opaque and why.
``--llama LAYERS --seq N`` plans a Llama-3-8B-shaped ``LlamaForCausalLM`` with LAYERS layers whose
weights are on the ``meta`` device (never allocated), and reports the peak resident memory.
"hook_s" is the time the capture adds to ``torch.compile`` (translation + solve; the simulation
runs afterwards and is not counted); "compile_s" the whole compile-and-run wall time.

    python -m spyreopt.bench.inductor --backend greedy --time-limit 10 --size small
    python -m spyreopt.bench.inductor --hf gpt2,bert,qwen2,mistral,t5,vit --backend cpsat
    python -m spyreopt.bench.inductor --llama 32 --seq 2048 --backend greedy
    python -m spyreopt.bench.inductor --llama 32 --context 4096 --backend greedy
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from collections import Counter

import torch

import spyreopt as so
import spyreopt.integrations.inductor as si
from spyreopt.integrations.inductor import examples

KINDS = ("matmul", "pointwise", "reduce", "reshape", "view")
GQA_SWITCH = "TRANSFORMERS_SDPA_FORCE_GQA"  # transformers' switch to its grouped-query attention path


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


def compile_family(name: str, options: dict) -> tuple[float, list[si.CapturedGraph]]:
    """Compile and run a tiny Hugging Face model (inference); outputs must equal eager."""
    from spyreopt.integrations.inductor import families

    torch._dynamo.reset()
    si.clear()
    fam = families.get(name)
    start = time.perf_counter()
    compiled = torch.compile(fam.model, backend="spyreopt", options=options, dynamic=False)
    with torch.no_grad():
        got = compiled(**fam.kwargs)[fam.output]
    seconds = time.perf_counter() - start
    with torch.no_grad():
        torch.testing.assert_close(got, fam.model(**fam.kwargs)[fam.output])
    return seconds, si.plans()


def compile_llama(
    layers: int, seq: int, context: int, options: dict, gqa: bool = False
) -> tuple[float, list[si.CapturedGraph]]:
    """Compile and run (on ``meta``) a Llama-3-8B-shaped model with ``layers`` layers; nothing is allocated.

    ``context`` > 0: one decode step (one token) against a static key/value cache of that length.
    ``gqa``: Hugging Face's grouped-query path (``TRANSFORMERS_SDPA_FORCE_GQA=1``: the attention kernel
    broadcasts each key/value head over its query heads, ``enable_gqa``) instead of its default on this
    machine, ``repeat_kv``, which copies the keys and values to every query head first.
    """
    from spyreopt.integrations.inductor import families

    saved = os.environ.get(GQA_SWITCH)
    os.environ[GQA_SWITCH] = "1" if gqa else "0"
    try:
        return _compile_llama(families.llama(layers), families.static_cache, seq, context, options)
    finally:
        if saved is None:
            del os.environ[GQA_SWITCH]
        else:
            os.environ[GQA_SWITCH] = saved


def _compile_llama(model, static_cache, seq: int, context: int, options: dict) -> tuple[float, list]:
    torch._dynamo.reset()
    si.clear()
    kwargs = {"use_cache": False}
    if context:
        seq = 1
        kwargs = {"past_key_values": static_cache(model, 1, context, torch.device("meta")), "use_cache": True}
        kwargs["cache_position"] = torch.tensor([context - 1], device="meta")
    ids = torch.zeros(1, seq, dtype=torch.long, device="meta")
    start = time.perf_counter()
    compiled = torch.compile(model, backend="spyreopt", options=options, dynamic=False)
    with torch.no_grad():
        out = compiled(input_ids=ids, **kwargs)
    assert out.logits.device.type == "meta"
    assert all(p.device.type == "meta" for p in model.parameters())
    return time.perf_counter() - start, si.plans()


def row(model: str, r: si.CapturedGraph) -> dict:
    nodes = sum(r.inductor_nodes.values())
    out = {
        "model": model,
        "graph": r.kind,
        "nodes": nodes,
        **{k: r.counts.get(k, 0) for k in KINDS},
        "opaque": r.counts.get("opaque", 0),
        "opaque_pct": round(100 * r.counts.get("opaque", 0) / nodes, 1) if nodes else None,
    }
    out["added"] = len(r.notes)
    out["capture_s"] = round(r.capture_seconds, 3)
    out["solve_s"] = round(r.solve_seconds, 3) if r.solve_seconds is not None else None
    out["hook_s"] = round(r.capture_seconds + (r.solve_seconds or 0.0), 3)
    out["status"] = r.plan.status if r.plan else "-"
    out["predicted_us"] = round(r.plan.cost_us, 2) if r.plan else None
    out["simulated_us"] = None
    out["error"] = r.error
    out["valid"] = None
    if r.plan is not None:
        try:
            r.plan.validate()
            out["valid"] = True
        except so.PlanError as exc:
            out["valid"], out["error"] = False, f"validate: {exc}"
        try:
            out["simulated_us"] = round(so.simulate(r.plan).time_us, 2)
        except Exception as exc:  # noqa: BLE001 - the simulator's verdict is reported, whatever it is
            out["error"] = f"simulate: {type(exc).__name__}: {exc}"
    out["opaque_reasons"] = dict(Counter(r.opaque.values()))
    out["loops"] = r.loops
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="auto")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--size", choices=examples.SIZES, default="small")
    ap.add_argument("--full", action="store_true", help="let Inductor generate and run code (slower)")
    ap.add_argument("--models", default=",".join(examples.names()))
    ap.add_argument("--hf", help="comma-separated tiny Hugging Face families instead of the example models")
    ap.add_argument("--llama", type=int, help="plan a meta-device Llama-3-8B-shaped model with this many layers")
    ap.add_argument("--seq", type=int, default=2048, help="sequence length for --llama (prefill)")
    ap.add_argument("--context", type=int, default=0, help="--llama: one decode step against a cache of this length")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    options = {"backend": args.backend, "time_limit": args.time_limit, "seed": args.seed}
    options["mode"] = "full" if args.full else "analysis"
    runs = []
    if args.llama:
        phase = f"decode, context {args.context}" if args.context else f"prefill, seq {args.seq}"
        runs.append(
            (
                f"llama-3-8b x{args.llama} {phase} (meta)",
                lambda: compile_llama(args.llama, args.seq, args.context, options),
            )
        )
    elif args.hf:
        runs += [(n, lambda n=n: compile_family(n, options)) for n in args.hf.split(",")]
    else:
        for name in args.models.split(","):
            trainable = examples.get(name, args.size)[2]
            for train in (False, True) if trainable else (False,):
                label = f"{name}{' (train)' if train else ''}"
                runs.append((label, lambda name=name, train=train: compile_model(name, args.size, train, options)))
    rows = []
    for label, run in runs:
        seconds, records = run()
        print(f"# {label}: compile and run {seconds:.1f} s, {len(records)} graph(s)", file=sys.stderr)
        rows += [row(label, r) | {"compile_s": round(seconds, 1)} for r in records]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    cols = ["model", "graph", "nodes", *KINDS, "opaque", "opaque_pct", "added", "capture_s", "solve_s", "hook_s"]
    cols += ["compile_s", "status", "predicted_us", "simulated_us", "valid"]
    print("| " + " | ".join(cols) + " |")
    print("|" + "---|" * len(cols))
    for r in rows:
        print("| " + " | ".join("-" if r[c] is None else str(r[c]) for c in cols) + " |")
    for r in rows:
        if r["error"] or r["opaque_reasons"] or r["loops"]:
            print(f"\n{r['model']} [{r['graph']}]: error={r['error']} opaque={r['opaque_reasons']} loops={r['loops']}")
    print(f"\npeak resident memory of this process: {peak_mb:.0f} MB")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(r["error"] is None for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
