"""Plain-text table of a plan (``Plan.table``), for the CLI and for people reading a plan."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from spyreopt.model.division import label
from spyreopt.model.plan_summary import budget_cuts, summary_line
from spyreopt.model.staging import staged_inputs

if TYPE_CHECKING:
    from spyreopt.model.plan_data import PlanData


LEGEND = (
    "division: parts per iteration dim (d0:16 x d1:2: 16 parts of dim 0 times 2 of dim 1, one part per core); "
    "stick: the output's innermost (stick) dim on device; residency: lx = kept in the cores' scratchpads, "
    "hbm = device memory, lx+hbm = both; addr: scratchpad byte offset, the same on every core; "
    "pred_us: predicted time (docs/cli.md)"
)
AGGREGATE_OPS = 80  # above this many ops, tables and pictures aggregate by layer or segment
BLOCKS = 48  # segments of a plan whose op names give no layers
EDGES_LISTED = 12  # edges not in place listed by name; the rest are counted (``spyreopt explain`` has all)


def plan_table(plan: PlanData, summary: bool = True, labels: dict[str, str] | None = None) -> str:
    """The per-op table, a legend, the edges not in place, staged inputs and loops; then (``summary``) the
    total with its bound, backend and status, the note and any budget that cut a stage; ``labels``
    (op -> text, e.g. the model's module path) adds a column."""
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
                f"{o.predicted_us:,.3f}",
            )
            + ((labels.get(o.name, "-"),) if labels is not None else ())
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.extend(textwrap.wrap(LEGEND, 110))
    lines.append("")
    lines.extend(edge_lines(plan))
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
    if summary:
        lines.append(summary_line(plan))
        lines.extend(notes(plan))
    return "\n".join(lines)


def edge_lines(plan: PlanData) -> list[str]:
    """``edges: 2 inplace, 4 relayout`` and, by name, the first edges that are not in place."""
    modes: dict[str, int] = {}
    for e in plan.edges:
        modes[e.mode] = modes.get(e.mode, 0) + 1
    out = [f"edges: {', '.join(f'{n} {m}' for m, n in sorted(modes.items())) or 'none'}"]
    moved = [e for e in plan.edges if e.mode != "inplace"]
    for e in moved[:EDGES_LISTED]:
        copy = f", copy {e.copy_bytes_per_core} B per core at {e.copy_address}" if e.copy_address is not None else ""
        out.append(f"  {e.tensor}: {e.producer} -> {e.consumer}: {e.mode}{copy}")
    if len(moved) > EDGES_LISTED:
        out.append(f"  ... and {len(moved) - EDGES_LISTED} more not in place")
    if moved:
        out.append("  why each one: spyreopt explain PLAN.json (or plan.explain())")
    return out


def notes(plan: PlanData) -> list[str]:
    """The plan's note and, when a budget cut a stage, which one."""
    out = [f"note: {plan.message}"] if plan.message else []
    cuts = budget_cuts(plan)
    if cuts:
        out.append(f"budget: {'; '.join(cuts)}; a longer time limit may find a better plan")
    return out


def _loop_cell(plan: PlanData, o) -> str:
    """``L0 d1/8``: the op's loop, the dim it tiles (its own naming) and the tile count; ``-`` outside loops."""
    if o.loop is None:
        return "-"
    loop = plan.loops[o.loop]
    return f"L{o.loop} {loop.op_dims.get(o.name, '?')}/{loop.tiles}"


def groups_of(plan: PlanData) -> list[tuple[str, list[int]]]:
    """Runs of consecutive ops whose names share their first part (``l3`` of ``l3.attn.q_proj``): the layers;
    when that gives fewer than 2 or more than ``4 * BLOCKS`` runs, ``BLOCKS`` equal blocks in schedule order."""
    runs: list[tuple[str, list[int]]] = []
    for i, o in enumerate(plan.ops):
        key = o.name.split(".", 1)[0]
        if runs and runs[-1][0] == key:
            runs[-1][1].append(i)
        else:
            runs.append((key, [i]))
    if 2 <= len(runs) <= 4 * BLOCKS:
        return runs
    n = len(plan.ops)
    size = max(1, -(-n // BLOCKS))
    return [(f"ops {i}-{min(i + size, n) - 1}", list(range(i, min(i + size, n)))) for i in range(0, n, size)]


def repeated_ops(plan: PlanData) -> list[tuple[str, list[int]]]:
    """Ops merged across groups by their name within the group (``l*.up_proj``), costliest total first."""
    groups = groups_of(plan)
    layered = len(groups) > 1 and not groups[0][0].startswith("ops ")
    merged: dict[str, list[int]] = {}
    for _, idx in groups:
        for i in idx:
            name = plan.ops[i].name
            inner = name.split(".", 1)[1] if layered and "." in name else None
            merged.setdefault(f"*.{inner}" if inner else name, []).append(i)
    return sorted(merged.items(), key=lambda kv: (-sum(plan.ops[i].predicted_us for i in kv[1]), kv[0]))


def group_table(plan: PlanData) -> str:
    """One row per layer or segment (``groups_of``): ops, predicted µs by component, ops kept on chip."""
    head = ("group", "ops", "pred_us", "compute", "memory", "relayout", "restickify", "spill", "on chip")
    rows = [head]
    for key, idx in groups_of(plan):
        ops = [plan.ops[i] for i in idx]
        parts = [
            sum(o.breakdown.get(k, 0.0) for o in ops) for k in ("compute", "memory", "relayout", "restickify", "spill")
        ]
        rows.append(
            (key, str(len(ops)), f"{sum(o.predicted_us for o in ops):,.1f}", *(f"{x:,.1f}" for x in parts),
             str(sum(o.residency != "hbm" for o in ops)))
        )  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
