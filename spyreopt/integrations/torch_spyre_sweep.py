"""Spill traffic against capacity for one capture graph: what co-optimising division and residency buys.

``sweep`` solves the graph at capacities from the smallest per-core footprint any buffer can take (below it everything spills) up to the
capacity at which nothing needs to spill (and the reference's own capacity, and torch-spyre's planning
share), judges every answer, and finds the smallest capacity at which ours matches the reference's spill
traffic by bisection over whole sticks (spill traffic does not increase with capacity: an answer valid at a
capacity is valid at every larger one, and the reference is the incumbent wherever it is valid).
"""

from __future__ import annotations

from dataclasses import dataclass

from spyreopt.formats.torch_spyre import PLANNING_SHARE, CaptureGraph
from spyreopt.formats.torch_spyre_judge import judge
from spyreopt.formats.torch_spyre_model import STICK, footprint
from spyreopt.integrations.torch_spyre import reference_capacity, solve_graph


@dataclass(frozen=True)
class SweepRow:
    capacity: int
    spill: int  # ours
    status: str
    seconds: float
    reference_spill: int | None  # the reference's, where it is valid at this capacity
    note: str = ""


def sweep(graph: CaptureGraph, *, points: int = 12, backend=None, time_limit: float = 1.0, seed: int = 0):
    """Rows sorted by capacity (module docstring)."""
    ref_cap = reference_capacity(graph)
    theirs = judge(graph, graph.reference, None).spill if graph.reference is not None else None
    lo = min(
        (min(footprint(b, d) for d in range(len(b.divisions))) for b in graph.buffers if b.size > 0), default=STICK
    )
    everything = sum(max(footprint(b, d) for d in range(len(b.divisions))) for b in graph.buffers if b.size > 0)
    hi = max(everything, ref_cap or 0)
    caps = {lo, hi, PLANNING_SHARE} | ({ref_cap} if ref_cap else set())
    caps |= {_stick(lo * (hi / lo) ** (k / (points - 1))) for k in range(points)}
    rows = {c: _row(graph, c, ref_cap, theirs, backend, time_limit, seed) for c in sorted(caps)}
    if theirs is not None:
        match = smallest_matching(graph, theirs, lo, ref_cap, backend, time_limit, seed, rows)
        if match is not None:
            rows[match] = SweepRow(**{**rows[match].__dict__, "note": "smallest capacity matching the reference"})
    return [rows[c] for c in sorted(rows)]


def _stick(x: float) -> int:
    return max(STICK, int(x) // STICK * STICK)


def _row(graph, cap, ref_cap, theirs, backend, time_limit, seed) -> SweepRow:
    r = solve_graph(graph, cap, backend=backend, time_limit=time_limit, seed=seed)
    ref = theirs if ref_cap is not None and cap >= ref_cap else None
    note = "the reference's own capacity" if cap == ref_cap else ""
    return SweepRow(cap, r.verdict.spill, r.status, r.seconds, ref, note)


def smallest_matching(graph, theirs, lo, ref_cap, backend, time_limit, seed, rows) -> int | None:
    """Smallest capacity (whole sticks) at which our spill is at most the reference's, by bisection."""
    if ref_cap is None:
        return None
    a, b = lo // STICK, ref_cap // STICK  # ours at ref_cap matches: the reference is the incumbent there
    while a < b:
        mid = (a + b) // 2
        cap = mid * STICK
        if cap not in rows:
            rows[cap] = _row(graph, cap, ref_cap, theirs, backend, time_limit, seed)
        if rows[cap].spill <= theirs:
            b = mid
        else:
            a = mid + 1
    cap = a * STICK
    if cap not in rows:
        rows[cap] = _row(graph, cap, ref_cap, theirs, backend, time_limit, seed)
    return cap


def table(graph: CaptureGraph, rows: list[SweepRow]) -> str:
    lines = [
        f"capacity sweep of {graph.label} ({len(graph.buffers)} buffers)",
        "| capacity (B) | ours: spill (B) | status | reference: spill (B) | s | note |",
        "| ---: | ---: | --- | ---: | ---: | --- |",
    ]
    for r in rows:
        ref = "-" if r.reference_spill is None else f"{r.reference_spill:,}"
        lines.append(f"| {r.capacity:,} | {r.spill:,} | {r.status} | {ref} | {r.seconds:.2f} | {r.note} |")
    return "\n".join(lines)


def plot(graph: CaptureGraph, rows: list[SweepRow], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    caps = [r.capacity / 1024 for r in rows]
    proven = "every point proven optimal" if all(r.status == "optimal" for r in rows) else "judged valid"
    ax.step(caps, [r.spill / 2**20 for r in rows], where="post", marker="o", ms=3, label=f"spyreopt ({proven})")
    ref_cap = reference_capacity(graph)
    if ref_cap is not None:
        theirs = judge(graph, graph.reference, None).spill
        ax.plot([ref_cap / 1024], [theirs / 2**20], "rs", ms=8, label="torch-spyre's answer, at its own capacity")
        match = next((r for r in rows if r.note.startswith("smallest")), None)
        if match is not None:
            ax.axvline(match.capacity / 1024, color="grey", ls=":", lw=1, label="ours matches it from here")
    ax.axvline(PLANNING_SHARE / 1024, color="k", ls="--", lw=0.8, label="planning share (1,625,344 B)")
    ax.set_xscale("log")
    ax.set_xlabel("scratchpad capacity per core (KiB, log)")
    ax.set_ylabel("spill traffic (MiB)")
    ax.set_title(f"torch-spyre capture {graph.label}: spill traffic against capacity")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
