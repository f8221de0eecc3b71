"""Decisions handed over: per Inductor buffer, what the plan decided for it.

``decisions(captured)`` maps every Inductor buffer that has planned ops to a ``BufferDecision``:
the op that writes the buffer's data (its division as split factors per dim, cores, stick dim,
residency, scratchpad address and bytes per core, tiled loop), every other op the translation
made for the buffer (an attention kernel becomes matmuls and a softmax), and per consumer the
edge mode the data reaches it with (``inplace``, ``relayout``, ``restickify`` on chip; ``hbm``,
``spill`` through device memory).

``pins(decisions)`` turns them back into ``so.solve(pin=...)`` restrictions: solving the captured
graph with them reproduces the plan's divisions, residencies and loops. In ``mode="full"`` the
hook attaches the decisions to the ``GraphLowering`` before Inductor builds its scheduler
(``V.graph.spyreopt_decisions``), where a downstream pass reads them (``attached``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from spyreopt.model.candidates import resolve

if TYPE_CHECKING:
    from spyreopt.integrations.inductor.records import CapturedGraph

ATTRIBUTE = "spyreopt_decisions"  # the GraphLowering attribute full mode sets


@dataclass(frozen=True)
class OpDecision:
    op: str
    kind: str
    division: dict[str, int]  # split factor per iteration dim (m, n, k, b0.. for matmuls; d0, d1.. otherwise)
    cores: int
    stick: int  # the output's innermost (stick) dim
    residency: str  # lx | hbm | lx+hbm
    address: int | None  # scratchpad byte address of the output on every core (None: device memory)
    bytes_per_core: int
    loop: dict[str, Any] | None  # {"dim", "tiles", "staged"} when the op runs in a tiled loop

    def pin(self) -> dict[str, Any]:
        """This decision as an ``so.solve(pin=...)`` entry."""
        tiling = None if self.loop is None else {"dim": self.loop["dim"], "tiles": self.loop["tiles"]}
        return {"division": dict(self.division), "residency": self.residency, "tiling": tiling}


@dataclass(frozen=True)
class EdgeDecision:
    consumer: str  # the consuming op
    consumer_buffer: str  # its Inductor buffer
    mode: str  # inplace | relayout | restickify (on chip) | hbm | spill (through device memory): plan.EDGE_MODES
    restickify: bool


@dataclass(frozen=True)
class BufferDecision:
    buffer: str
    module: str | None
    source: str | None
    writer: OpDecision  # the op whose output holds the buffer's data
    ops: list[OpDecision] = field(default_factory=list)  # every planned op of the buffer, in schedule order
    consumers: list[EdgeDecision] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def decisions(captured: CapturedGraph) -> dict[str, BufferDecision]:
    """Every Inductor buffer with planned ops -> its decision (empty when the graph has no plan)."""
    plan, graph = captured.plan, captured.graph
    if plan is None or graph is None:
        return {}
    tensors = {t.producer: t for t in plan.tensors}
    loop_of = {n: lp for lp in plan.loops for n in lp.ops}
    per_op: dict[str, OpDecision] = {}
    for o in plan.ops:
        t, lp = tensors.get(o.name), loop_of.get(o.name)
        loop = None if lp is None else {"dim": lp.op_dims[o.name], "tiles": lp.tiles, "staged": list(lp.staged)}
        per_op[o.name] = OpDecision(
            o.name, o.kind, dict(o.division), o.cores, o.stick, o.residency, t.address if t and o.residency != "hbm" else None,
            t.bytes_per_core if t else 0, loop,
        )  # fmt: skip
    out: dict[str, BufferDecision] = {}
    for op, d in per_op.items():
        buffer = captured.op_buffer.get(op, op)
        out.setdefault(buffer, BufferDecision(buffer, *_origin(captured, buffer), d)).ops.append(d)
    for buffer, bd in list(out.items()):
        held = captured.buffer_tensor.get(buffer)
        base = resolve(graph, held).base if held in graph.tensors else None
        producer = graph.tensors[base].producer if base else None
        writer = per_op.get(producer) if producer else None
        writer = writer or bd.ops[-1]
        edges = [
            EdgeDecision(e.consumer, captured.op_buffer.get(e.consumer, e.consumer), e.mode, e.restickify)
            for e in plan.edges
            if e.producer == writer.op and captured.op_buffer.get(e.consumer, e.consumer) != buffer
        ]
        out[buffer] = BufferDecision(buffer, bd.module, bd.source, writer, bd.ops, edges)
    return out


def _origin(captured: CapturedGraph, buffer: str) -> tuple[str | None, str | None]:
    o = captured.origins.get(buffer)
    return (o.module, o.source) if o else (None, None)


def pins(decided: dict[str, BufferDecision]) -> dict[str, dict[str, Any]]:
    """``so.solve(graph, pin=pins(decisions(captured)))`` re-plans the captured graph with the same decisions."""
    return {d.op: d.pin() for bd in decided.values() for d in bd.ops}


def attached(lowering) -> dict[str, BufferDecision] | None:
    """The decisions full mode attached to a ``GraphLowering`` (``V.graph`` inside Inductor), or None."""
    return getattr(lowering, ATTRIBUTE, None)
