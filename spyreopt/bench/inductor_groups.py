"""Op groups of a decoder plan, the same on both sides of the builder-vs-captured comparison.

Every planned op of the builder's Llama graph (by its name) and of the captured graph (by the module
and source op Inductor recorded for its buffer) falls in one group. A group is either the same
computation on both sides (its predicted time must agree) or a documented difference: an op one side
has and the other lacks, or one computation modelled two ways; ``DIFFERENCES`` says why. The total
"after the documented differences" is then a computed figure: the sum over the shared groups.
"""

from __future__ import annotations

import re

SHARED = ("projections", "attention", "mlp", "lm_head")
DIFFERENCES = {
    "rotary": "the builder rotates (first half, second half) pairs by a table input; Hugging Face computes "
    "x*cos + rotate_half(x)*sin, rotate_half a concatenation whose pieces go through device memory",
    "kv_copies": "repeat_kv: Hugging Face's default path copies each key/value head to its query heads for "
    "the attention kernel (the grouped-query path and the builder broadcast them through the batched matmul)",
    "norms_residual": "Inductor never writes the residual stream: each reader (norm, residual add) recomputes "
    "embedding rows + attention + MLP from the parts and gathers the embedding rows again",
    "cache_write": "decode: the new keys and values are written into the static cache in device memory "
    "(the builder returns them as outputs)",
    "row_copies": "decode: each single-row projection input is copied to a (1, K) matrix",
    "masks_positions": "positions, causal mask and rotary tables computed in the graph (builder: inputs)",
}
GROUPS = (*SHARED, *DIFFERENCES)
SDPA_PARTS = (".scores", ".scaled", ".softmax.", ".context", ".k_t", ".regroup", ".scale", ".causal_mask")
_LAYER = re.compile(r"^l\d+\.")


def builder_group(op: str) -> str:
    """The group of an op of ``presets.decoder`` (``l0.q_proj``, ``l3.softmax.max``, ``lm_head``...)."""
    if op.startswith("lm_head"):
        return "lm_head"
    if not _LAYER.match(op):
        return "norms_residual" if op.startswith("norm_f") else "masks_positions"
    part = op.split(".", 1)[1]
    if part.startswith(("q_proj", "k_proj", "v_proj", "o_proj")):
        return "projections"
    if part.startswith(("gate_proj", "up_proj", "down_proj", "silu", "glu")):
        return "mlp"
    if "norm" in part or part.startswith("resid"):
        return "norms_residual"
    if "_rope" in part:
        return "rotary"
    return "attention"


def captured_group(op: str, kind: str, buffer: str, module: str | None, source: str | None) -> str:
    """The group of a captured op, from its Inductor buffer's module path and source ATen op."""
    module = module or ""
    sdpa = "scaled_dot_product" in (source or "")
    if module == "lm_head":
        return "lm_head"
    if ".mlp" in module:
        return "mlp"
    if "norm" in module or re.fullmatch(r"model\.layers\.\d+", module):
        return "norms_residual"
    if module.endswith(("q_proj", "k_proj", "v_proj", "o_proj")):
        if kind == "matmul":
            return "projections"
        return "row_copies" if ".row" in op else "attention"  # o_proj's regroup merges the heads (ctx_merge)
    if "index_put" in (source or "") or "index_copy" in (source or ""):
        return "cache_write"
    if sdpa:  # the kernel's own ops, else a copy Inductor made for it (repeat_kv, a contiguous layout)
        return "attention" if op.startswith(buffer + ".") and any(p in op for p in SDPA_PARTS) else "kv_copies"
    if module.endswith("self_attn"):
        return "rotary"
    return "masks_positions"  # the model's own forward, rotary_emb, embed_tokens


def captured_groups(record) -> dict[str, str]:
    """Every planned op of a ``CapturedGraph`` -> its group."""
    return {
        o.name: captured_group(o.name, o.kind, record.op_buffer.get(o.name, o.name), record.origin(o.name).module,
                               record.origin(o.name).source)
        for o in record.plan.ops
    }  # fmt: skip


def grouped(group_of: dict[str, str], plan) -> dict[str, float]:
    """A plan's predicted us per group (``group_of``: op -> group), every group present."""
    out = dict.fromkeys(GROUPS, 0.0)
    for o in plan.ops:
        out[group_of[o.name]] += o.predicted_us
    return {k: round(v, 1) for k, v in out.items()}


def difference_table(rows: list[dict]) -> str:
    """Per phase: every group's predicted us on each side, the shared total and its gap to the builder."""
    lines = []
    for phase in dict.fromkeys(r["phase"] for r in rows):
        sides = [r for r in rows if r["phase"] == phase and r.get("groups")]
        if not sides:
            continue
        builder = next((r for r in sides if r["side"] == "builder"), sides[0])
        lines += [f"\n{phase}: predicted us per op group", "",
                  "| group | " + " | ".join(r["side"] for r in sides) + " | what differs |",
                  "|---|" + "---:|" * len(sides) + "---|"]  # fmt: skip
        for g in GROUPS:
            why = DIFFERENCES.get(g, "same computation")
            lines.append(f"| {g} | " + " | ".join(f"{r['groups'][g]:,.1f}" for r in sides) + f" | {why} |")
        totals = {r["side"]: sum(r["groups"][g] for g in SHARED) for r in sides}
        lines.append("| **shared total** | " + " | ".join(f"{totals[r['side']]:,.1f}" for r in sides) + " | |")
        gaps = ", ".join(
            f"{s} {100 * (t / totals[builder['side']] - 1):+.2f}%" for s, t in totals.items() if s != builder["side"]
        )
        lines.append(f"\nafter the documented differences (shared groups), against the builder: {gaps}")
    return "\n".join(lines)
