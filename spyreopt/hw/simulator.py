"""``simulate(plan)``: the independent verdict on a plan, by discrete-event simulation.

Ops run in schedule order separated by barriers. Within an op, in order:

1. relayouts: each destination core gathers its fragments from the owner cores
   over the ring (hop distance, link contention, fan-in limit);
2. restickifies, staged through device memory: owners write their slices,
   destinations read them back through their DMA transpose unit (a tensor that
   is already in device memory in the wrong stick is read as it is stored and
   transformed on the way in, in the op's own phase);
3. the op itself: every core streams its device-memory operands in
   double-buffered tiles, computes on its PE arrays or vector units, and streams
   its output slice out (cores share device-memory bandwidth);
4. a k-split reduces its partial sums over the ring onto the owner cores;
5. the barrier.

The ops of a tiled loop run together, iteration by iteration, each on its tile
(``sim_loop_run``: staging, re-reads, accumulators, double buffering).

Meanwhile it tracks every core's scratchpad address by address and rejects a
plan that reads a slice that is not there or writes over a live one (see
``sim_lx``). Timing never consults the cost model. Units: ns inside, µs out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from spyreopt.errors import PlanError
from spyreopt.hw.sim_loop import loops_of
from spyreopt.hw.sim_loop_run import run_loop
from spyreopt.hw.sim_machine import SimParams
from spyreopt.hw.sim_repeat import loop_key, record, replay
from spyreopt.hw.sim_run import PHASES, Run
from spyreopt.model.plan import Plan


@dataclass
class SimResult:
    """The simulator's verdict. ``breakdown[op]`` splits each op's time (µs) into ``PHASES``:
    ``compute`` is the busiest core's compute inside the op's main phase and ``dma`` the rest of
    that phase (memory time not hidden by double buffering, plus a k-split's write-back)."""

    time_us: float
    op_us: dict[str, float]
    breakdown: dict[str, dict[str, float]]
    core_busy: list[float]  # fraction of the total time each core computes
    lx_occupancy: list[list[tuple[float, int]]]  # per core: (time µs, bytes live from then on)
    device_read_bytes: float = 0.0
    device_write_bytes: float = 0.0
    op_start_us: dict[str, float] = field(default_factory=dict)
    loops: list[dict] = field(default_factory=list)  # per tiled loop: tiles, double buffering, times (see sim_loop_run)
    repeated_loops: int = 0  # loops that repeat one simulated before and took its times (``hw.sim_repeat``)

    @property
    def peak_lx_bytes(self) -> list[int]:
        return [max((b for _, b in occ), default=0) for occ in self.lx_occupancy]

    def table(self, predicted: dict[str, float] | None = None) -> str:
        """Per-op simulated µs (and the plan's prediction when given), then the total."""
        head = ["op", "sim_us"] + (["pred_us"] if predicted else []) + list(PHASES)
        rows = [head]
        for name, us in self.op_us.items():
            row = [name, f"{us:.3f}"] + ([f"{predicted.get(name, float('nan')):.3f}"] if predicted else [])
            rows.append(row + [f"{self.breakdown[name][p]:.3f}" for p in PHASES])
        widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
        lines.insert(1, "  ".join("-" * w for w in widths))
        busy = sum(self.core_busy) / max(len(self.core_busy), 1)
        for i, lp in enumerate(self.loops):
            its = lp["iteration_us"]
            lines.append(
                f"loop {i}: {lp['ops'][0]}..{lp['ops'][-1]} in {lp['tiles']} tiles, {lp['time_us']:.3f} us "
                f"({'double buffered' if lp['double_buffered'] else 'single buffered'}; iterations "
                f"{min(its):.3f}-{max(its):.3f} us; staging {lp['staged_us']:.3f} us)"
            )
        lines.append(f"\ntotal {self.time_us:.3f} us simulated   mean core busy {busy:.1%}")
        return "\n".join(lines)


def simulate(
    plan: Plan,
    params: SimParams | None = None,
    *,
    repeats: bool = True,
    progress: Callable[[int, int], None] | None = None,
) -> SimResult:
    """Simulate a plan on the machine it was made for; PlanError (op, buffer, core, address, step) if it is illegal.

    ``params`` default to ``SimParams()``, the machine of the public figures (the planner's shipped model is
    fitted to it); ``sim_machine.device_params()`` is the machine calibrated on device timings.

    With ``repeats`` a tiled loop identical to one already simulated takes its times (``hw.sim_repeat``: exact
    for the timing, its scratchpad checks skipped; ``SimResult.repeated_loops`` counts them). ``progress(done,
    total)`` is called as steps complete."""
    run = Run(plan, params)
    seen: dict = {}
    repeated = 0
    t = 0.0
    op_us, breakdown, starts = {}, {}, {}
    reads = writes = 0.0
    loops = {lp.first: lp for lp in loops_of(run.trace)}
    inside = {s.index for lp in loops.values() for s in lp.steps}
    loop_info = []
    for s in run.trace.steps:
        if s.index in inside and s.index not in loops:
            continue
        run.lx.release(s.index)
        if progress is not None:
            progress(s.index, len(run.trace.steps))
        if s.index in loops:
            lp = loops[s.index]
            key = loop_key(run, lp) if repeats else None
            if key in seen:
                lt, repeated = replay(run, lp, t, seen[key]), repeated + 1
            else:
                rec = record(run, lp, t, run_loop)
                lt = rec.time
                if key is not None:
                    seen[key] = rec
            for name in lt.ns:
                starts[name] = (t + lt.start[name]) * 1e-3
                op_us[name] = sum(lt.ns[name].values()) * 1e-3
                breakdown[name] = {k: v * 1e-3 for k, v in lt.ns[name].items()}
            loop_info.append(lt.info)
            reads, writes, t = reads + lt.read_bytes, writes + lt.write_bytes, t + lt.time_ns
            continue
        dt, ns, r, w = run.step(s, t)
        starts[s.name] = t * 1e-3
        op_us[s.name] = dt * 1e-3
        breakdown[s.name] = {k: v * 1e-3 for k, v in ns.items()}
        reads, writes, t = reads + r, writes + w, t + dt
    missing = [x for x in run.trace.graph.outputs if x not in run.in_device]
    if missing:
        raise PlanError(
            f"graph output(s) {missing} never written to device memory (an output's residency must include 'hbm')"
        )
    run.lx.release(len(run.trace.steps) + 1)
    for c in range(run.m.hw.cores):
        run.occupancy[c].append((t * 1e-3, run.lx.used(c)))
    busy = [b / t if t > 0 else 0.0 for b in run.busy]
    if progress is not None:
        progress(len(run.trace.steps), len(run.trace.steps))
    return SimResult(t * 1e-3, op_us, breakdown, busy, run.occupancy, reads, writes, starts, loop_info, repeated)
