"""Family coverage: the configurations users ask about most, compiled with the pass's default options.

Per family (tiny configurations from the config classes, random weights, ``families``): does the
compiled model match eager, is its graph planned, how many ops and how many opaque (with the
reasons), the predicted time and the pass's seconds. ``decode4`` is one decode step of 4 sequences
over a static cache.

    python -m spyreopt.bench.inductor_families                  # gqa128,gqa256,moe,swa,decode4
    python -m spyreopt.bench.inductor_families --names moe --json rows.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

FAMILIES = ("gqa128", "gqa256", "moe", "swa", "decode4")
WHAT = {
    "gqa128": "grouped-query attention, head dim 128",
    "gqa256": "grouped-query attention, head dim 256",
    "moe": "Mixtral mixture of experts, 4 experts, top-2",
    "swa": "Mistral, sliding window 8 over 16 tokens",
    "decode4": "decode step, batch 4, static cache of 32",
}


def coverage(name: str, options: dict | None = None) -> dict:
    """Compile one family in analysis mode and report what the pass planned."""
    import torch

    import spyreopt.integrations.inductor as si
    from spyreopt.integrations.inductor import families

    torch._dynamo.reset()
    si.clear()
    if name == "decode4":
        model, make = families.decode_step(batch=4)
        kwargs, again, field = make(), make(), "logits"
    else:
        fam = families.get(name)
        model, kwargs, again, field = fam.model, fam.kwargs, fam.kwargs, fam.output
    start = time.perf_counter()
    compiled = torch.compile(model, backend="spyreopt", options={"mode": "analysis", **(options or {})}, dynamic=False)
    with torch.no_grad():
        got = compiled(**kwargs)[field]
        want = model(**again)[field]
    seconds = time.perf_counter() - start
    matches = bool(torch.allclose(got, want, rtol=1e-4, atol=1e-4))
    records = [r for r in si.plans() if r.graph is not None]
    planned = bool(records) and all(r.plan is not None for r in records)
    opaque = Counter(why.split(":")[0] for r in records for why in r.opaque.values())
    return {
        "family": name, "what": WHAT.get(name, name), "matches_eager": matches, "planned": planned,
        "graphs": len(records), "ops": sum(len(r.graph.ops) for r in records),
        "opaque": sum(len(r.opaque) for r in records), "opaque_why": dict(opaque),
        "predicted_us": round(sum(r.plan.cost_us for r in records if r.plan), 2),
        "pass_s": round(sum(r.capture_seconds + (r.solve_seconds or 0) for r in records), 2),
        "compile_s": round(seconds, 1), "errors": [r.error for r in si.plans() if r.error],
    }  # fmt: skip


def table(rows: list[dict]) -> str:
    cols = ["family", "what", "matches_eager", "planned", "ops", "opaque", "predicted_us", "pass_s", "compile_s"]
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(r.get(c, "-")) for c in cols) + " |" for r in rows]
    lines += [f"\n{r['family']}: opaque {r['opaque_why']}" for r in rows if r.get("opaque_why")]
    lines += [f"\n{r['family']}: {r['errors']}" for r in rows if r.get("errors")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--names", default=",".join(FAMILIES))
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args(argv)
    rows = [coverage(n) for n in args.names.split(",") if n]
    print(table(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    return 0 if all(r["matches_eager"] and r["planned"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
