"""Pictures of plans (matplotlib): where buffers sit in scratchpad, how ops divide, where time goes.

Every function returns a ``matplotlib.figure.Figure``; ``show_plan`` renders the
main ones in a notebook. Nothing here changes a plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import ceil

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from spyreopt.model.division import label
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan
from spyreopt.model.plan_table import AGGREGATE_OPS, groups_of, repeated_ops

COMPONENTS = ("compute", "memory", "spill", "restickify", "relayout", "overhead")
COLORS = {
    "compute": "#4C72B0",
    "memory": "#DD8452",
    "spill": "#C44E52",
    "restickify": "#8172B3",
    "relayout": "#55A868",
    "overhead": "#937860",
    "tensor": "#4C72B0",
}
KIB = 1024
TOP_OPS = 20
ADDRESS_BINS = 96  # rows of the scratchpad heat map
STEP_BINS = 240  # columns of the scratchpad heat map: each the mean over its steps


def scratchpad_chart(plan: Plan, ax=None) -> Figure:
    """Scratchpad address over time: one rectangle per resident buffer at its address and lifetime (above
    ``AGGREGATE_OPS`` ops, ``occupancy_chart``).

    Tensors are solid; relayout and restickify copies are hatched; edges that
    spill (device-memory round trip) are marked with a red cross at the
    consumer's step; the dashed line is the planner's capacity.
    """
    if len(plan.ops) > AGGREGATE_OPS:
        return occupancy_chart(plan, ax)
    fig, ax = _axes(ax, (9, 4.5))
    cap = _capacity(plan)
    top = max(
        [t.address + t.bytes_per_core for t in plan.tensors if t.address is not None]
        + [e.copy_address + e.copy_bytes_per_core for e in plan.edges if e.copy_address is not None]
        + [1]
    )
    ymax = min(cap, top * 1.25) / KIB
    for t in plan.tensors:
        if t.address is None:
            continue
        lo, hi = t.lifetime
        ax.add_patch(
            Rectangle(
                (lo, t.address / KIB),
                hi - lo,
                t.bytes_per_core / KIB,
                facecolor=COLORS["tensor"],
                edgecolor="black",
                alpha=0.75,
                label="tensor",
                gid=f"tensor:{t.name}",
            )  # fmt: skip
        )
        if t.bytes_per_core / KIB > ymax / 25:  # label only rectangles tall enough to read
            ax.text(lo + 0.05, (t.address + t.bytes_per_core / 2) / KIB, t.name, fontsize=7, va="center", clip_on=True)
    for e in plan.edges:
        if e.copy_address is not None:
            lo, hi = e.lifetime
            ax.add_patch(
                Rectangle(
                    (lo, e.copy_address / KIB),
                    hi - lo,
                    e.copy_bytes_per_core / KIB,
                    facecolor=COLORS[e.mode],
                    edgecolor="black",
                    hatch="//",
                    alpha=0.6,
                    label=f"{e.mode} copy",
                    gid=f"copy:{e.tensor}->{e.consumer}",
                )  # fmt: skip
            )
    steps = {o.name: i for i, o in enumerate(plan.ops)}
    spills = [steps[e.consumer] + 0.5 for e in plan.edges if e.mode == "spill"]
    if spills:
        ax.scatter(
            spills, [ymax * 0.02] * len(spills), marker="x", color=COLORS["spill"], s=60, zorder=5, label="spill"
        )
    if ymax >= cap / KIB:
        ax.axhline(cap / KIB, color="black", linestyle="--", linewidth=1, label="capacity")
        ymax = cap / KIB * 1.08
    ax.set_xlim(0, max(len(plan.ops), 1))
    ax.set_ylim(0, ymax)
    ax.set_xticks([i + 0.5 for i in range(len(plan.ops))])
    ax.set_xticklabels([o.name for o in plan.ops], rotation=60, ha="right", fontsize=7)
    ax.set_xlabel("op (schedule order)")
    ax.set_ylabel(f"scratchpad address per core (KiB; capacity {cap / KIB:.0f})")
    ax.set_title(f"{plan.graph['name']}: scratchpad over time ({plan.backend}, {plan.cost_us:.2f} µs)")
    _dedupe_legend(ax)
    fig.tight_layout()
    return fig


def division_chart(plan: Plan, ax=None) -> Figure:
    """Cores each op uses, with its split per dim written on the bar (above ``AGGREGATE_OPS`` ops, the costliest
    ops with their divisions: ``top_ops_chart``)."""
    if len(plan.ops) > AGGREGATE_OPS:
        return top_ops_chart(plan, ax)
    fig, ax = _axes(ax, (9, 0.35 * len(plan.ops) + 1.5))
    cores = int(plan.hardware["cores"])
    names = [o.name for o in plan.ops]
    ax.barh(
        names,
        [o.cores for o in plan.ops],
        color=[COLORS["compute"] if o.kind == "matmul" else "#8C8C8C" for o in plan.ops],
    )
    for i, o in enumerate(plan.ops):
        ax.text(o.cores + 0.3, i, f"{label(o.division)}  stick d{o.stick}  {o.residency}", va="center", fontsize=7)
    ax.axvline(cores, color="black", linestyle="--", linewidth=1)
    ax.set_xlim(0, cores * 1.9)
    ax.invert_yaxis()
    ax.set_xlabel(f"cores used (of {cores})")
    ax.set_title(f"{plan.graph['name']}: work division per op")
    fig.tight_layout()
    return fig


def cost_breakdown(plan: Plan, ax=None) -> Figure:
    """Predicted time per op by component; the hatched part is hidden by compute/memory overlap (above
    ``AGGREGATE_OPS`` ops, per layer: ``layer_chart``)."""
    if len(plan.ops) > AGGREGATE_OPS:
        return layer_chart(plan, ax)
    fig, ax = _axes(ax, (9, 0.35 * len(plan.ops) + 2.2))
    names = [o.name for o in plan.ops]
    left = [0.0] * len(plan.ops)
    for comp in COMPONENTS:
        widths = [o.breakdown.get(comp, 0.0) for o in plan.ops]
        ax.barh(names, widths, left=left, color=COLORS[comp], label=comp)
        left = [a + b for a, b in zip(left, widths)]
    # the overlapped time is paid once: hatch it over the shorter of compute and memory traffic
    hidden = [-o.breakdown.get("overlap", 0.0) for o in plan.ops]
    starts = [
        0.0 if o.breakdown["compute"] <= o.breakdown["memory"] + o.breakdown["spill"] else o.breakdown["compute"]
        for o in plan.ops
    ]
    ax.barh(names, hidden, left=starts, facecolor="white", alpha=0.6, hatch="xx", edgecolor="grey",
            label="overlapped (paid once)")  # fmt: skip
    for i, o in enumerate(plan.ops):
        ax.text(left[i], i, f" {o.predicted_us:.2f} µs", va="center", fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("predicted time (µs)")
    ax.set_title(f"{plan.graph['name']}: where the time goes (total {plan.cost_us:.2f} µs)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12 - 1.5 / (len(plan.ops) + 4)), ncol=4)
    fig.tight_layout()
    return fig


def backend_comparison(rows: Sequence, metric: str = "simulated_us", baseline: str = "independent") -> Figure:
    """Per workload, each backend's time relative to a baseline backend (bench rows or dicts)."""
    recs = [r if isinstance(r, dict) else vars(r) for r in rows]
    recs = [r for r in recs if r.get(metric) is not None and r.get("suite", "spyre") == "spyre"]
    workloads = list(dict.fromkeys(r["workload"] for r in recs))
    backends = list(dict.fromkeys(r["backend"] for r in recs))
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(workloads) * max(len(backends), 1) / 3), 4.5))
    width = 0.8 / max(len(backends), 1)
    for j, b in enumerate(backends):
        xs, ys = [], []
        for i, w in enumerate(workloads):
            base = next((r[metric] for r in recs if r["workload"] == w and r["backend"] == baseline), None)
            val = next((r[metric] for r in recs if r["workload"] == w and r["backend"] == b), None)
            if base and val:
                xs.append(i + j * width)
                ys.append(base / val)
        ax.bar(xs, ys, width=width, label=b)
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(workloads))])
    ax.set_xticklabels(workloads, rotation=40, ha="right", fontsize=8)
    ax.set_ylabel(f"speedup over {baseline} ({metric.replace('_us', '')})")
    ax.set_title("backends compared")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def simulation_chart(sim, plan: Plan) -> Figure:
    """The simulator's LX occupancy over time per core, and each core's busy fraction."""
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(9, 6))
    occupancy = sim.lx_occupancy
    for core, series in enumerate(occupancy):
        if not len(series):
            continue
        times = [t for t, _ in series]
        used = [b / KIB for _, b in series]
        top.step(times, used, where="post", linewidth=0.8, alpha=0.6, label=f"core {core}" if core < 4 else None)
    cap = _capacity(plan) / KIB
    peak = max((b for series in occupancy for _, b in series), default=0) / KIB
    if peak * 1.25 >= cap:
        top.axhline(cap, color="black", linestyle="--", linewidth=1, label="capacity")
    top.set_ylim(0, max(min(cap * 1.08, peak * 1.25), 1))
    top.set_xlabel("time (µs)")
    top.set_ylabel(f"LX in use (KiB; capacity {cap:.0f})")
    top.set_title(f"{plan.graph['name']}: simulated scratchpad occupancy ({sim.time_us:.2f} µs)")
    top.legend(fontsize=7, loc="upper right")
    bottom.bar(range(len(sim.core_busy)), [100 * b for b in sim.core_busy], color=COLORS["compute"])
    bottom.set_xlabel("core")
    bottom.set_ylabel("busy (%)")
    bottom.set_ylim(0, 100)
    bottom.set_title("per-core utilisation")
    fig.tight_layout()
    return fig


def show_plan(plan: Plan) -> list[Figure]:
    """The main pictures of a plan (scratchpad over time, cost breakdown, divisions); above ``AGGREGATE_OPS``
    ops, the whole-model overview instead."""
    if len(plan.ops) > AGGREGATE_OPS:
        return [model_overview(plan)]
    return [scratchpad_chart(plan), cost_breakdown(plan), division_chart(plan)]


def plan_overview(plan: Plan) -> Figure:
    """One figure with the scratchpad chart above the cost breakdown (for ``spyreopt show``); above
    ``AGGREGATE_OPS`` ops, ``model_overview``."""
    if len(plan.ops) > AGGREGATE_OPS:
        return model_overview(plan)
    fig = plt.figure(figsize=(10, 9 + 0.2 * len(plan.ops)))
    gs = fig.add_gridspec(2, 1, height_ratios=[1.2, 1])
    scratchpad_chart(plan, fig.add_subplot(gs[0]))
    cost_breakdown(plan, fig.add_subplot(gs[1]))
    fig.tight_layout()
    return fig


def _capacity(plan: Plan) -> int:
    return HardwareSpec.from_dict(plan.hardware).planner_lx_bytes


def _axes(ax, size):
    if ax is None:
        fig, ax = plt.subplots(figsize=size)
        return fig, ax
    return ax.figure, ax


def _dedupe_legend(ax) -> None:
    handles, labels = ax.get_legend_handles_labels()
    seen = {}
    for h, lab in zip(handles, labels):
        seen.setdefault(lab, h)
    if seen:
        ax.legend(seen.values(), seen.keys(), fontsize=7, loc="upper right")


# ---- whole models ------------------------------------------------------------------------------------------------
def occupancy_grid(plan: Plan, rows: int = ADDRESS_BINS, columns: int | None = None) -> np.ndarray:
    """[address bin, step]: the fraction of each bin of the planner's scratchpad that resident buffers (tensors
    and edge copies) hold at each op step; with ``columns``, at most that many columns, each the mean over
    consecutive steps."""
    cap = _capacity(plan)
    grid = np.zeros((rows, max(len(plan.ops), 1)))
    size = cap / rows
    held = [(t.address, t.bytes_per_core, t.lifetime) for t in plan.tensors if t.address is not None]
    held += [(e.copy_address, e.copy_bytes_per_core, e.lifetime) for e in plan.edges if e.copy_address is not None]
    for address, nbytes, (lo, hi) in held:
        b0, b1 = address / size, min((address + nbytes) / size, rows)
        idx = np.arange(int(b0), min(ceil(b1), rows))
        cover = np.clip(np.minimum(b1, idx + 1) - np.maximum(b0, idx), 0.0, 1.0)
        grid[idx, lo:hi] += cover[:, None]
    grid = np.minimum(grid, 1.0)
    if columns is None or grid.shape[1] <= columns:
        return grid
    edges = np.linspace(0, grid.shape[1], columns + 1).astype(int)
    return np.add.reduceat(grid, edges[:-1], axis=1) / np.diff(edges)[None, :]


def model_overview(plan: Plan) -> Figure:
    """A whole model at a glance: predicted time per layer by component, the scratchpad occupancy as a heat
    map over op steps, and the ``TOP_OPS`` ops that take longest. Its size does not grow with the op count."""
    fig = plt.figure(figsize=(12, 14))
    gs = fig.add_gridspec(3, 1, height_ratios=[1, 1, 1.1])
    layer_chart(plan, fig.add_subplot(gs[0]))
    occupancy_chart(plan, fig.add_subplot(gs[1]))
    top_ops_chart(plan, fig.add_subplot(gs[2]))
    fig.tight_layout()
    return fig


def layer_chart(plan: Plan, ax=None) -> Figure:
    """Predicted time per layer or segment (``groups_of``), stacked by component; the tick is the time after
    overlap. ``cost_breakdown`` draws this above ``AGGREGATE_OPS`` ops."""
    fig, ax = _axes(ax, (12, 4.5))
    groups = groups_of(plan)
    x = np.arange(len(groups))
    bottom = np.zeros(len(groups))
    for comp in COMPONENTS:
        h = np.array([sum(plan.ops[i].breakdown.get(comp, 0.0) for i in idx) for _, idx in groups])
        ax.bar(x, h, bottom=bottom, color=COLORS[comp], label=comp, width=0.85)
        bottom += h
    total = np.array([sum(plan.ops[i].predicted_us for i in idx) for _, idx in groups])
    ax.scatter(x, total, marker="_", s=120, color="black", zorder=5, label="predicted (after overlap)")
    _group_ticks(ax, [k for k, _ in groups], x)
    ax.set_ylabel("predicted time (µs)")
    ax.set_title(
        f"{plan.graph['name']}: {len(plan.ops):,} ops in {len(groups)} groups, {plan.cost_us:,.1f} µs predicted "
        f"({plan.backend}, {plan.status})"
    )
    ax.legend(fontsize=7, ncol=4, loc="upper right")
    return fig


def occupancy_chart(plan: Plan, ax=None) -> Figure:
    """The scratchpad as a heat map: address bins over op steps (``occupancy_grid``, at most ``STEP_BINS``
    columns). ``scratchpad_chart`` draws this above ``AGGREGATE_OPS`` ops."""
    fig, ax = _axes(ax, (12, 4.5))
    groups = groups_of(plan)
    cap = _capacity(plan) / KIB
    image = ax.imshow(occupancy_grid(plan, columns=STEP_BINS), origin="lower", aspect="auto", cmap="viridis", vmin=0.0, vmax=1.0,
                      extent=(0, len(plan.ops), 0, cap), interpolation="nearest")  # fmt: skip
    starts = [idx[0] for _, idx in groups]
    every = max(1, len(starts) // 16)
    ax.set_xticks(starts[::every])
    ax.set_xticklabels([k for k, _ in groups][::every], rotation=45, ha="right", fontsize=7)
    ax.set_xlabel("op step (ticks: where each group starts)")
    ax.set_ylabel(f"scratchpad address per core (KiB of {cap:,.0f})")
    per = ceil(len(plan.ops) / STEP_BINS)
    ax.set_title(f"scratchpad occupancy: fraction of each address bin in use, mean over {per} step(s) per column")
    fig.colorbar(image, ax=ax, fraction=0.03, pad=0.01)
    return fig


def top_ops_chart(plan: Plan, ax=None) -> Figure:
    """The ``TOP_OPS`` costliest ops, the same op of every layer merged (``repeated_ops``), by component.
    ``division_chart`` draws this above ``AGGREGATE_OPS`` ops, with each op's division in its label."""
    fig, ax = _axes(ax, (12, 5))
    top = repeated_ops(plan)[:TOP_OPS]
    names = [f"{name} x{len(idx)}" if len(idx) > 1 else name for name, idx in top]
    names = [
        f"{n}  ({label(plan.ops[idx[0]].division)}, {plan.ops[idx[0]].residency})" for n, (_, idx) in zip(names, top)
    ]
    left = np.zeros(len(top))
    for comp in COMPONENTS:
        w = np.array([sum(plan.ops[i].breakdown.get(comp, 0.0) for i in idx) for _, idx in top])
        ax.barh(names, w, left=left, color=COLORS[comp])
        left += w
    shares = [sum(plan.ops[i].predicted_us for i in idx) for _, idx in top]
    for j, (_, idx) in enumerate(top):
        each = f", {plan.ops[idx[0]].predicted_us:,.1f} each" if len(idx) > 1 else ""
        ax.text(left[j], j, f" {shares[j]:,.1f} µs{each}", va="center", fontsize=7)
    ax.set_xlim(0, max(left.max(initial=0.0), 1e-9) * 1.3)
    ax.invert_yaxis()
    ax.tick_params(axis="y", labelsize=7)
    ax.set_xlabel("time before overlap (µs); the label is the predicted time (x N: the same op in N groups)")
    share = sum(shares) / plan.cost_us if plan.cost_us else 0.0
    ax.set_title(f"where the time goes: the {len(top)} costliest ops ({share:.0%} of the total)")
    return fig


def _group_ticks(ax, names: list[str], x: np.ndarray) -> None:
    step = max(1, len(names) // 24)
    ax.set_xticks(x[::step])
    ax.set_xticklabels(names[::step], rotation=45, ha="right", fontsize=7)
    ax.set_xlim(-0.6, len(names) - 0.4)
