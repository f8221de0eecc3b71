"""An explanation of a plan (``Plan.explain()``): each op's choice against its best alternatives, each edge's
mode, and its plain text (``Explanation.text()``, ``spyreopt explain``). ``model.explain`` makes one."""

from __future__ import annotations

from dataclasses import dataclass, field

from spyreopt.model.division import label

Tiling = tuple[str, int, tuple[str, ...]]  # (dim in the op's naming, tile count, staged tensor names)


@dataclass(frozen=True)
class Choice:
    """One op's decision: what ``pin`` names (division, residency, tiling) and the output stick dim."""

    division: dict[str, int]
    stick: int
    residency: str
    tiling: Tiling | None = None


@dataclass
class Alternative:
    kind: str  # "best" (cheapest other candidate) | "alone" (cheapest op time on its own) | "residency"
    choice: Choice
    alone_us: float  # the op's own time with this choice, its producers' edges left out
    cost_us: float | None  # the whole plan's cost with this choice, every other decision as planned; None: impossible
    reasons: list[str] = field(default_factory=list)  # the price of each change, or what makes it impossible


@dataclass
class OpExplanation:
    op: str
    kind: str
    chosen: Choice
    cores: int
    predicted_us: float
    breakdown: dict[str, float]
    alone_us: float
    alternatives: list[Alternative]
    note: str = ""  # pinned, or fixed outside the enumerated candidates


@dataclass
class EdgeExplanation:
    tensor: str
    producer: str
    consumer: str
    operand: int
    mode: str
    cost_us: float | None  # the edge's additive time plus its device-memory read (before overlap); None: staged
    reasons: list[str]


@dataclass
class Explanation:
    graph: str
    cost_us: float
    ops: list[OpExplanation]
    edges: list[EdgeExplanation]
    notes: list[str]

    def text(self, op: str | None = None) -> str:
        return render(self, op)


KINDS = {
    "best": "best alternative",
    "alone": "fastest alone",
    "residency": "residency instead",
}
PARTS = ("compute", "memory", "spill", "overlap", "restickify", "relayout", "overhead")


def choice_text(c: Choice) -> str:
    loop = "" if c.tiling is None else f", loop over {c.tiling[0]} in {c.tiling[1]} tiles"
    if c.tiling and c.tiling[2]:
        loop += f" staging {', '.join(c.tiling[2])}"
    return f"{label(c.division)}, stick {c.stick}, {c.residency}{loop}"


def _breakdown(b: dict[str, float]) -> str:
    return " ".join(
        f"{'+' if b[k] >= 0 else '-'} {k} {abs(b[k]):,.3f}" for k in PARTS if abs(b.get(k, 0.0)) >= 5e-4
    ).lstrip("+ ")


def op_text(x: OpExplanation) -> list[str]:
    lines = [
        f"op {x.op} ({x.kind}): {choice_text(x.chosen)} on {x.cores} cores: {x.predicted_us:,.3f} µs"
        f" = {_breakdown(x.breakdown) or '0'}"
    ]
    if x.note:
        lines.append(f"  {x.note}")
    if not x.alternatives:
        lines.append("  no other candidate: this is the only legal decision")
    for alt in x.alternatives:
        cost = "impossible" if alt.cost_us is None else f"plan {alt.cost_us:,.3f} µs"
        lines.append(
            f"  {KINDS[alt.kind]}: {choice_text(alt.choice)} "
            f"({alt.alone_us:,.3f} µs alone vs {x.alone_us:,.3f}): {cost}"
        )
        lines.extend(f"    {r}" for r in alt.reasons)
    return lines


def render(ex: Explanation, op: str | None = None) -> str:
    lines = [f"{ex.graph}: {ex.cost_us:,.3f} µs predicted; each op's choice against its best one-op alternatives"]
    lines += [f"note: {n}" for n in ex.notes]
    for x in ex.ops:
        lines += op_text(x)
    if ex.edges:
        lines.append("")
        lines.append(f"edges not in place ({len(ex.edges)}):")
    for e in ex.edges:
        cost = "" if e.cost_us is None else f", {e.cost_us:,.3f} µs"
        lines.append(f"edge {e.tensor}: {e.producer} -> {e.consumer} [operand {e.operand}]: {e.mode}{cost}")
        lines.extend(f"  {r}" for r in e.reasons)
    return "\n".join(lines)
