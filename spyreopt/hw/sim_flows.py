"""Discrete-event engines: the per-core DMA/compute pipeline over shared device
memory, and transfers over the ring.

Both are fluid event simulations: between two events every active transfer
moves at a constant rate; an event is a transfer or a compute tile finishing
(or a latency elapsing), after which rates are reallocated.

* Device memory: every active stream gets an equal share, capped by its core's
  DMA (``dma_max_inflight`` requests of its size per ``dma_latency_ns``); a slice
  several cores read is served once and multicast to each of them (each core's
  share of it loads the controller, and a core receives shared data at most at
  ``SimParams.multicast_gbps``); while several cores' streams interleave the
  controller spends ``bytes/peak + overhead`` per request and a turnaround per
  byte of the smaller direction while reads and writes are both active, so
  short runs and balanced traffic are slower than long one-way streams (the
  spec's one-way effective and balanced figures). A core's DMA engine moves at
  most ``SimParams.core_dma_gbps``, shared by its active streams. One core streaming alone
  reads and writes at once, each at the peak as far as its engine allows (the
  published one-core softmax moves 8.4 MB in 32.5 µs, which no shared read/write
  budget at 204.8 GB/s allows; the device sweep's lone cores move far less, and
  the calibrated engine rate follows the sweep).
* Ring: transfers take the shorter direction around the bidirectional ring and
  share link bandwidth max-min fairly; each destination's DMA engine also
  limits how many requests per ns it issues (many short runs are slow), and
  takes in at most ``core_ingress_gbps``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from spyreopt.hw.sim_machine import Machine

EPS = 1e-9
MEMO_SIZE = 4096  # distinct phases remembered (per process): a whole model has a few hundred


@dataclass
class CoreJob:
    """One core's share of a phase: stream reads in, compute, stream writes out (double-buffered tiles)."""

    core: int
    read_bytes: float = 0.0
    read_requests: int = 0
    compute_ns: float = 0.0
    write_bytes: float = 0.0
    write_requests: int = 0
    read_shared_bytes: float = 0.0  # of read_bytes, the bytes other cores read too (multicast)
    read_served_bytes: float | None = None  # device-memory bytes serving this core's reads (None: read_bytes)

    @property
    def served(self) -> float:
        return self.read_bytes if self.read_served_bytes is None else self.read_served_bytes


@dataclass
class PhaseResult:
    time_ns: float = 0.0
    compute_ns: dict[int, float] = field(default_factory=dict)  # busy per core
    read_bytes: float = 0.0
    write_bytes: float = 0.0


# ---- device memory -----------------------------------------------------------
def share_device_memory(tau: np.ndarray, cap: np.ndarray, write: np.ndarray, turnaround: float) -> np.ndarray:
    """Rates (bytes/ns) of concurrent streams: the largest equal share ``lam`` (each stream at
    ``min(cap, lam)``) such that ``sum(rate * tau) + turnaround * min(reads, writes) <= 1``."""
    bps = np.concatenate(([0.0], np.unique(cap)))

    def load(lam: float) -> tuple[float, float, float]:
        r = np.minimum(cap, lam)
        return float(r @ tau), float(r[~write].sum()), float(r[write].sum())

    def g(lam: float) -> float:
        s, rd, wr = load(lam)
        return s + turnaround * min(rd, wr)

    if g(bps[-1]) <= 1.0:
        return cap.copy()
    hi_i = next(i for i in range(1, len(bps)) if g(bps[i]) > 1.0)
    lo, hi = bps[hi_i - 1], bps[hi_i]
    (s0, r0, w0), (s1, r1, w1) = load(lo), load(hi)
    roots = []
    for x0, x1 in ((r0, r1), (w0, w1)):  # g = min(g_read, g_write); both linear on [lo, hi]
        a0, a1 = s0 + turnaround * x0, s1 + turnaround * x1
        roots.append(hi if a1 <= 1.0 else lo + (1.0 - a0) / (a1 - a0) * (hi - lo))
    lam = min(max(roots), hi)
    return np.minimum(cap, lam)


class _Pipe:
    """One core's tile pipeline: read tile t, compute it, write it; two buffers each side."""

    def __init__(self, job: CoreJob, m: Machine):
        n = m.tiles(max(job.read_bytes, job.write_bytes))
        self.job, self.n, self.m = job, n, m
        self.rb, self.rq = job.read_bytes / n, job.read_requests / n
        self.cn = job.compute_ns / n
        self.wb, self.wq = job.write_bytes / n, job.write_requests / n
        self.reads = 0 if job.read_bytes > 0 else n
        self.comps = 0
        self.has_writes = job.write_bytes > 0
        self.writes = 0
        self.read: list[float] | None = None  # [latency left, bytes left]
        self.comp: float | None = None
        self.write: list[float] | None = None
        self.first_read = self.first_write = True

    def start(self) -> None:
        lat = self.m.params.dma_latency_ns
        if self.read is None and self.reads < self.n and self.reads < self.comps + 2:
            self.read = [lat if self.first_read else 0.0, self.rb]
            self.first_read = False
        out_free = not self.has_writes or self.comps < self.writes + 2
        if self.comp is None and self.comps < self.reads and self.comps < self.n and out_free:
            self.comp = self.cn
        if self.write is None and self.has_writes and self.writes < self.comps:
            self.write = [lat if self.first_write else 0.0, self.wb]
            self.first_write = False

    def done(self) -> bool:
        return self.comps == self.n and (not self.has_writes or self.writes == self.n)

    def streams(self) -> list[tuple[str, list[float]]]:
        return [(k, a) for k, a in (("r", self.read), ("w", self.write)) if a is not None and a[0] <= 0.0]


def run_pipeline(jobs: list[CoreJob], m: Machine) -> PhaseResult:
    """Simulate every core's job at once over the shared device memory; returns the phase's makespan.

    A pure function of the jobs and the machine, so a phase seen before (the same op in every layer of a
    model) is answered from a cache: exactly what simulating it again would give."""
    key = tuple(astuple_job(j) for j in jobs)
    r = _pipeline(m, key)
    return PhaseResult(r.time_ns, dict(r.compute_ns), r.read_bytes, r.write_bytes)


def astuple_job(j: CoreJob) -> tuple:
    return (j.core, j.read_bytes, j.read_requests, j.compute_ns, j.write_bytes, j.write_requests,
            j.read_shared_bytes, j.read_served_bytes)  # fmt: skip


@lru_cache(maxsize=MEMO_SIZE)
def _pipeline(m: Machine, key: tuple) -> PhaseResult:
    return _simulate_pipeline([CoreJob(*k) for k in key], m)


def _simulate_pipeline(jobs: list[CoreJob], m: Machine) -> PhaseResult:
    pipes = [_Pipe(j, m) for j in jobs if j.read_bytes or j.write_bytes or j.compute_ns]
    result = PhaseResult(compute_ns={j.core: j.compute_ns for j in jobs})
    result.read_bytes = sum(j.served for j in jobs)
    result.write_bytes = sum(j.write_bytes for j in jobs)
    peak, ovh, ta = m.hw.hbm_gbps_peak, m.hbm_request_overhead_ns, m.turnaround_ns_per_byte
    t = 0.0
    while True:
        for p in pipes:
            p.start()
        live = [p for p in pipes if not p.done()]
        if not live:
            break
        flows = [(p, k, a) for p in live for k, a in p.streams()]
        rates = np.zeros(0)
        if flows:
            tau, cap, wr = [], [], []
            active = {}
            for p, _, _ in flows:
                active[id(p)] = active.get(id(p), 0) + 1
            for p, k, _ in flows:
                nb, nq = (p.rb, p.rq) if k == "r" else (p.wb, p.wq)
                limit = min(m.dma_cap(nb, max(round(nq), 1)), m.params.core_dma_gbps / active[id(p)])
                served = 1.0
                if k == "r":
                    job = p.job
                    served = job.served / job.read_bytes
                    if job.read_shared_bytes > 0:
                        limit = min(limit, m.params.multicast_gbps * job.read_bytes / job.read_shared_bytes)
                tau.append(served * (1.0 / peak + ovh * nq / nb))
                cap.append(limit)
                wr.append(k == "w")
            tau, cap, wr = np.array(tau), np.array(cap), np.array(wr)
            if len({id(p) for p, _, _ in flows}) == 1:  # one core alone: its reads and writes stream duplex at peak
                rates = np.zeros(len(flows))
                for side in (wr, ~wr):
                    rates[side] = share_device_memory(np.full(side.sum(), 1.0 / peak), cap[side], wr[side], 0.0)
            else:
                rates = share_device_memory(tau, cap, wr, ta)
        steps = [a[0] for p in live for _, a in (("r", p.read), ("w", p.write)) if a is not None and a[0] > 0.0]
        steps += [p.comp for p in live if p.comp is not None]
        steps += [a[1] / r for (_, _, a), r in zip(flows, rates) if r > 0]
        if not steps:
            raise RuntimeError("device-memory pipeline stalled (no activity can progress)")
        dt = max(min(steps), 0.0)
        t += dt
        for (_, _, a), r in zip(flows, rates):
            a[1] -= r * dt
        for p in live:
            for a in (p.read, p.write):
                if a is not None and a[0] > 0.0:
                    a[0] = max(a[0] - dt, 0.0)
            if p.comp is not None:
                p.comp -= dt
                if p.comp <= EPS * max(p.cn, 1.0):
                    p.comp, p.comps = None, p.comps + 1
            if p.read is not None and p.read[0] <= 0.0 and p.read[1] <= EPS * max(p.rb, 1.0):
                p.read, p.reads = None, p.reads + 1
            if p.write is not None and p.write[0] <= 0.0 and p.write[1] <= EPS * max(p.wb, 1.0):
                p.write, p.writes = None, p.writes + 1
    result.time_ns = float(t)
    return result


# ---- ring --------------------------------------------------------------------
@dataclass
class RingTransfer:
    src: int
    dst: int
    nbytes: float
    requests: int


def ring_path(src: int, dst: int, cores: int) -> list[int]:
    """Directed link ids on the shorter way round (ties go clockwise): link i is i->i+1, cores+i is i->i-1."""
    cw, ccw = (dst - src) % cores, (src - dst) % cores
    if cw <= ccw:
        return [(src + h) % cores for h in range(cw)]
    return [cores + (src - h) % cores for h in range(ccw)]


def max_min_rates(incidence: np.ndarray, capacity: np.ndarray, caps: np.ndarray) -> np.ndarray:
    """Progressive filling: raise every unfrozen flow equally until a resource or its own cap saturates."""
    nflows = incidence.shape[1]
    rate = np.zeros(nflows)
    free = np.ones(nflows, dtype=bool)
    slack = capacity.astype(float).copy()
    while free.any():
        load = incidence @ free.astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            by_res = np.where(load > 0, slack / load, np.inf)
        delta = min(by_res.min(), (caps - rate)[free].min())
        delta = max(delta, 0.0)
        rate[free] += delta
        slack -= incidence @ np.where(free, delta, 0.0)
        saturated = (slack <= EPS * np.maximum(capacity, 1.0)) & (load > 0)
        frozen = (incidence[saturated] > 0).any(axis=0) | (caps - rate <= EPS * np.maximum(caps, 1.0))
        if not (frozen & free).any():
            break
        free &= ~frozen
    return rate


def run_ring(transfers: list[RingTransfer], m: Machine) -> float:
    """Makespan (ns) of a set of concurrent core-to-core transfers (a pure function: cached like a pipeline)."""
    return _ring(m, tuple((t.src, t.dst, t.nbytes, t.requests) for t in transfers))


@lru_cache(maxsize=MEMO_SIZE)
def _ring(m: Machine, key: tuple) -> float:
    return _simulate_ring([RingTransfer(*k) for k in key], m)


def _simulate_ring(transfers: list[RingTransfer], m: Machine) -> float:
    moves = [t for t in transfers if t.nbytes > 0]
    if not moves:
        return 0.0
    cores = m.hw.cores
    paths = [ring_path(t.src, t.dst, cores) for t in moves]
    n_res = 4 * cores  # 2 * cores directed links, one DMA engine per destination, one ingress port per destination
    incidence = np.zeros((n_res, len(moves)))
    caps = np.zeros(len(moves))
    fan = {}
    for t in moves:
        fan[t.dst] = fan.get(t.dst, 0) + 1
    for f, (t, path) in enumerate(zip(moves, paths)):
        incidence[path, f] = 1.0
        incidence[2 * cores + t.dst, f] = t.requests / t.nbytes  # requests per byte
        incidence[3 * cores + t.dst, f] = 1.0 if path else 0.0  # a local copy does not cross the ring
        rtt = m.issue_ns + 2 * len(path) * m.hop_ns
        per_request = t.nbytes / max(t.requests, 1)
        caps[f] = m.hw.dma_max_inflight / fan[t.dst] * per_request / rtt
        if not path:
            caps[f] = min(caps[f], m.local_copy_bytes_per_ns)
    capacity = np.concatenate(
        (
            np.full(2 * cores, m.hw.ring_bytes_per_ns),
            np.full(cores, 1.0 / m.issue_ns),
            np.full(cores, m.params.core_ingress_gbps),
        )
    )
    latency = np.array([len(p) * m.hop_ns + m.issue_ns for p in paths])
    left = np.array([t.nbytes for t in moves], dtype=float)
    active = np.ones(len(moves), dtype=bool)
    t_now = 0.0
    while active.any():
        flowing = active & (latency <= 0.0)
        rates = np.zeros(len(moves))
        if flowing.any():
            idx = np.flatnonzero(flowing)
            rates[idx] = max_min_rates(incidence[:, idx], capacity, caps[idx])
        steps = list(latency[active & (latency > 0.0)])
        steps += list(left[flowing & (rates > 0)] / rates[flowing & (rates > 0)])
        if not steps:
            raise RuntimeError("ring transfers stalled (no transfer can progress)")
        dt = min(steps)
        t_now += dt
        latency = np.where(active & (latency > 0.0), np.maximum(latency - dt, 0.0), latency)
        left -= rates * dt
        active &= ~(flowing & (left <= EPS * np.maximum([t.nbytes for t in moves], 1.0)))
    return float(t_now)
