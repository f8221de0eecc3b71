"""Pictures of plans (matplotlib): where buffers sit in scratchpad, how ops divide, where time goes.

Every function returns a ``matplotlib.figure.Figure``; ``show_plan`` renders the
main ones in a notebook. Nothing here changes a plan.
"""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from spyreopt.model.division import label
from spyreopt.model.plan import Plan

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


def scratchpad_chart(plan: Plan, ax=None) -> Figure:
    """Scratchpad address over time: one rectangle per resident buffer at its address and lifetime.

    Tensors are solid; relayout and restickify copies are hatched; edges that
    spill (device-memory round trip) are marked with a red cross at the
    consumer's step; the dashed line is the planner's capacity.
    """
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
            Rectangle((lo, t.address / KIB), hi - lo, t.bytes_per_core / KIB, facecolor=COLORS["tensor"], edgecolor="black",
                      alpha=0.75, label="tensor", gid=f"tensor:{t.name}")  # fmt: skip
        )
        if t.bytes_per_core / KIB > ymax / 25:  # label only rectangles tall enough to read
            ax.text(lo + 0.05, (t.address + t.bytes_per_core / 2) / KIB, t.name, fontsize=7, va="center", clip_on=True)
    for e in plan.edges:
        if e.copy_address is not None:
            lo, hi = e.lifetime
            ax.add_patch(
                Rectangle((lo, e.copy_address / KIB), hi - lo, e.copy_bytes_per_core / KIB, facecolor=COLORS[e.mode],
                          edgecolor="black", hatch="//", alpha=0.6, label=f"{e.mode} copy", gid=f"copy:{e.tensor}->{e.consumer}")  # fmt: skip
            )
    steps = {o.name: i for i, o in enumerate(plan.ops)}
    spills = [steps[e.consumer] + 0.5 for e in plan.edges if e.mode == "spill"]
    if spills:
        ax.scatter(spills, [ymax * 0.02] * len(spills), marker="x", color=COLORS["spill"], s=60, zorder=5, label="spill")
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
    """Cores each op uses, with its split per dim written on the bar."""
    fig, ax = _axes(ax, (9, 0.35 * len(plan.ops) + 1.5))
    cores = int(plan.hardware["cores"])
    names = [o.name for o in plan.ops]
    ax.barh(names, [o.cores for o in plan.ops], color=[COLORS["compute"] if o.kind == "matmul" else "#8C8C8C" for o in plan.ops])
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
    """Predicted time per op by component; the hatched part is hidden by compute/memory overlap."""
    fig, ax = _axes(ax, (9, 0.35 * len(plan.ops) + 2.2))
    names = [o.name for o in plan.ops]
    left = [0.0] * len(plan.ops)
    for comp in COMPONENTS:
        widths = [o.breakdown.get(comp, 0.0) for o in plan.ops]
        ax.barh(names, widths, left=left, color=COLORS[comp], label=comp)
        left = [a + b for a, b in zip(left, widths)]
    # the overlapped time is paid once: hatch it over the shorter of compute and memory traffic
    hidden = [-o.breakdown.get("overlap", 0.0) for o in plan.ops]
    starts = [0.0 if o.breakdown["compute"] <= o.breakdown["memory"] + o.breakdown["spill"] else o.breakdown["compute"] for o in plan.ops]
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
    """The main pictures of a plan (scratchpad over time, cost breakdown, divisions)."""
    return [scratchpad_chart(plan), cost_breakdown(plan), division_chart(plan)]


def plan_overview(plan: Plan) -> Figure:
    """One figure with the scratchpad chart above the cost breakdown (for ``spyreopt show``)."""
    fig = plt.figure(figsize=(10, 9 + 0.2 * len(plan.ops)))
    gs = fig.add_gridspec(2, 1, height_ratios=[1.2, 1])
    scratchpad_chart(plan, fig.add_subplot(gs[0]))
    cost_breakdown(plan, fig.add_subplot(gs[1]))
    fig.tight_layout()
    return fig


def _capacity(plan: Plan) -> int:
    from spyreopt.hw.spec import HardwareSpec

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
