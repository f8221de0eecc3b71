"""Legality of a plan's tiled loops, re-derived from the graph, the plan's decisions and the loop rules.

A separate judge (the MiniMalloc validator's shape): nothing here comes from the
planner's candidates or iteration spaces. Each op's iteration dims are read
from the graph again (a matmul iterates over its batch dims ``b0..``, ``m``,
``n`` and the reduced ``k``; any other op over ``d0, d1, ...`` of its output, a
reduction over those of its input), views are followed to the tensor holding
the data, and the rules of a loop over ``T`` tiles are checked:

* the loop's ops exist, are compute ops, appear in no other loop, are listed in
  schedule order, are contiguous in the schedule (views aside) and connected by
  the graph's edges; ``OpPlan.loop`` names exactly the loops an op belongs to;
* every op iterates over its tiled dim (``op_dims``; the first op's is ``dim``),
  and along every edge inside the loop the producer's tiled dim is the very
  tensor dim the consumer tiles (views followed), so one tile flows per iteration;
* tile ``t`` of an extent ``E`` is ``[t*E/T, (t+1)*E/T)`` and the core division
  applies within it: ``E`` must divide by ``T * parts``; on a dim some tensor of
  the op is stuck on, every tile-core block is whole sticks;
* an op reducing over its tiled dim needs ``accumulate`` (its partial result
  stays on chip until the last tile), and its result cannot feed an op of the
  same loop; ``accumulate`` without such an op is a wrong claim;
* staged tensors enter the loop and do not vary with the tile;
* edges entering or leaving the loop go through device memory (the loop's
  outputs are written per tile), edges inside it stay on chip: in place only
  where every consumer core holds the very block of the tile it reads, a
  relayout gathering from at most ``relayout_fan_in`` cores;
* ``footprint_bytes`` (busiest core, one iteration) is recomputed and must equal
  the plan's figure and, with every buffer live across the loop, fit the
  scratchpad: the peak over the loop's ops of the tile buffers live at that op
  (an internal tensor's tile from its producer to its last consumer in the
  loop, and a relayout or restickify copy of a tile at its consumer), plus the
  accumulators and the staged tensors, live for the whole loop.
"""

from __future__ import annotations

import numpy as np

from spyreopt.errors import FormatError, GraphError, PlanError
from spyreopt.model.check.loop_dims import Loop, base_tensor, project, readers_of, to_base
from spyreopt.model.graph import Graph
from spyreopt.model.graph_parts import Op
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.layout import Box, box_padded_bytes, elems_per_stick
from spyreopt.model.plan_data import PlanData

LX_EDGE_MODES = ("inplace", "relayout", "restickify")
DEVICE_EDGE_MODES = ("hbm", "spill")


def check_loops(plan: PlanData) -> None:
    """Raise PlanError naming the loop, the op and the rule if any loop of the plan is illegal."""
    loops = plan.loops
    try:
        g = Graph.from_dict(plan.graph)
        hw = HardwareSpec.from_dict(plan.hardware)
    except (FormatError, GraphError) as exc:
        raise PlanError(f"plan: {exc}") from exc
    schedule = [o.name for o in g.compute_ops()]
    step = {n: i for i, n in enumerate(schedule)}
    member: dict[str, int] = {}
    for i, spec in enumerate(loops):
        where = f"loop {i} ({', '.join(spec.ops)})"
        if not spec.ops:
            raise PlanError(f"loop {i}: has no ops")
        for n in spec.ops:
            if n not in g.ops:
                raise PlanError(f"{where}: op {n!r} is not in the graph")
            if n not in step:
                raise PlanError(f"{where}: op {n!r} is a {g.ops[n].kind}, not a compute op")
            if n in member:
                raise PlanError(f"{where}: op {n!r} is already in loop {member[n]}")
            member[n] = i
        if spec.tiles < 2:
            raise PlanError(f"{where}: {spec.tiles} tiles; a loop needs at least 2")
        if spec.dim != spec.op_dims.get(spec.ops[0]):
            raise PlanError(
                f"{where}: dim {spec.dim!r} differs from its first op's tiled dim {spec.op_dims.get(spec.ops[0])!r}"
            )
        if sorted(spec.op_dims) != sorted(spec.ops):
            raise PlanError(f"{where}: op_dims names {sorted(spec.op_dims)}, the loop's ops are {sorted(spec.ops)}")
        order = [step[n] for n in spec.ops]
        if order != sorted(order):
            raise PlanError(f"{where}: ops are not listed in schedule order")
        if order[-1] - order[0] != len(order) - 1:
            gap = [schedule[s] for s in range(order[0], order[-1]) if schedule[s] not in spec.ops]
            raise PlanError(f"{where}: not contiguous in the schedule: op(s) {gap} run between its ops")
    for o in plan.ops:
        want = member.get(o.name)
        if o.loop != want:
            raise PlanError(f"op {o.name!r}: plan says loop {o.loop}, but the loops place it in {want}")
    readers = readers_of(g)
    for i in range(len(loops)):
        _check_loop(Loop(plan, g, hw, i, readers), plan)


def _consumers(L: Loop, tensor: str) -> list[tuple[Op, int]]:
    """Compute ops reading ``tensor`` (through views), with the operand index (``Loop.readers``)."""
    return list(L.readers.get(tensor, ()))


def _check_loop(L: Loop, plan: PlanData) -> None:
    g, spec, inside = L.g, L.spec, set(L.spec.ops)
    _check_connected(L)
    for n in L.names:
        _check_divisible(L, n)
        op = g.ops[n]
        if L.reduces(n):
            if not spec.accumulate:
                raise L.error(
                    f"op {n!r} reduces over its tiled dim {spec.op_dims[n]!r} but the loop does not accumulate"
                )
            inner = [c.name for c, _ in _consumers(L, op.output) if c.name in inside]
            if inner:
                raise L.error(
                    f"op {n!r} accumulates over the tiles; its result is complete only after the last tile, "
                    f"so op(s) {inner} of the same loop cannot read it"
                )
        for j, x in enumerate(op.inputs):
            base, perm = base_tensor(g, x)
            prod_ = g.tensors[base].producer
            e = L.edges.get((n, j))
            if prod_ in inside:
                _check_inner_edge(L, prod_, n, j, base, perm, e)
            elif e is not None and e.mode not in DEVICE_EDGE_MODES:
                raise L.error(
                    f"edge {prod_!r} -> {n!r} enters the loop with mode {e.mode!r}; "
                    f"it must come from device memory (hbm or spill)"
                )
            elif prod_ is not None and "hbm" not in L.decisions[prod_].residency:
                raise L.error(
                    f"edge {prod_!r} -> {n!r} enters the loop from device memory, but op {prod_!r} keeps "
                    f"{base!r} in scratchpad only (residency {L.decisions[prod_].residency!r})"
                )
        for c, j in _consumers(L, op.output):
            e = L.edges.get((c.name, j))
            if c.name not in inside and (e is None or e.mode not in DEVICE_EDGE_MODES):
                mode = None if e is None else e.mode
                raise L.error(
                    f"edge {n!r} -> {c.name!r} leaves the loop with mode {mode!r}; "
                    f"the loop writes its outputs to device memory"
                )
        leaves = op.output in g.outputs or any(c.name not in inside for c, _ in _consumers(L, op.output))
        if leaves and "hbm" not in L.decisions[n].residency:
            raise L.error(
                f"op {n!r}: its output leaves the loop but its residency is {L.decisions[n].residency!r}, "
                f"not written to device memory"
            )
    if spec.accumulate and not any(L.reduces(n) for n in L.names):
        raise L.error("accumulate is set, but no op reduces over its tiled dim")
    _check_staged(L)
    _check_footprint(L, plan)


def _check_connected(L: Loop) -> None:
    names = L.names
    adj: dict[str, set[str]] = {n: set() for n in names}
    for n in names:
        for x in L.g.ops[n].inputs:
            p = L.g.tensors[base_tensor(L.g, x)[0]].producer
            if p in adj:
                adj[n].add(p)
                adj[p].add(n)
    seen, todo = {names[0]}, [names[0]]
    while todo:
        for m in adj[todo.pop()] - seen:
            seen.add(m)
            todo.append(m)
    if len(seen) != len(names):
        raise L.error(f"ops {sorted(set(names) - seen)} are not connected by edges to op {names[0]!r}")


def _check_divisible(L: Loop, n: str) -> None:
    d, it, T = L.dims[n], L.it[n], L.spec.tiles
    e, parts = d.extents[it], L.factors(n)[it]
    if e % (T * parts):
        raise L.error(f"op {n!r}: dim {d.names[it]!r} of extent {e} does not split into {T} tiles x {parts} cores")
    block = e // (T * parts)
    for dim, tensor in d.stuck:
        eps = elems_per_stick(L.g.tensors[tensor].elem_bytes, L.hw.stick_bytes)
        if dim == it and block % eps:
            raise L.error(
                f"op {n!r}: tile-core block of {block} elements on dim {d.names[it]!r} is not whole sticks "
                f"of tensor {tensor!r} ({eps} elements)"
            )


def _check_inner_edge(L: Loop, p: str, c: str, j: int, base: str, perm: tuple[int, ...], e) -> None:
    if e is None or e.mode not in LX_EDGE_MODES:
        mode = None if e is None else e.mode
        raise L.error(
            f"edge {p!r} -> {c!r} inside the loop has mode {mode!r}; "
            f"one tile per iteration stays on chip ({', '.join(LX_EDGE_MODES)})"
        )
    if "lx" not in L.decisions[p].residency:
        raise L.error(
            f"op {p!r}: its output feeds op {c!r} in the loop but its residency is {L.decisions[p].residency!r}"
        )
    pdim = L.dims[p].output.index(L.it[p]) if L.it[p] in L.dims[p].output else None
    cmap = L.dims[c].operands[j]
    cdim = perm[cmap.index(L.it[c])] if L.it[c] in cmap else None
    if cdim is None:
        raise L.error(
            f"op {c!r} tiles dim {L.spec.op_dims[c]!r}, which its operand {j} ({base!r}) does not have, so it would "
            f"read all of {base!r} while op {p!r} produces one tile per iteration"
        )
    if pdim != cdim:
        raise L.error(
            f"edge {p!r} -> {c!r}: op {p!r} tiles dim {pdim} of tensor {base!r}, op {c!r} tiles its dim {cdim}: "
            f"the tiles do not line up"
        )
    _check_tile_slices(L, p, c, j, base, e.mode)


def _check_tile_slices(L: Loop, p: str, c: str, j: int, base: str, mode: str) -> None:
    """In place, every consumer core holds exactly the block of the tile it reads, in the stick it reads it;
    a relayout gathers each core's block from at most ``relayout_fan_in`` producer cores."""
    owners, stick = L.owner_boxes(p), int(L.decisions[p].stick)
    need = _need_stick(L, c, j)
    if mode in ("inplace", "relayout") and need != stick:
        raise L.error(
            f"edge {p!r} -> {c!r} ({mode}): op {c!r} reads {base!r} with stick dim {need}, it is stored with {stick}"
        )
    reads = _read_boxes(L, c, j)
    for core, box in enumerate(reads):
        if mode == "inplace" and owners.get(core) != box:
            held = owners.get(core)
            raise L.error(
                f"edge {p!r} -> {c!r} in place: core {core} reads block {list(box)} of the tile of {base!r} but "
                f"holds {list(held) if held else 'none of it'}"
            )
    if mode == "relayout" and owners and reads:  # per reading core, the owner blocks its block overlaps
        own, read = np.array(list(owners.values())), np.array(reads)  # [owners or cores, dims, (lo, hi)]
        lo = np.maximum(read[:, None, :, 0], own[None, :, :, 0])
        sources = (lo < np.minimum(read[:, None, :, 1], own[None, :, :, 1])).all(axis=2).sum(axis=1)
        for core in np.flatnonzero(sources > L.hw.relayout_fan_in)[:1].tolist():
            raise L.error(
                f"edge {p!r} -> {c!r} relayout: core {core} gathers its block of the tile of {base!r} from "
                f"{int(sources[core])} cores, above the fan-in limit {L.hw.relayout_fan_in}"
            )


def _reads_tiled_dim(L: Loop, n: str, j: int) -> bool:
    return L.it[n] in L.dims[n].operands[j]


def _check_staged(L: Loop) -> None:
    inside = set(L.spec.ops)
    for s in L.spec.staged:
        if s not in L.g.tensors:
            raise L.error(f"staged tensor {s!r} is not in the graph")
        if L.g.tensors[s].producer in inside:
            raise L.error(f"staged tensor {s!r} is produced inside the loop")
        readers = [(c.name, j) for c, j in _consumers(L, s) if c.name in inside]
        if not readers:
            raise L.error(f"staged tensor {s!r} is read by no op of the loop")
        tiled = [n for n, j in readers if _reads_tiled_dim(L, n, j)]
        if tiled:
            raise L.error(f"staged tensor {s!r} varies with the tile (op(s) {tiled} read it along their tiled dim)")


def _padded(L: Loop, tensor: str, box: Box, stick: int) -> int:
    return box_padded_bytes(box, stick, L.g.tensors[tensor].elem_bytes, L.hw.stick_bytes)


def _read_boxes(L: Loop, n: str, j: int) -> list[Box]:
    """Per core of op ``n``, its block of operand ``j`` in tile 0 (base coords)."""
    _, perm = base_tensor(L.g, L.g.ops[n].inputs[j])
    return [to_base(project(b, L.dims[n].operands[j]), perm) for b in L.core_boxes(n)]


def _need_stick(L: Loop, n: str, j: int) -> int:
    """The stick dim (base coords) op ``n`` reads operand ``j`` in."""
    op, (base, perm) = L.g.ops[n], base_tensor(L.g, L.g.ops[n].inputs[j])
    if op.kind == "matmul":
        return perm[-1]
    cmap, stick = L.dims[n].operands[j], int(L.decisions[n].stick)
    if stick in cmap:
        return perm[cmap.index(stick)]
    return L.tensors[base].stick if base in L.tensors else len(L.g.tensors[base].shape) - 1


def footprint(L: Loop) -> int:
    """Busiest core's scratchpad bytes in one iteration (see the module doc)."""
    whole, at = _usage(L)
    return max(whole[c] + max(at[n][c] for n in L.names) for c in range(L.hw.cores))


def _usage(L: Loop) -> tuple[list[int], dict[str, list[int]]]:
    """Per core, the bytes live for the whole loop (accumulators, staged tensors), and at each op the tiles."""
    g, inside, cores = L.g, set(L.spec.ops), L.hw.cores
    whole = [0] * cores  # accumulators and staged tensors: live the whole loop
    at = {n: [0] * cores for n in L.names}  # tile buffers live at each op
    for n in L.names:
        out, stick = g.ops[n].output, int(L.decisions[n].stick)
        owners = {c: _padded(L, out, b, stick) for c, b in L.owner_boxes(n).items()}
        if L.reduces(n):
            for c, b in owners.items():
                whole[c] += b
            continue
        readers = [c.name for c, _ in _consumers(L, out) if c.name in inside]
        if not readers:
            continue
        last = max(L.names.index(r) for r in readers)
        for m in L.names[L.names.index(n) : last + 1]:
            for c, b in owners.items():
                at[m][c] += b
    for n in L.names:
        for j, x in enumerate(g.ops[n].inputs):
            base = base_tensor(g, x)[0]
            e = L.edges.get((n, j))
            if g.tensors[base].producer in inside and e is not None and e.mode in ("relayout", "restickify"):
                for c, b in enumerate(_read_boxes(L, n, j)):
                    at[n][c] += _padded(L, base, b, _need_stick(L, n, j))
    for s in L.spec.staged:
        boxes: dict[int, Box] = {}
        for op, j in _consumers(L, s):
            if op.name in inside:
                for c, b in enumerate(_read_boxes(L, op.name, j)):
                    old = boxes.get(c, b)
                    boxes[c] = tuple((min(x0, y0), max(x1, y1)) for (x0, x1), (y0, y1) in zip(old, b))
        reader = next(op.name for op, j in _consumers(L, s) if op.name in inside)
        jj = next(j for op, j in _consumers(L, s) if op.name == reader)
        for c, b in boxes.items():
            whole[c] += _padded(L, s, b, _need_stick(L, reader, jj))
    return whole, at


def _check_footprint(L: Loop, plan: PlanData) -> None:
    """The figure matches, and at every op of the loop its bytes and every other buffer live there fit."""
    got = footprint(L)
    if got != L.spec.footprint_bytes:
        raise L.error(
            f"footprint_bytes {L.spec.footprint_bytes}, but one iteration needs {got} bytes on the busiest core"
        )
    schedule = [o.name for o in L.g.compute_ops()]
    mine = {L.g.ops[n].output for n in L.names}
    others = [t for t in plan.tensors if t.name not in mine and t.address is not None and len(t.lifetime) == 2]
    whole, at = _usage(L)
    cap = L.hw.planner_lx_bytes
    for n in L.names:
        step = schedule.index(n)
        around = sum(t.bytes_per_core for t in others if t.lifetime[0] <= step < t.lifetime[1])
        mine_here = max(whole[c] + at[n][c] for c in range(L.hw.cores))
        if mine_here + around > cap:
            raise L.error(
                f"at op {n!r} the loop holds {mine_here} bytes per core and {around} bytes of other buffers are "
                f"live: they exceed the scratchpad capacity {cap}"
            )
