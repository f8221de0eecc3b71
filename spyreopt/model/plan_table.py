"""Plain-text table of a plan (``Plan.table``), for the CLI and for people reading a plan."""

from __future__ import annotations

from typing import TYPE_CHECKING

from spyreopt.model.division import label
from spyreopt.model.staging import staged_inputs

if TYPE_CHECKING:
    from spyreopt.model.plan import Plan


def plan_table(plan: Plan, labels: dict[str, str] | None = None) -> str:
    rows = [("op", "kind", "division", "cores", "stick", "residency", "loop", "addr", "pred_us")]
    if labels is not None:
        rows[0] += ("from",)
    staged = staged_inputs(plan)
    tensors = {t.producer: t for t in plan.tensors if t not in staged}
    for o in plan.ops:
        t = tensors[o.name]
        rows.append(
            (
                o.name,
                o.kind,
                label(o.division),
                str(o.cores),
                str(o.stick),
                o.residency,
                _loop_cell(plan, o),
                "-" if t.address is None else str(t.address),
                f"{o.predicted_us:.3f}",
            )
            + ((labels.get(o.name, "-"),) if labels is not None else ())
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    modes: dict[str, int] = {}
    for e in plan.edges:
        modes[e.mode] = modes.get(e.mode, 0) + 1
    edge_text = ", ".join(f"{n} {m}" for m, n in sorted(modes.items())) or "none"
    bound = "" if plan.bound_us is None else f"   bound {plan.bound_us:.3f} us"
    lines.append("")
    lines.append(f"edges: {edge_text}")
    for t in staged:
        readers = [e.consumer for e in plan.edges if e.tensor == t.name]
        lines.append(
            f"staged: {t.name} loaded by {t.producer}, read on chip by {', '.join(readers) or 'no op'}; "
            f"{t.bytes_per_core} bytes per core at {t.address}, steps {t.lifetime}"
        )
    if plan.loops:
        lines.append("loops:")
        for n, loop in enumerate(plan.loops):
            extra = (["accumulates"] if loop.accumulate else []) + (
                [f"stages {', '.join(loop.staged)}"] if loop.staged else []
            )
            lines.append(
                f"  L{n}: {loop.tiles} tiles over {loop.dim} of {loop.ops[0]}: {', '.join(loop.ops)}; "
                f"{loop.footprint_bytes} bytes per core per iteration" + "".join(f"; {x}" for x in extra)
            )
    lines.append(
        f"total {plan.cost_us:.3f} us predicted{bound}   [{plan.backend}, {plan.status}, {plan.solve_seconds:.2f} s]"
    )
    if plan.message:
        lines.append(f"note: {plan.message}")
    return "\n".join(lines)


def _loop_cell(plan: Plan, o) -> str:
    """``L0 d1/8``: the op's loop, the dim it tiles (its own naming) and the tile count; ``-`` outside loops."""
    if o.loop is None:
        return "-"
    loop = plan.loops[o.loop]
    return f"L{o.loop} {loop.op_dims.get(o.name, '?')}/{loop.tiles}"
