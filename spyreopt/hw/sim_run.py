"""One run of the simulator: the machine's state (scratchpads, device memory, core busy time) and how one op
moves its data and computes (``Run.step``); ``simulator.simulate`` walks the schedule, ``sim_loop_run`` runs a
tiled loop's ops on their tiles with the same ``step``."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

from spyreopt.errors import PlanError
from spyreopt.hw.sim_flows import CoreJob, RingTransfer, run_pipeline, run_ring
from spyreopt.hw.sim_lx import Entry, ScratchpadState
from spyreopt.hw.sim_machine import Machine, SimParams, requests, sticks_of
from spyreopt.hw.sim_slices import project
from spyreopt.hw.sim_trace import DEVICE_MODES, LX_MODES, Operand, Step, Trace, kept_slices
from spyreopt.model.layout import box_padded_bytes, intersect
from spyreopt.model.plan import Plan

PHASES = ("relayout", "restickify", "compute", "dma", "psum", "barrier")


@dataclass
class _Movement:
    """An op's data movement before it computes."""

    main: dict[int, list[float]]  # per core: device bytes, requests, shared bytes, served bytes, transpose ns
    ring: list[RingTransfer] = field(default_factory=list)  # relayout fragments
    stage_out: dict[int, CoreJob] = field(default_factory=dict)  # restickify: owners write their slices out
    stage_in: dict[int, CoreJob] = field(default_factory=dict)  # restickify: read back, transform


def _add_read(job: CoreJob, nbytes: int, nreq: int) -> None:
    job.read_bytes += nbytes
    job.read_requests += nreq


@lru_cache(maxsize=1 << 15)
def _fragments(owners: tuple, box) -> tuple[tuple[int, tuple], ...]:
    """The (core, block) parts of ``box`` each owner holds: a pure function, the same in every layer of a model."""
    return tuple((o, part) for o, obox in owners if (part := intersect(obox, box)) is not None)


class Run:
    def __init__(self, plan: Plan, params: SimParams | None):
        self.trace = Trace(plan)
        hw = self.trace.hw
        self.m = Machine(hw, params or SimParams())
        self.lx = ScratchpadState(hw.cores, hw.planner_lx_bytes, hw.stick_bytes)
        self.in_device = {t.name for t in self.trace.graph.tensors.values() if t.producer is None}
        self.busy = [0.0] * hw.cores
        self.occupancy: list[list[tuple[float, int]]] = [[] for _ in range(hw.cores)]
        self.tile_steps: dict[int, Step] = {}  # inside a loop: each of its steps on the current tile

    # ---- operands ----------------------------------------------------------
    def producer(self, od: Operand) -> Step:
        """The step that wrote the operand: inside a loop, the producer's step on the current tile."""
        return self.tile_steps.get(od.producer) or self.trace.steps[od.producer]

    def _sizes(self, tensor: str, box, stick: int, whole=None) -> tuple[int, int]:
        t = self.trace.tensor(tensor)
        hw = self.m.hw
        whole = whole or tuple((0, d) for d in t.shape)
        return requests(box, whole, stick, t.elem_bytes, hw.stick_bytes, hw.dma_burst_sticks)

    def _check_resident(self, s: Step, od: Operand) -> Step:
        prod = self.producer(od)
        what = f"tensor {od.ref.base!r}"
        if prod.residency == "hbm":
            raise PlanError(
                f"op {s.name!r} at step {s.index}: edge mode {od.mode!r} reads {what} from scratchpad, but it was "
                f"written to device memory only (residency 'hbm')"
            )
        return prod

    def _sources(self, s: Step, od: Operand, prod: Step, c: int, box, limit: int | None) -> list[tuple[int, tuple]]:
        """Owner cores of the producer whose slices overlap ``box``, each checked to still hold its slice."""
        frags = _fragments(tuple(prod.layout.owner_boxes.items()), box)
        if limit is not None and len(frags) > limit:
            raise PlanError(
                f"op {s.name!r} at step {s.index}: relayout of tensor {od.ref.base!r} to core {c} gathers "
                f"{len(frags)} fragments (from cores {[o for o, _ in frags]}), above the fan-in limit {limit}"
            )
        for o, _ in frags:
            self.lx.read(o, prod.address, od.ref.base, prod.layout.owner_boxes[o], od.stored_stick, s.name, s.index,
                         f"the source slice of tensor {od.ref.base!r}")  # fmt: skip
        return frags

    def _copy(self, s: Step, od: Operand, c: int, box, stick: int, kind: str) -> None:
        t = self.trace.tensor(od.ref.base)
        size = box_padded_bytes(box, stick, t.elem_bytes, self.m.hw.stick_bytes)
        lo = od.copy_address
        label = f"{kind} copy of {od.ref.base!r} for {s.name!r}"
        self.lx.write(
            c,
            Entry(label, od.ref.base, box, stick, lo, None if lo is None else lo + size, s.index + 1),
            s.name,
            s.index,
        )

    def operands(self, s: Step) -> _Movement:
        """Check every operand's source and lay out its data movement."""
        mv = _Movement({c: [0, 0, 0, 0.0, 0.0] for c in range(s.cores)})
        for od in s.operands:
            if od.mode in ("staged", "prefetched"):  # a loop's operand already on chip: no traffic here
                continue
            if od.mode in ("leaf", "leaf+keep") + DEVICE_MODES:
                self._device_operand(s, od, mv)
                if od.mode == "leaf+keep":
                    self._keep(s, od)
            elif od.mode == "kept":
                self._kept(s, od)
            elif od.mode == "kept+relayout":
                self._kept_relayout(s, od, mv)
            elif od.mode in LX_MODES:
                self._scratchpad_operand(s, od, mv)
            else:
                raise PlanError(f"op {s.name!r}: operand {od.index} has unknown edge mode {od.mode!r}")
        return mv

    def _device_operand(self, s: Step, od: Operand, mv: _Movement) -> None:
        """Read from device memory; a tensor stored in another stick is transposed on the way in by the reading
        core's DMA transpose unit, or restickified through device memory first (``SimParams.transpose_on_read``)."""
        if od.ref.base not in self.in_device:
            prod = self.producer(od)
            raise PlanError(
                f"op {s.name!r} at step {s.index}: edge mode {od.mode!r} reads tensor {od.ref.base!r} from device "
                f"memory, but it was never written there (residency {prod.residency!r})"
            )
        if od.need_stick != od.stored_stick and self.m.params.transpose_on_read:  # through the DMA transpose unit
            t, hw = self.trace.tensor(od.ref.base), self.m.hw
            for c, box in od.boxes:
                mv.main[c][4] += self.m.transpose_ns(sticks_of(box, od.need_stick, t.elem_bytes, hw.stick_bytes))
        elif od.need_stick != od.stored_stick:  # restickified through device memory first
            for c, box in od.boxes:
                job = mv.stage_in.setdefault(c, CoreJob(c))
                _add_read(job, *self._sizes(od.ref.base, box, od.stored_stick))
                wb, wq = self._sizes(od.ref.base, box, od.need_stick)
                job.write_bytes, job.write_requests = job.write_bytes + wb, job.write_requests + wq
                job.compute_ns += self.m.transpose_ns(wb // self.m.hw.stick_bytes)
        read_stick = od.stored_stick if self.m.params.transpose_on_read else od.need_stick
        for c, read in self.multicast_reads(od.ref.base, od.boxes, read_stick):
            for x, v in enumerate(read):
                mv.main[c][x] += v

    def multicast_reads(self, tensor: str, boxes, stick: int) -> list[tuple[int, tuple[int, int, int, float]]]:
        """Per (core, box) read from device memory: (bytes, requests, bytes other cores read too, device-memory
        bytes serving it). Identical slices are served once and multicast (``sim_flows``)."""
        readers = Counter(box for _, box in boxes)
        out = []
        for c, box in boxes:
            nb, nq = self._sizes(tensor, box, stick)
            out.append((c, (nb, nq, nb if readers[box] > 1 else 0, nb / readers[box])))
        return out

    def _keep(self, s: Step, od: Operand) -> None:
        """A staged graph input: the slices this op read from device memory stay at their address."""
        t = self.trace.tensor(od.ref.base)
        for c, box in od.boxes:
            size = box_padded_bytes(box, od.need_stick, t.elem_bytes, self.m.hw.stick_bytes)
            lo = od.kept_address
            entry = Entry(f"staged input {od.ref.base!r}", od.ref.base, box, od.need_stick, lo,
                          None if lo is None else lo + size, od.keep_until)  # fmt: skip
            self.lx.write(c, entry, s.name, s.index)

    def _kept(self, s: Step, od: Operand) -> None:
        """A later reader of a staged graph input: each core finds its slice in place, no traffic."""
        if od.need_stick != od.stored_stick:
            raise PlanError(
                f"op {s.name!r} at step {s.index}: staged input {od.ref.base!r} is kept with stick dim "
                f"{od.stored_stick}, the op reads it with stick dim {od.need_stick}"
            )
        for c, box in od.boxes:
            self.lx.read(c, od.kept_address, od.ref.base, box, od.stored_stick, s.name, s.index,
                         f"staged input {od.ref.base!r}")  # fmt: skip

    def _kept_relayout(self, s: Step, od: Operand, mv: _Movement) -> None:
        """A later reader of a staged input whose slices differ: each core gathers its box over the ring from the
        loader cores' kept slices (one holder per distinct slice), into its copy."""
        held = kept_slices(self.trace, od)
        for c, box in od.boxes:
            frags = [(o, obox, part) for o, obox in held.items() if (part := intersect(obox, box)) is not None]
            if len(frags) > self.m.hw.relayout_fan_in:
                raise PlanError(
                    f"op {s.name!r} at step {s.index}: relayout of staged input {od.ref.base!r} to core {c} gathers "
                    f"{len(frags)} fragments, above the fan-in limit {self.m.hw.relayout_fan_in}"
                )
            for o, obox, part in frags:
                self.lx.read(o, od.kept_address, od.ref.base, obox, od.stored_stick, s.name, s.index,
                             f"staged input {od.ref.base!r}")  # fmt: skip
                mv.ring.append(RingTransfer(o, c, *self._sizes(od.ref.base, part, od.stored_stick, obox)))
            self._copy(s, od, c, box, od.need_stick, "relayout")

    def _scratchpad_operand(self, s: Step, od: Operand, mv: _Movement) -> None:
        """Read in place, or gather a relayout (ring) or restickify (staged through device memory) copy."""
        hw = self.m.hw
        prod = self._check_resident(s, od)
        if od.mode in ("inplace", "relayout") and od.need_stick != od.stored_stick:
            raise PlanError(
                f"op {s.name!r} at step {s.index}: tensor {od.ref.base!r} is stored with stick dim {od.stored_stick} but "
                f"the op reads it with stick dim {od.need_stick}; edge mode {od.mode!r} cannot change the stick (restickify)"
            )
        if od.mode == "inplace":
            for c, box in od.boxes:
                self.lx.read(c, prod.address, od.ref.base, box, od.stored_stick, s.name, s.index,
                             f"tensor {od.ref.base!r} in place")  # fmt: skip
            return
        limit = hw.relayout_fan_in if od.mode == "relayout" else None
        base = self.trace.tensor(od.ref.base)
        for c, box in od.boxes:
            for o, part in self._sources(s, od, prod, c, box, limit):
                owned = prod.layout.owner_boxes[o]
                if od.mode == "relayout":
                    mv.ring.append(RingTransfer(o, c, *self._sizes(od.ref.base, part, od.stored_stick, owned)))
                elif o not in mv.stage_out:  # each owner writes its slice out once
                    wb, wq = self._sizes(od.ref.base, owned, od.stored_stick)
                    mv.stage_out[o] = CoreJob(o, write_bytes=wb, write_requests=wq)
            if od.mode == "restickify":
                job = mv.stage_in.setdefault(c, CoreJob(c))
                _add_read(job, *self._sizes(od.ref.base, box, od.stored_stick))
                job.compute_ns += self.m.transpose_ns(sticks_of(box, od.need_stick, base.elem_bytes, hw.stick_bytes))
            self._copy(s, od, c, box, od.need_stick, od.mode)

    # ---- compute -----------------------------------------------------------
    def compute_ns(self, s: Step, c: int) -> float:
        box, hw = s.boxes[c], self.m.hw
        out = self.trace.tensor(s.op.output)
        if s.op.kind == "matmul":
            return self.m.matmul_ns(box, len(s.space.dims) - 3)
        if s.op.kind == "reduce":
            od = s.operands[0]
            base = self.trace.tensor(od.ref.base)
            along = any(od.ref.perm[d] == od.need_stick for d in s.op.attrs["dims"])
            in_box = dict(od.boxes)[c]
            return self.m.reduce_ns(sticks_of(in_box, od.need_stick, base.elem_bytes, hw.stick_bytes), along)
        out_box = project(box, s.space.output_map)
        sticks = sticks_of(out_box, s.layout.stick, out.elem_bytes, hw.stick_bytes)
        return self.m.vector_ns(sticks, s.op.attrs.get("fn", "copy"), len(s.op.inputs))

    # ---- one op ------------------------------------------------------------
    def _write_output(self, s: Step) -> None:
        out = self.trace.tensor(s.op.output)
        for c, box in s.layout.owner_boxes.items():
            size = box_padded_bytes(box, s.layout.stick, out.elem_bytes, self.m.hw.stick_bytes)
            hi = None if s.address is None else s.address + size
            entry = Entry(f"tensor {out.name!r}", out.name, box, s.layout.stick, s.address, hi, s.free_step)
            if s.inplace_over is not None:
                self._overwrite(s, c, entry)
            self.lx.write(c, entry, s.name, s.index)

    def _overwrite(self, s: Step, c: int, entry: Entry) -> None:
        """An in-place write: a pointwise op's output slice on core ``c`` replaces, at the same address, stick
        and size, exactly the slice of the operand it read there in place, which dies at this op. Anything else
        at that address stays live, so writing over it is rejected as for any write."""
        j = s.inplace_over
        where = f"op {s.name!r} at step {s.index}, core {c}: writes in place over operand {j}"
        if s.op.kind != "pointwise" or not 0 <= j < len(s.operands):
            raise PlanError(f"{where}, but only a pointwise op may write over one of its operands")
        od = s.operands[j]
        donor = self.trace.tensor(od.ref.base)
        out = self.trace.tensor(s.op.output)
        same = donor.shape == out.shape and donor.dtype == out.dtype and od.ref.perm == tuple(range(len(out.shape)))
        if not same or od.mode not in ("inplace", "kept") or dict(od.boxes).get(c) != entry.box:
            raise PlanError(
                f"{where}: {od.ref.base!r} (edge mode {od.mode!r}) is not read in place element for element like "
                f"the output slice written over it"
            )
        old = self.lx.take(c, entry.lo, od.ref.base, entry.box, s.index)
        if old is not None and (old.stick != entry.stick or old.hi != entry.hi):
            self.lx.entries[c].append(old)  # not the same slice layout: it stays live, and the write clashes

    def _psum(self, s: Step, k: int) -> float:
        """Peers send their partial sums over the ring to the owner, which adds them."""
        out, m = self.trace.tensor(s.op.output), self.m
        transfers, adds = [], 0.0
        for o, box in s.layout.owner_boxes.items():
            nb, nq = self._sizes(out.name, box, s.layout.stick, box)  # partials sit contiguous
            transfers += [RingTransfer(p, o, nb, nq) for p in s.peers(o) if p != o]
            add = m.add_ns((k - 1) * nb // m.hw.stick_bytes)
            self.busy[o] += add
            adds = max(adds, add)
        return run_ring(transfers, m) + adds

    def _write_jobs(self, s: Step) -> dict[int, CoreJob]:
        out = self.trace.tensor(s.op.output)
        jobs = {}
        for c, box in s.layout.owner_boxes.items():
            wb, wq = self._sizes(out.name, box, s.layout.stick)
            jobs[c] = CoreJob(c, write_bytes=wb, write_requests=wq)
        return jobs

    def step(
        self, s: Step, t0: float, final: bool = True, store: bool = True
    ) -> tuple[float, dict[str, float], float, float]:
        """Run op ``s`` from time ``t0`` (ns): its duration, phase times, device bytes read and written.
        In a loop, an accumulating op's tiles before the last are not ``final`` (no partial-sum
        reduction, no write-back) and only its first tile ``store``s the accumulator."""
        m = self.m
        mv = self.operands(s)
        if "lx" in s.residency and store:
            self._write_output(s)
        for c in range(m.hw.cores):
            self.occupancy[c].append((t0 * 1e-3, self.lx.used(c)))
        ns = dict.fromkeys(PHASES, 0.0)
        ns["relayout"] = run_ring(mv.ring, m)
        staging = [run_pipeline(list(mv.stage_out.values()), m), run_pipeline(list(mv.stage_in.values()), m)]
        ns["restickify"] = sum(p.time_ns for p in staging)
        k = s.layout.k_split
        writes = "hbm" in s.residency and final
        out_jobs = self._write_jobs(s) if writes else {}
        jobs = []
        for c in range(s.cores):
            nb, nq, shared, served, transpose = mv.main[c]
            job = CoreJob(c, nb, nq, self.compute_ns(s, c) + transpose, read_shared_bytes=shared,
                          read_served_bytes=served)  # fmt: skip
            if k == 1 and c in out_jobs:  # a k-split writes after its partial sums are reduced
                job.write_bytes, job.write_requests = out_jobs[c].write_bytes, out_jobs[c].write_requests
            jobs.append(job)
        phase = run_pipeline(jobs, m)
        comp = max(phase.compute_ns.values(), default=0.0)
        for c, v in phase.compute_ns.items():
            self.busy[c] += v
        ns["compute"], ns["dma"] = comp, phase.time_ns - comp
        reads = phase.read_bytes + sum(p.read_bytes for p in staging)
        written = phase.write_bytes + sum(p.write_bytes for p in staging)
        if k > 1 and final:
            ns["psum"] = self._psum(s, k)
            wphase = run_pipeline(list(out_jobs.values()), m)
            ns["dma"] += wphase.time_ns
            written += wphase.write_bytes
        if writes:
            self.in_device.add(s.op.output)
        ns["barrier"] = m.hw.barrier_ns + m.params.op_overhead_ns  # the sync, and starting the op's program
        return sum(ns.values()), ns, reads, written
