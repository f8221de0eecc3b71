"""Tiled loops that repeat one already simulated: the same ops, slices, modes, addresses and scratchpad load.

A whole model runs the same loops in every layer. A loop's timing depends only on what ``loop_key`` holds
(its steps with names and absolute step numbers left out, each operand's tensor shape and element size, the
scratchpad used on each core when it starts), so a repeat takes the first instance's times, core busy time and
occupancy trace, shifted to its start. What a repeat does not do is check its scratchpad reads and writes
again: ``simulate(..., repeats=False)`` simulates every instance.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from spyreopt.hw.sim_loop import Loop
from spyreopt.hw.sim_loop_run import LoopTime

if TYPE_CHECKING:
    from spyreopt.hw.sim_run import Run


def loop_key(run: Run, lp: Loop) -> tuple:
    first = lp.first
    steps = []
    for k, s in enumerate(lp.steps):
        out = run.trace.tensor(s.op.output)
        operands = []
        for od in s.operands:
            t = run.trace.tensor(od.ref.base)
            rel = None if od.producer is None else od.producer - first
            operands.append(
                (od.index, od.ref.perm, od.mode, rel, od.stored_stick, od.need_stick, od.copy_address, od.boxes,
                 od.keep_until - first if od.keep_until else None, od.kept_address, t.shape, t.elem_bytes, od.ref.base in lp.staged,
                 od.ref.base in run.in_device)
            )  # fmt: skip
        layout = s.layout
        steps.append(
            (s.op.kind, tuple(sorted((a, repr(v)) for a, v in s.op.attrs.items())), s.space, layout.factors,
             layout.stick, layout.required, layout.boxes, tuple(sorted(layout.owner_boxes.items())), layout.reads,
             layout.k_split, s.boxes, s.owners, s.residency, s.address, s.free_step - first, s.inplace_over,
             out.shape, out.elem_bytes, lp.dims[k], tuple(operands))
        )  # fmt: skip
    used = tuple(run.lx.used(c) for c in range(run.m.hw.cores))
    return (lp.tiles, lp.accumulate, lp.footprint_bytes, used, tuple(steps))


@dataclass
class Recorded:
    """What one simulated loop did, by step position: replayed for each repeat."""

    time: LoopTime
    names: list[str]
    busy: list[float]  # per core, compute ns added
    occupancy: list[list[tuple[float, int]]]  # per core, (µs after the loop's start, bytes)


def record(run: Run, lp: Loop, t0: float, simulate_loop) -> Recorded:
    busy = list(run.busy)
    marks = [len(o) for o in run.occupancy]
    lt = simulate_loop(run, lp, t0)
    occupancy = [[(x - t0 * 1e-3, b) for x, b in o[m:]] for o, m in zip(run.occupancy, marks)]
    return Recorded(lt, [s.name for s in lp.steps], [a - b for a, b in zip(run.busy, busy)], occupancy)


def replay(run: Run, lp: Loop, t0: float, rec: Recorded) -> LoopTime:
    """The recorded loop's times under this loop's op names, its busy time and occupancy added at ``t0``."""
    rename = dict(zip(rec.names, (s.name for s in lp.steps)))
    for c, d in enumerate(rec.busy):
        run.busy[c] += d
    for c, series in enumerate(rec.occupancy):
        run.occupancy[c].extend((t0 * 1e-3 + x, b) for x, b in series)
    for s in lp.steps:
        if "hbm" in s.residency:
            run.in_device.add(s.op.output)
    lt = rec.time
    info = dict(lt.info, ops=[rename[n] for n in lt.info["ops"]], repeat_of=rec.names[0])
    return LoopTime(
        lt.time_ns, {rename[n]: dict(v) for n, v in lt.ns.items()}, {rename[n]: v for n, v in lt.start.items()},
        lt.read_bytes, lt.write_bytes, info,
    )  # fmt: skip
