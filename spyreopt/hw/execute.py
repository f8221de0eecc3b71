"""Numeric execution of a plan on per-core slices, and the reference it must match.

``execute(plan)`` runs the plan the way the device would, with numpy: each core
computes its iteration box from the operand slices it holds; a k-split's
owners add their peers' partial sums; resident outputs are written as raw
sticks into each owner core's scratchpad at the plan's address, and in-place
consumers decode whatever sticks are there; a relayout gathers fragments from
the source cores' scratchpads into a copy at the plan's copy address (a
restickify likewise, writing the copy in the new stick layout: numerically the
identity); ``hbm`` and ``spill`` edges read back the full tensor the producer
wrote to the device-memory dictionary. Nothing is taken from the reference, so
a plan that moves the wrong slice produces wrong numbers. A tiled loop runs tile
by tile (every op on tile 0, then tile 1, ...): each tile of an internal tensor
is written at the tensor's address over the previous one, staged tensors are cut
from a copy loaded once, and an op reducing over the tiled dim folds each tile's
partial result (sum, max, min; a mean sums the tiles' means and divides by T)
and stores it after the last tile.

Precision: every tensor is computed in float32 whatever its dtype (fp16, bf16
and fp8 tensors are not rounded to their format), so ``execute`` checks the
plan's data movement, not the formats' accuracy. ``check_execution`` compares
with ``reference`` at ``rtol=1e-4, atol=1e-5`` (NaN must match NaN: inputs of
log or sqrt may be negative); k-split partial sums and blocked matmuls sum in a
different order than the reference, which these tolerances absorb for
float32 with inputs of order one.
"""

from __future__ import annotations

import numpy as np

from spyreopt.errors import PlanError
from spyreopt.hw.sim_loop import Loop, loops_of, staged_boxes, tile_step
from spyreopt.hw.sim_numpy import apply, checked_inputs, random_inputs, reference_values
from spyreopt.hw.sim_slices import project
from spyreopt.hw.sim_sticks import RawScratchpad
from spyreopt.hw.sim_trace import Operand, Step, Trace, kept_slices
from spyreopt.model.graph import Graph
from spyreopt.model.layout import Box, box_extents, elems_per_stick, intersect
from spyreopt.model.plan import Plan

RTOL, ATOL = 1e-4, 1e-5


def _index(box: Box, origin: Box | None = None) -> tuple[slice, ...]:
    if origin is None:
        return tuple(slice(lo, hi) for lo, hi in box)
    return tuple(slice(lo - o, hi - o) for (lo, hi), (o, _) in zip(box, origin))


class _Machine:
    def __init__(self, trace: Trace, inputs: dict[str, np.ndarray]):
        hw = trace.hw
        self.trace = trace
        eps = [elems_per_stick(t.elem_bytes, hw.stick_bytes) for t in trace.graph.tensors.values()]
        self.lx = RawScratchpad(hw.cores, hw.planner_lx_bytes, hw.stick_bytes, max(eps))
        self.device: dict[str, np.ndarray] = dict(inputs)
        self.tile_steps: dict[int, Step] = {}  # inside a loop: each of its steps on the current tile

    def eps(self, tensor: str) -> int:
        return elems_per_stick(self.trace.tensor(tensor).elem_bytes, self.trace.hw.stick_bytes)

    # ---- operands ----------------------------------------------------------
    def operand(self, s: Step, od: Operand) -> dict[int, np.ndarray]:
        """Per core, the operand's box (base coordinates) as that core obtains it."""
        name = od.ref.base
        if od.mode in ("leaf", "leaf+keep", "hbm", "spill"):
            if name not in self.device:
                raise PlanError(
                    f"op {s.name!r}: reads tensor {name!r} from device memory, but it was never written there"
                )
            got = {c: self.device[name][_index(box)] for c, box in od.boxes}
            for c, values in got.items() if od.mode == "leaf+keep" else ():  # a staged input stays on chip
                self.lx.write(c, od.kept_address, values, od.need_stick, self.eps(name), f"staged input {name!r}")
            return got
        if od.mode == "kept":  # a staged input, read where its loader left it
            what = f"staged input {name!r} (read by op {s.name!r})"
            return {
                c: self.lx.read(c, od.kept_address, box_extents(box), od.stored_stick, self.eps(name), what)
                for c, box in od.boxes
            }
        if od.mode == "kept+relayout":  # gathered from the loader cores' kept slices into the copy
            what = f"staged input {name!r} (read by op {s.name!r})"
            held = {
                o: (obox, self.lx.read(o, od.kept_address, box_extents(obox), od.stored_stick, self.eps(name), what))
                for o, obox in kept_slices(self.trace, od).items()
            }
            copy = f"relayout copy of staged input {name!r} for op {s.name!r}"
            for c, box in od.boxes:
                buf = np.full(box_extents(box), np.nan, dtype=np.float32)
                for obox, values in held.values():
                    part = intersect(obox, box)
                    if part is not None:
                        buf[_index(part, box)] = values[_index(part, obox)]
                self.lx.write(c, od.copy_address, buf, od.need_stick, self.eps(name), copy)
            return {
                c: self.lx.read(c, od.copy_address, box_extents(box), od.need_stick, self.eps(name), copy)
                for c, box in od.boxes
            }
        prod = self.tile_steps.get(od.producer) or self.trace.steps[od.producer]  # in a loop: its current tile
        what = f"tensor {name!r} (read by op {s.name!r})"
        if od.mode == "inplace":
            return {
                c: self.lx.read(c, prod.address, box_extents(box), od.stored_stick, self.eps(name), what)
                for c, box in od.boxes
            }
        gathered = {}
        for c, box in od.boxes:  # gather every destination's fragments before any copy is written
            buf = np.full(box_extents(box), np.nan, dtype=np.float32)
            for o, obox in prod.layout.owner_boxes.items():
                part = intersect(obox, box)
                if part is not None:
                    src = self.lx.read(o, prod.address, box_extents(obox), od.stored_stick, self.eps(name), what)
                    buf[_index(part, box)] = src[_index(part, obox)]
            gathered[c] = buf
        copy = f"{od.mode} copy of {name!r} for op {s.name!r}"
        for c, buf in gathered.items():
            self.lx.write(c, od.copy_address, buf, od.need_stick, self.eps(name), copy)
        return {
            c: self.lx.read(c, od.copy_address, box_extents(box), od.need_stick, self.eps(name), copy)
            for c, box in od.boxes
        }

    # ---- one op ------------------------------------------------------------
    def compute(self, s: Step, staged: dict | None = None) -> dict[int, np.ndarray]:
        """Per core, its block of the op's output (before a k-split's partial sums are added);
        operands in ``staged`` (tensor -> core -> (box, values)) are cut from the staged copy."""
        data = [
            self._staged(od, staged) if staged and od.ref.base in staged else self.operand(s, od) for od in s.operands
        ]
        out = self.trace.tensor(s.op.output)
        results = {}
        for c in range(s.cores):
            xs = [d[c].transpose(od.ref.perm) for d, od in zip(data, s.operands)]
            out_box = project(s.boxes[c], s.space.output_map)
            if s.op.kind == "reshape" and s.operands[0].boxes[c][1] == tuple(
                (0, n) for n in self.trace.tensor(s.operands[0].ref.base).shape
            ):
                value = xs[0].reshape(out.shape)[_index(out_box)]
            else:
                value = apply(s.op, xs, box_extents(out_box))
            if value.shape != box_extents(out_box):
                raise PlanError(
                    f"op {s.name!r}: core {c} computed a {value.shape} block for its {box_extents(out_box)} box"
                )
            results[c] = value
        return results

    def _staged(self, od: Operand, staged: dict) -> dict[int, np.ndarray]:
        out = {}
        for c, box in od.boxes:
            held, values = staged[od.ref.base][c]
            out[c] = values[_index(box, held)]
        return out

    def step(self, s: Step) -> None:
        self.finish(s, self.compute(s))

    def finish(self, s: Step, results: dict[int, np.ndarray]) -> None:
        """Owners add their peers' partial sums and store their block where the plan keeps the output."""
        out = self.trace.tensor(s.op.output)
        for o, box in s.layout.owner_boxes.items():
            value = sum((results[p] for p in s.peers(o) if p != o), start=results[o])
            if "hbm" in s.residency:
                self.device.setdefault(out.name, np.full(out.shape, np.nan, dtype=np.float32))[_index(box)] = value
            if "lx" in s.residency:
                self.lx.write(o, s.address, value, s.layout.stick, self.eps(out.name), f"tensor {out.name!r}")

    # ---- a tiled loop ---------------------------------------------------------
    def loop(self, loop: Loop) -> None:
        """Every op of the loop on tile 0, then tile 1, ...: staged tensors are loaded once, tiles of
        internal tensors overwrite each other at their scratchpad address, an op reducing over the
        tiled dim combines each tile's partial result and stores it after the last tile."""
        staged = {}
        for name in loop.staged:
            if name not in self.device:
                raise PlanError(f"{loop.label}: stages tensor {name!r}, which is not in device memory")
            staged[name] = {
                c: (box, self.device[name][_index(box)].copy()) for c, (box, _, _) in staged_boxes(loop, name).items()
            }
        acc: dict[int, dict[int, np.ndarray]] = {}
        for t in range(loop.tiles):
            self.tile_steps = {x.index: tile_step(loop, k, t) for k, x in enumerate(loop.steps)}
            for k in range(len(loop.steps)):
                s = self.tile_steps[loop.steps[k].index]
                results = self.compute(s, staged)
                if not loop.accumulates(k):
                    self.finish(s, results)
                    continue
                fn = s.op.attrs.get("fn", "sum") if s.op.kind == "reduce" else "sum"
                for c, v in results.items():
                    acc.setdefault(k, {})[c] = v if t == 0 else _combine(fn, acc[k][c], v)
        self.tile_steps = {}
        for k, parts in acc.items():
            fn = loop.steps[k].op.attrs.get("fn", "sum") if loop.steps[k].op.kind == "reduce" else "sum"
            if fn == "mean":
                parts = {c: v / np.float32(loop.tiles) for c, v in parts.items()}
            self.finish(loop.steps[k], parts)


def _combine(fn: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Fold one tile's partial result into the accumulator (a mean sums the tiles' means, divided at the end)."""
    if fn == "max":
        return np.maximum(a, b)
    if fn == "min":
        return np.minimum(a, b)
    return a + b


def execute(plan: Plan, inputs: dict[str, np.ndarray] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The graph outputs the plan computes, on per-core slices (float32; see the module doc).

    ``inputs`` maps every graph input and weight to an array; seeded random values when None.
    """
    trace = Trace(plan)
    inputs = random_inputs(trace.graph, seed) if inputs is None else checked_inputs(trace.graph, inputs)
    machine = _Machine(trace, inputs)
    loops = {lp.first: lp for lp in loops_of(trace)}
    inside = {s.index for lp in loops.values() for s in lp.steps}
    for s in trace.steps:
        if s.index in loops:
            machine.loop(loops[s.index])
        elif s.index not in inside:
            machine.step(s)
    missing = [x for x in trace.graph.outputs if x not in machine.device]
    if missing:
        raise PlanError(f"graph output(s) {missing} never written to device memory")
    return {x: machine.device[x] for x in trace.graph.outputs}


def reference(graph: Graph, inputs: dict[str, np.ndarray] | None = None, seed: int = 0) -> dict[str, np.ndarray]:
    """The graph outputs evaluated whole, without any plan (float32 numpy)."""
    inputs = random_inputs(graph, seed) if inputs is None else checked_inputs(graph, inputs)
    values = reference_values(graph, inputs)
    return {x: values[x] for x in graph.outputs}


def check_execution(
    plan: Plan, inputs: dict[str, np.ndarray] | None = None, seed: int = 0, rtol: float = RTOL, atol: float = ATOL
) -> dict[str, float]:
    """Execute the plan and compare every output with the reference; PlanError naming the output,
    the worst element and its error if any differs beyond tolerance. Returns max abs error per output."""
    graph = Graph.from_dict(plan.graph)
    inputs = random_inputs(graph, seed) if inputs is None else checked_inputs(graph, inputs)
    got, want = execute(plan, inputs), reference(graph, inputs)
    errors = {}
    for name, ref in want.items():
        out = got[name]
        bad = ~np.isclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
        diff = np.abs(np.nan_to_num(out - ref, nan=np.inf))
        if bad.any():
            at = tuple(int(i) for i in np.argwhere(bad)[0])
            raise PlanError(
                f"execution of plan for {graph.name!r}: output {name!r} differs from the reference at {bad.sum()} of "
                f"{bad.size} elements (first at {at}: {out[at]} vs {ref[at]}; max abs error {float(diff.max())})"
            )
        errors[name] = float(diff.max()) if diff.size else 0.0
    return errors
