"""A tiled loop, simulated iteration by iteration.

Before the first tile every staged tensor is read from device memory once, each
core its block (held on chip for the whole loop; one stored in another stick
goes through the core's DMA transpose unit on the way in). Every device-memory
read of a loop, staging and prefetch included, follows the simulator's one rule:
a block several cores read at once is served once and multicast (``sim_flows``),
so ``device_read_bytes`` counts distinct bytes per read; an unstaged operand
without the tiled dim is read again, so counted again, every tile. Iteration ``t`` then runs every
op of the loop on tile ``t`` exactly as the simulator runs an op (``Run.step``),
on the tile's blocks (``sim_loop.tile_step``): streamed operands (those with the
tiled dim) are read from device memory per tile, operands without it are read
again every iteration unless staged, tiles of internal tensors are written over
the previous tile at their plan address and read in place or relaid out, and
outputs leaving the loop are written per tile. An op reducing over the tiled dim
keeps its partial result on chip (at its plan address, else held without one),
and reduces a k-split and writes back only after the last tile. Every iteration
pays a loop barrier on top of the ops' own barriers, and each tile's transfers
their latencies and shorter runs: more tiles are never free.

Double buffering across iterations, the rule: the next tile's streamed inputs
are prefetched during the current iteration when the scratchpad left free at the
peak of the first iteration (capacity minus every live buffer, the loop's tiles,
staged tensors and accumulators included) holds two of them (the busiest core's
streamed bytes of one iteration, twice: the tile in use and the one arriving).
Then iteration ``t`` finds its streamed inputs on chip and the prefetch of tile
``t`` shows only where it outlasts iteration ``t-1``, or where the two together
move more bytes than device memory carries in that time (at the one-way
effective rate: the prefetch and the iteration share device memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from spyreopt.errors import PlanError
from spyreopt.hw.sim_flows import CoreJob, run_pipeline
from spyreopt.hw.sim_loop import Loop, staged_boxes, tile_step
from spyreopt.hw.sim_slices import project
from spyreopt.hw.sim_trace import DEVICE_MODES
from spyreopt.model.layout import box_padded_bytes

if TYPE_CHECKING:
    from spyreopt.hw.sim_run import Run


@dataclass
class LoopTime:
    time_ns: float
    ns: dict[str, dict[str, float]]  # per op: phase -> ns, summed over the tiles
    start: dict[str, float]  # per op: ns from the loop's start to its first tile
    read_bytes: float = 0.0
    write_bytes: float = 0.0
    info: dict = field(default_factory=dict)


def _device(od) -> bool:
    return od.mode in ("leaf",) + DEVICE_MODES


def _add_reads(jobs: dict[int, CoreJob], reads) -> None:
    """Add ``Run.multicast_reads`` to the cores' jobs: a slice several cores read is served once."""
    for c, (nb, nq, shared, served) in reads:
        job = jobs.setdefault(c, CoreJob(c))
        job.read_served_bytes = job.served + served
        job.read_bytes += nb
        job.read_requests += nq
        job.read_shared_bytes += shared


def _hold(run: Run, loop: Loop) -> tuple[list[tuple[int, int]], dict[int, CoreJob]]:
    """Reserve the staged tensors and the address-less accumulators; the staged tensors' load jobs."""
    hw, held, jobs = run.m.hw, [], {}
    for name in sorted(loop.staged):
        if name not in run.in_device:
            raise PlanError(f"{loop.label}: stages tensor {name!r}, which was never written to device memory")
        t = run.trace.tensor(name)
        blocks = sorted(staged_boxes(loop, name).items())
        for how in sorted({x for _, (_, _, x) in blocks}):  # the stick it is stored in (one)
            _add_reads(jobs, run.multicast_reads(name, [(c, b) for c, (b, _, x) in blocks if x == how], how))
        for c, (box, stick, stored) in blocks:
            size = box_padded_bytes(box, stick, t.elem_bytes, hw.stick_bytes)
            if stick != stored:  # loaded through the DMA transpose unit into the stick the loop reads
                jobs[c].compute_ns += run.m.transpose_ns(size // hw.stick_bytes)
            run.lx.reserve(c, size, f"staged tensor {name!r} of {loop.label}")
            held.append((c, size))
    for k, s in enumerate(loop.steps):
        if loop.accumulates(k) and "lx" not in s.residency:
            out = run.trace.tensor(s.op.output)
            for c, box in enumerate(s.boxes):
                size = box_padded_bytes(
                    project(box, s.space.output_map), s.layout.stick, out.elem_bytes, hw.stick_bytes
                )
                run.lx.reserve(c, size, f"accumulator of op {s.name!r} ({loop.label})")
                held.append((c, size))
    return held, jobs


def _fold_ns(run: Run, s) -> float:
    """Adding a tile's partial result into the accumulator: one vector add over each core's output block."""
    out, hw, worst = run.trace.tensor(s.op.output), run.m.hw, 0.0
    for c, box in enumerate(s.boxes):
        sticks = box_padded_bytes(project(box, s.space.output_map), s.layout.stick, out.elem_bytes, hw.stick_bytes)
        ns = run.m.add_ns(sticks // hw.stick_bytes)
        run.busy[c] += ns
        worst = max(worst, ns)
    return worst


def run_loop(run: Run, loop: Loop, t0: float) -> LoopTime:
    """Simulate ``loop`` from time ``t0`` (ns); see the module doc."""
    hw, lx = run.m.hw, run.lx
    held, stage_jobs = _hold(run, loop)
    stage = run_pipeline(list(stage_jobs.values()), run.m)
    names = [s.name for s in loop.steps]
    res = LoopTime(stage.time_ns, {n: {} for n in names}, {}, stage.read_bytes, 0.0)
    internal = {s.op.output for k, s in enumerate(loop.steps) if not loop.accumulates(k)}
    buffered, peak, streamed = False, 0, [0.0] * hw.cores
    spans: list[float] = []
    moved_before = 0.0  # device bytes the previous iteration moved itself
    exposed = fetched = 0.0
    for t in range(loop.tiles):
        if t:
            lx.drop(internal)
        span, prefetch, moved = 0.0, {}, 0.0
        run.tile_steps = {x.index: tile_step(loop, k, t) for k, x in enumerate(loop.steps)}
        for k in range(len(loop.steps)):
            s = run.tile_steps[loop.steps[k].index]
            ops = []
            for od in s.operands:
                if _device(od) and od.ref.base in loop.staged:
                    od = replace(od, mode="staged")
                elif _device(od) and loop.varies(k, od):
                    reads = run.multicast_reads(od.ref.base, od.boxes, od.need_stick)
                    for c, (nb, _, _, _) in reads if t == 0 else ():
                        streamed[c] += nb
                    if buffered:
                        _add_reads(prefetch, reads)
                        od = replace(od, mode="prefetched")
                ops.append(od)
            lx.release(s.index)  # tiles die within the iteration at their last reader, as in the schedule
            acc = loop.accumulates(k)
            last = t == loop.tiles - 1
            dt, ns, r, w = run.step(
                replace(s, operands=tuple(ops)), t0 + res.time_ns, final=not acc or last, store=not acc or t == 0
            )
            if acc and t:  # fold this tile's partial result into the accumulator
                fold = _fold_ns(run, s)
                dt, ns["compute"] = dt + fold, ns["compute"] + fold
            peak = max(peak, max(lx.used(c) for c in range(hw.cores)))
            res.start.setdefault(s.name, res.time_ns)
            for ph, v in ns.items():
                res.ns[s.name][ph] = res.ns[s.name].get(ph, 0.0) + v
            res.read_bytes += r
            res.write_bytes += w
            moved += r + w
            res.time_ns += dt
            span += dt
        res.ns[names[0]]["barrier"] += hw.barrier_ns  # the loop's own per-iteration sync
        res.time_ns += hw.barrier_ns
        span += hw.barrier_ns
        if prefetch:
            pf = run_pipeline(list(prefetch.values()), run.m)
            res.read_bytes += pf.read_bytes
            window = max(pf.time_ns, (moved_before + pf.read_bytes) / hw.hbm_gbps_effective)
            late = max(window - spans[-1], 0.0)
            fetched += pf.time_ns
            exposed += late
            res.time_ns += late
            res.ns[names[0]]["dma"] += late
        spans.append(span)
        moved_before = moved
        if t == 0:
            buffered = hw.planner_lx_bytes - peak >= 2 * max(streamed)
    run.tile_steps = {}
    res.ns[names[0]]["dma"] += stage.time_ns
    for c, size in held:
        lx.unreserve(c, size)
    res.info = {
        "ops": names, "tiles": loop.tiles, "double_buffered": buffered, "staged_us": stage.time_ns * 1e-3,
        "iteration_us": [x * 1e-3 for x in spans], "prefetch_us": fetched * 1e-3,
        "exposed_prefetch_us": exposed * 1e-3, "peak_lx_bytes": peak, "streamed_bytes_per_tile": max(streamed),
        "time_us": res.time_ns * 1e-3,
    }  # fmt: skip
    return res
