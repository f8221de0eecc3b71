"""Decisions handed over in torch-spyre's ``solved`` form, for the buffers torch-spyre's allocator plans.

torch-spyre's co-optimiser (``formats.torch_spyre``) is handed, per Inductor buffer, a menu of core
divisions of the op that writes it, each as ``{stride: factor}`` output splits (the stride, in
elements, of the buffer's dim that is split) and reduction splits; it answers per buffer
``{"name", "chosen_division", "address", "resident"}``, the division an index into that menu.
spyreopt decides split factors per iteration dim of the writing op (``decisions``). So:

* ``splits(captured, decision)``: our division as torch-spyre's splits: each split output dim keyed by
  its stride in the Inductor buffer's storage; a split matmul ``k`` keyed by its stride in the first
  operand's buffer (our reading: the captures do not say which stride a reduction split names);
* ``solved(captured, graph)``: for torch-spyre's own inputs of the same graph (a ``CaptureGraph``), one
  answer per buffer: the menu entry equal to our splits, our residency and scratchpad address. A buffer
  we did not plan, held through a view, or whose division is not on torch-spyre's menu gets division 0,
  off chip, and is listed in ``unmatched`` with the reason: nothing is dropped silently. Resident means
  every read from the scratchpad (``lx``): our ``lx+hbm`` (on chip for the first readers, from device
  memory for later ones) has no counterpart in this form and is answered off chip, listed;
* ``capture_inputs(captured)``: the inputs our plan implies in torch-spyre's form (sizes, use steps in
  our schedule, parents, the in-place parent whose dying buffer our plan writes the output over; the menu is our division and the
  undivided one, and the one pair declared matching per parent is the one our plan used), so that an answer can be judged by
  ``formats.torch_spyre_judge`` under torch-spyre's rules (128-byte sticks, its per-core footprint, no
  overlap while live) without torch-spyre at hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from spyreopt.formats.torch_spyre import Answer, CaptureGraph, to_solved
from spyreopt.integrations.inductor.decisions import BufferDecision, decisions
from spyreopt.integrations.inductor.records import CapturedGraph
from spyreopt.model.candidates import resolve
from spyreopt.model.opspace import op_space

Pairs = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Handover:
    answers: tuple[Answer, ...]  # one per buffer of torch-spyre's graph, in its order
    unmatched: dict[str, str] = field(default_factory=dict)  # buffer -> why its answer is not our decision

    def solved(self) -> list[dict]:
        """The answers as a capture's ``solved`` list."""
        return to_solved(self.answers)


def splits(captured: CapturedGraph, bd: BufferDecision) -> tuple[Pairs, Pairs] | str:
    """(output splits, reduction splits) of the buffer's writer, as sorted (stride, factor) pairs; or why not."""
    g, op = captured.graph, captured.graph.ops[bd.writer.op]
    strides = captured.buffer_strides.get(bd.buffer)
    if strides is None or captured.buffer_tensor.get(bd.buffer) != op.output:
        return "its data is held through a view of the writing op's output"
    space = op_space(g, op)
    out, red = [], []
    for j, i in enumerate(space.output_map):
        f = bd.writer.division.get(space.dims[i], 1) if i is not None else 1
        if f > 1:
            out.append((strides[j], f))
    for i, name in enumerate(space.dims):
        f = bd.writer.division.get(name, 1)
        if f > 1 and space.reduction[i]:
            operand = space.operand_maps[0].index(i)
            held = {t: b for b, t in captured.buffer_tensor.items()}.get(resolve(g, op.inputs[0]).base)
            by = captured.buffer_strides.get(held) if held else None
            if by is None or by[operand] is None:
                return f"its split reduction dim {name} is read from no buffer with known strides"
            red.append((by[operand], f))
    if any(s is None for s, _ in out):
        return "a split output dim has no stride in the buffer"
    return tuple(sorted(out)), tuple(sorted(red))


def solved(captured: CapturedGraph, graph: CaptureGraph) -> Handover:
    """Our decisions as torch-spyre's answers for ``graph`` (its inputs for the same Inductor graph)."""
    decided = decisions(captured)
    answers, unmatched = [], {}
    for b in graph.buffers:
        bd = decided.get(b.name)
        why, index = None, None
        if bd is None:
            why = "spyreopt planned no op writing it"
        elif bd.writer.loop is not None:
            why = "it is written in a tiled loop (torch-spyre's answer has no tiles)"
        else:
            got = splits(captured, bd)
            if isinstance(got, str):
                why = got
            else:
                menu = [(tuple(sorted(d.output)), tuple(sorted(d.reduction))) for d in b.divisions]
                index = next((k for k, m in enumerate(menu) if _drop_ones(m) == got), None)
                why = None if index is not None else f"its division {got} is not on torch-spyre's menu"
        if why is not None:
            unmatched[b.name] = why
            answers.append(Answer(b.name, 0, None, False))
            continue
        resident = bd.writer.residency == "lx" and b.residency_reason is None and b.size >= 0
        if bd.writer.residency == "lx+hbm":
            unmatched[b.name] = "on chip for its first readers, device memory for later ones: off chip in this form"
        elif bd.writer.residency == "lx" and not resident:
            unmatched[b.name] = f"torch-spyre keeps it off chip ({b.residency_reason or 'size unknown'})"
        answers.append(Answer(b.name, index, bd.writer.address if resident else None, resident))
    return Handover(tuple(answers), unmatched)


def _drop_ones(menu_entry: tuple[Pairs, Pairs]) -> tuple[Pairs, Pairs]:
    return tuple(tuple(p for p in pairs if p[1] > 1) for pairs in menu_entry)  # type: ignore[return-value]


def capture_inputs(captured: CapturedGraph) -> dict:
    """The torch-spyre inputs our plan implies for its buffers (``{"inputs": [...], "solved": []}``)."""
    plan, g = captured.plan, captured.graph
    decided = {b: d for b, d in decisions(captured).items() if d.writer.loop is None}
    got_splits = {b: got for b, d in decided.items() if not isinstance(got := splits(captured, d), str)}
    decided = {b: d for b, d in decided.items() if b in got_splits}
    order = {o.name: k for k, o in enumerate(plan.ops)}
    ops = {o.name: o for o in plan.ops}
    step = {b: order[d.writer.op] for b, d in decided.items()}
    by_op = {d.writer.op: b for b, d in decided.items()}
    graph_outputs = {resolve(g, t).base for t in g.outputs}
    inputs = []
    for b, d in sorted(decided.items(), key=lambda kv: step[kv[0]]):
        op = g.ops[d.writer.op]
        size = g.tensors[op.output].nbytes
        parents = [p for p in dict.fromkeys(by_op.get(g.tensors[resolve(g, x).base].producer) for x in op.inputs) if p]
        readers = [by_op[e.consumer] for e in plan.edges if e.producer == d.writer.op and e.consumer in by_op]
        over = ops[d.writer.op].inplace_over  # the operand whose dying buffer our output is written over
        held = by_op.get(g.tensors[resolve(g, op.inputs[over]).base].producer) if over is not None else None
        in_place = [held] if held in parents and decided[held].writer.residency == "lx" else []
        got = got_splits[b]
        ours = {"output_splits": {str(s): f for s, f in got[0]}, "reduction_splits": {str(s): f for s, f in got[1]}}
        menu = [ours] + ([{"output_splits": {}, "reduction_splits": {}}] if got != ((), ()) else [])
        is_output = op.output in graph_outputs
        inputs.append({
            "name": b, "size": size, "uses": sorted({step[b], *(step[r] for r in readers)}),
            "first_use_is_read": False, "in_place_parents": in_place,
            "residency_reason": "graph output" if is_output and d.writer.residency == "hbm" else None,
            "boundary_cost": size if is_output else 0, "parents": parents, "core_divisions": menu,
            "cd_parent_matches": {p: [[0, 0]] for p in parents},  # the pair our plan used: both at our division
        })  # fmt: skip
    return {"inputs": inputs, "solved": []}
