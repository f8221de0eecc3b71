"""The simulated machine: HardwareSpec plus the few micro-architectural knobs the
public figures do not give, and the per-core work models (PE array, vector unit,
DMA request counting).

Everything derivable from HardwareSpec is derived here (device-memory request
overhead and read/write turnaround are solved from the one-way, balanced and
peak bandwidths), so changing a spec field changes the simulated machine. The
simulator never reads the cost model: its times come from these mechanisms.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from importlib import resources
from math import ceil, prod

from spyreopt.errors import FormatError
from spyreopt.model.graph_parts import TRANSCENDENTAL
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.layout import Box, box_extents, box_padded_bytes, contiguous_runs


@dataclass(frozen=True)
class SimParams:
    """Knobs below the level of the published figures, with defaults that reproduce them (``device_params``:
    the same knobs calibrated on the device sweep).

    * ``dma_latency_ns``: round trip of one device-memory request; with
      ``dma_max_inflight`` requests in flight it bounds one core's DMA rate
      (Little's law), which is what makes few-core ops memory-starved.
    * ``core_dma_gbps``: what one core's DMA engine moves, reads and writes together (its active streams
      share it equally): the device sweep's lone core copies at about 43 GB/s, two at 77, four at 123.
    * ``dma_issue_cycles``: a core's DMA engine cost per request (ring transfers).
    * ``ring_hop_cycles``: latency per ring hop.
    * ``multicast_gbps``: the rate at which one core receives a device-memory slice
      that other cores read too (served once, multicast): the published decode
      projections' replicated weight reads (about 37 GB/s per core; one device-memory
      read per core would be 4 to 9 times slower than measured).
    * ``core_ingress_gbps``: the rate at which one core takes in data from other
      cores over the ring (relayout fragments, partial sums): the published 8-core
      relayout of 2.1 MB, 229 KB into each core in 8.72 µs.
    * ``pe_weight_load_cycles`` / ``pe_pass_bubble_cycles``: a PE-array pass streams
      the core's rows through a stationary weight tile; a pass costs
      ``max(rows, load) + bubble`` cycles, so 2 rows run at 50%, 4 at 67%, 8 at 80%.
    * ``op_overhead_ns``: the fixed cost of starting an op's program on the cores (and each tile of it in a
      loop), beside the barrier: what a kernel of a few KB per core costs on the device above its traffic.
    * ``vector_cycles``: vector cycles per stick of a pointwise op (per corelet).
    * ``transcendental_cycles``: vector cycles per stick of exp, gelu, div, ...: 1, as for
      any pointwise op, by the published softmax stages (c) and (d), whose five ops
      take 23.9 and 23.7 µs on one core with 3MN and 2MN elements of traffic (at 1.5
      the simulator put them at +16% and +13%).
    * ``stick_reduce_extra_cycles``: extra cycles per stick for a reduction along
      the stick (a cross-lane shuffle tree instead of lane-wise accumulation).
    * ``transpose_cycles_per_stick``: a core's DMA transpose unit (restickify).
    * ``transpose_on_read``: a device-memory tensor stored in another stick is read as stored and transposed on
      the way in by the reading core's DMA transpose unit, as the device sweep's transposes run (on in the
      device calibration); off, the published figures' path: it is restickified through device memory first,
      the path the planner's default coefficients were fitted to.
    * ``max_tiles_per_core``: double-buffered tiles per core and op (bounds the
      event count; see ``Machine.tiles``).
    """

    dma_latency_ns: float = 160.0
    core_dma_gbps: float = 1e9  # no limit beyond the requests in flight (the public figures give none)
    dma_issue_cycles: float = 4.0
    ring_hop_cycles: float = 2.0
    multicast_gbps: float = 37.4
    core_ingress_gbps: float = 26.3
    pe_weight_load_cycles: float = 2.0
    pe_pass_bubble_cycles: float = 2.0
    op_overhead_ns: float = 0.0
    vector_cycles: float = 1.0
    transcendental_cycles: float = 1.0
    stick_reduce_extra_cycles: float = 1.0
    transpose_cycles_per_stick: float = 2.0
    transpose_on_read: bool = False
    max_tiles_per_core: int = 16


DEVICE_FILE = "sim_device.json"  # SimParams calibrated on the device sweep, with the command that fitted them


def device_machine() -> SimParams:
    """The mechanisms the device sweep shows, before its rates are fitted: the start of the calibration."""
    return SimParams(transpose_on_read=True)


@lru_cache(maxsize=1)
def device_params() -> SimParams:
    """``SimParams`` calibrated on device timings (``spyreopt fit --sweep FILE --target simulator``, the command
    in the file); the fields it does not fit keep the published figures' defaults."""
    doc = json.loads(resources.files("spyreopt.hw").joinpath(DEVICE_FILE).read_text())
    known = {f.name for f in fields(SimParams)}
    unknown = sorted(set(doc["params"]) - known)
    if unknown:
        raise FormatError(f"{DEVICE_FILE}: params: unknown field(s) {unknown}")
    return replace(device_machine(), **doc["params"])


@dataclass(frozen=True)
class Machine:
    hw: HardwareSpec
    params: SimParams = field(default_factory=SimParams)

    # ---- device memory -----------------------------------------------------
    @property
    def burst_bytes(self) -> int:
        return self.hw.dma_burst_sticks * self.hw.stick_bytes

    @property
    def hbm_request_overhead_ns(self) -> float:
        """Controller time per request beyond its bytes at peak: full bursts then run at the one-way figure."""
        return self.burst_bytes / self.hw.hbm_gbps_effective - self.burst_bytes / self.hw.hbm_gbps_peak

    @property
    def turnaround_ns_per_byte(self) -> float:
        """Read/write turnaround per byte of the smaller direction: balanced traffic runs at the balanced figure."""
        return 2.0 / self.hw.hbm_gbps_balanced - 2.0 / self.hw.hbm_gbps_effective

    def dma_cap(self, nbytes: float, requests: int) -> float:
        """Bytes/ns one core's DMA can sustain on a stream of ``requests`` requests, ``dma_max_inflight`` in flight
        (reads and writes have their own queues, so a core's read and write streams do not share them)."""
        per_request = nbytes / max(requests, 1)
        return self.hw.dma_max_inflight * per_request / self.params.dma_latency_ns

    @property
    def staging_bytes(self) -> int:
        """Scratchpad outside the planner's region: the streaming (double-buffer) space."""
        return self.hw.lx_bytes - self.hw.program_reserve_bytes - self.hw.planner_lx_bytes

    def tiles(self, stream_bytes: float) -> int:
        """Tiles of a core's stream: at least one DMA window (requests in flight x burst) each, at most
        a quarter of the staging space (two input and two output buffers), at most ``max_tiles_per_core``."""
        window = self.hw.dma_max_inflight * self.burst_bytes
        budget = max(self.staging_bytes // 4, self.hw.stick_bytes)
        tile = min(max(stream_bytes / self.params.max_tiles_per_core, window), budget)
        return max(1, min(self.params.max_tiles_per_core, ceil(stream_bytes / tile)))

    # ---- ring --------------------------------------------------------------
    @property
    def hop_ns(self) -> float:
        return self.params.ring_hop_cycles / self.hw.clock_ghz

    @property
    def issue_ns(self) -> float:
        return self.params.dma_issue_cycles / self.hw.clock_ghz

    @property
    def local_copy_bytes_per_ns(self) -> float:
        """An LX-to-LX copy within one core moves one stick per cycle."""
        return self.hw.stick_bytes * self.hw.clock_ghz

    # ---- compute -----------------------------------------------------------
    def matmul_ns(self, box: Box, nbatch: int) -> float:
        """One core's matmul over its iteration box ``(batch..., m, n, k)`` on its PE arrays.

        Each corelet's ``pe_rows x pe_cols`` array does ``P`` MACs per cycle at peak
        (``P / pe_cols`` k-values for each of ``pe_cols`` output columns). Corelets
        split n; a pass holds one weight tile stationary and streams the core's rows
        through it, so few rows underfill the array (row underfill) and an n slice
        narrower than ``pe_cols`` wastes columns. The sustained/peak ratio is the
        operand-feed efficiency.
        """
        ext = box_extents(box)
        batch, rows, n, k = prod(ext[:nbatch]), ext[nbatch], ext[nbatch + 1], ext[nbatch + 2]
        hw, p = self.hw, self.params
        per_cycle = hw.peak_macs_per_ns_per_core / hw.corelets_per_core / hw.clock_ghz
        depth = per_cycle / hw.pe_cols  # k-values per column per pass
        passes = batch * ceil(ceil(n / hw.corelets_per_core) / hw.pe_cols) * ceil(k / depth)
        cycles = passes * (max(rows, p.pe_weight_load_cycles) + p.pe_pass_bubble_cycles)
        feed = hw.sustained_macs_per_ns_per_core / hw.peak_macs_per_ns_per_core
        return cycles / feed / hw.clock_ghz

    def vector_ns(self, sticks: int, fn: str, operands: int) -> float:
        """Pointwise work: one stick per cycle per corelet, transcendentals slower, one extra read per operand."""
        p = self.params
        per_stick = (p.transcendental_cycles if fn in TRANSCENDENTAL else p.vector_cycles) + 0.25 * max(operands - 1, 0)
        return sticks * per_stick / self.hw.corelets_per_core / self.hw.clock_ghz

    def reduce_ns(self, in_sticks: int, along_stick: bool) -> float:
        per_stick = 1.0 + (self.params.stick_reduce_extra_cycles if along_stick else 0.0)
        return in_sticks * per_stick / self.hw.corelets_per_core / self.hw.clock_ghz

    def add_ns(self, sticks: int) -> float:
        """Accumulating partial sums: one stick per cycle per corelet."""
        return sticks / self.hw.corelets_per_core / self.hw.clock_ghz

    def transpose_ns(self, sticks: int) -> float:
        return sticks * self.params.transpose_cycles_per_stick / self.hw.clock_ghz


def sticks_of(box: Box, stick: int, elem_bytes: int, stick_bytes: int) -> int:
    return box_padded_bytes(box, stick, elem_bytes, stick_bytes) // stick_bytes


@lru_cache(maxsize=1 << 16)
def requests(
    part: Box, whole: Box, stick: int, elem_bytes: int, stick_bytes: int, burst_sticks: int
) -> tuple[int, int]:
    """(padded bytes, DMA requests) to move ``part`` of a stick-tiled ``whole``: each contiguous run
    is cut into bursts of at most ``burst_sticks`` sticks."""
    nbytes = box_padded_bytes(part, stick, elem_bytes, stick_bytes)
    runs = contiguous_runs(part, whole, stick, elem_bytes, stick_bytes)
    run_sticks = nbytes / stick_bytes / runs
    return nbytes, runs * ceil(run_sticks / burst_sticks)
