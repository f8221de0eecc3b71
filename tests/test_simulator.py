"""The simulator: every solver's plans simulate, every corruption is rejected with its
reason, and each mechanism (bandwidth sharing, turnaround, bursts, PE underfill, ring
contention, double buffering) behaves as documented."""

from __future__ import annotations

import copy
from functools import cache

import numpy as np
import pytest

import spyreopt as so
from spyreopt.errors import PlanError
from spyreopt.hw.sim_flows import CoreJob, RingTransfer, run_pipeline, run_ring, share_device_memory
from spyreopt.hw.sim_machine import Machine, SimParams
from spyreopt.hw.simulator import PHASES, simulate
from spyreopt.solving.fixed import plan_for, simulate_op

HW = so.HardwareSpec()
M = Machine(HW)


@cache
def _plan_json(name: str, backend: str = "greedy", time_limit: float = 1.0) -> str:
    return so.solve(so.workloads.get(name), backend=backend, time_limit=time_limit, seed=0).to_json()


def plan(name: str, backend: str = "greedy", time_limit: float = 1.0) -> so.Plan:
    """A fresh (mutable) copy of a cached plan."""
    return so.Plan.from_json(_plan_json(name, backend, time_limit))


def backend_plan(name: str, backend: str, time_limit: float) -> so.Plan:
    return plan(name, backend, time_limit)


# ---- acceptance: every backend's plans simulate ------------------------------------
@pytest.mark.parametrize("name", so.workloads.names())
def test_every_greedy_plan_simulates_consistently(name):
    p = plan(name)
    r = simulate(p)
    assert r.time_us > 0
    assert set(r.op_us) == {o.name for o in p.ops}
    assert sum(r.op_us.values()) == pytest.approx(r.time_us, rel=1e-9)
    for op, us in r.op_us.items():
        assert set(r.breakdown[op]) == set(PHASES)
        assert all(v >= 0 for v in r.breakdown[op].values())
        assert sum(r.breakdown[op].values()) == pytest.approx(us, rel=1e-9)
        assert r.breakdown[op]["barrier"] == pytest.approx(HW.barrier_ns * 1e-3)
    assert len(r.core_busy) == HW.cores and all(0 <= b <= 1 for b in r.core_busy)
    resident = [t.bytes_per_core for t in p.tensors if t.residency != "hbm"]
    peak = max(r.peak_lx_bytes)
    assert peak <= HW.planner_lx_bytes
    assert peak >= max(resident, default=0)  # the simulator saw the biggest buffer itself
    # the fitted cost model tracks this machine within 15%: below 1 where a plan is many sub-µs ops
    # (transformer_block 0.867), which pay the per-op overhead the published device rows fit (about 0.37 µs) where
    # the simulator's barrier costs 0.15 µs; above 1 up to 1.157 (transformer_block's plan before staging).
    assert 0.85 < r.time_us / p.cost_us < 1.17


@cache
def _problem(name: str) -> so.Problem:
    return so.Problem(so.workloads.get(name))


@pytest.mark.parametrize("backend", ["anneal", "cpsat", "milp", "independent", "hbm"])
def test_every_backend_on_every_workload_validates_and_simulates(backend):
    """The fast representative of the slow run below: small limits, every built-in workload (greedy: above)."""
    for name in so.workloads.names():
        p = so.solve(_problem(name), backend=backend, time_limit=0.3, seed=0)
        p.validate()
        r = simulate(p)
        assert r.time_us > 0 and set(r.op_us) == {o.name for o in p.ops}, name


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["greedy", "anneal", "cpsat", "milp"])
@pytest.mark.parametrize("name", so.workloads.names())
def test_every_backend_on_every_workload_simulates(backend, name):
    p = backend_plan(name, backend, 10.0)
    assert simulate(p).time_us > 0


def test_simulation_is_deterministic_and_ignores_the_cost_model():
    p = plan("mha")
    base = simulate(p)
    assert simulate(plan("mha")) == base
    p.coefficients = {k: v * 3.0 + 1.0 for k, v in p.coefficients.items()}
    assert simulate(p).time_us == base.time_us


def test_the_hardware_spec_drives_the_machine():
    p = plan("softmax")  # memory-bound
    base = simulate(p).time_us
    p.hardware = dict(p.hardware, hbm_gbps_effective=75.0, hbm_gbps_balanced=52.5)
    assert simulate(p).time_us > 1.5 * base - 1.0
    q = plan("softmax")
    q.hardware = dict(q.hardware, barrier_ns=1150.0)
    assert simulate(q).time_us == pytest.approx(base + len(q.ops) * 1.0, rel=1e-6)


# ---- corrupted plans (fixed decisions, so they do not move when a solver improves) ----
def softmax_plan() -> so.Plan:
    """Softmax with every op on a 32-way row split: every edge in place, every tensor resident."""
    lx = ({"d0": 32}, 1, "lx")
    names = ("softmax.max", "softmax.sub", "softmax.exp", "softmax.sum")
    return plan_for(so.workloads.get("softmax"), {**dict.fromkeys(names, lx), "softmax.div": ({"d0": 32}, 1, "hbm")})


def pair_plan(consumer, producer_residency: str = "lx") -> so.Plan:
    """exp then neg over a (256, 512) tensor; the producer splits rows 32 ways."""
    g = so.Graph("pair")
    y = g.pointwise("exp", g.input("x", (256, 512)), name="p")
    g.output(g.pointwise("neg", y, name="c"))
    return plan_for(g, {"p": ({"d0": 32}, 1, producer_residency), "c": consumer})


RELAYOUT = ({"d0": 4, "d1": 8}, 1, "hbm")  # each consumer core gathers 8 producer row blocks


def test_corruption_fixtures_are_legal():
    for p in (softmax_plan(), pair_plan(RELAYOUT), pair_plan(({"d0": 32}, 1, "hbm"), "hbm")):
        p.validate()
        simulate(p)
    assert {e.mode for e in softmax_plan().edges} == {"inplace"}
    assert [(e.mode, e.fan_in) for e in pair_plan(RELAYOUT).edges] == [("relayout", 8)]


def test_address_moved_into_a_live_buffer_is_rejected():
    p = softmax_plan()
    a, b = p.tensor("softmax.max"), p.tensor("softmax.sub")  # max is live while sub is written
    b.address = a.address
    with pytest.raises(
        PlanError,
        match=r"op 'softmax.sub' at step 1, core 0: writing tensor 'softmax.sub' at \[\d+, \d+\) overwrites live "
        r"tensor 'softmax.max'",
    ):
        simulate(p)


def test_dropped_relayout_is_rejected():
    p = pair_plan(RELAYOUT)
    e = p.edges[0]
    e.mode, e.copy_address = "inplace", None
    with pytest.raises(
        PlanError,
        match=r"op 'c' at step 1, core 0: reads tensor 'p' in place box \[\(0, 64\), \(0, 64\)\] at address \d+, "
        r"but the scratchpad holds tensor 'p' box \[\(0, 8\), \(0, 512\)\]",
    ):
        simulate(p)


def test_reading_a_device_memory_tensor_from_scratchpad_is_rejected():
    p = pair_plan(({"d0": 32}, 1, "hbm"), "hbm")
    assert p.edges[0].mode == "hbm"
    p.edges[0].mode = "inplace"
    with pytest.raises(
        PlanError,
        match=r"op 'c' at step 1: edge mode 'inplace' reads tensor 'p' from scratchpad, but it was written to device "
        r"memory only",
    ):
        simulate(p)


def test_reading_a_freed_tensor_is_rejected():
    p = softmax_plan()
    t = p.tensor("softmax.exp")  # read by sum (step 3) and div (step 4)
    t.lifetime = [t.lifetime[0], 4]
    with pytest.raises(
        PlanError,
        match=r"op 'softmax.div' at step 4, core 0: reads tensor 'softmax.exp' in place .* holds nothing live",
    ):
        simulate(p)


def test_spill_of_a_tensor_never_written_to_device_memory_is_rejected():
    p = softmax_plan()
    e = next(e for e in p.edges if e.consumer == "softmax.div" and e.tensor == "softmax.exp")
    e.mode = "spill"
    with pytest.raises(
        PlanError,
        match=r"reads tensor 'softmax.exp' from device memory, but it was never written there \(residency 'lx'\)",
    ):
        simulate(p)


def test_address_beyond_capacity_is_rejected():
    p = softmax_plan()
    t = p.tensor("softmax.exp")
    t.address = HW.planner_lx_bytes - HW.stick_bytes
    with pytest.raises(
        PlanError,
        match=rf"op 'softmax.exp' at step 2, core 0: tensor 'softmax.exp' at \[{t.address}, \d+\) lies outside the "
        rf"scratchpad \(planner capacity {HW.planner_lx_bytes}",
    ):
        simulate(p)


def test_misaligned_address_is_rejected():
    p = pair_plan(RELAYOUT)
    e = p.edges[0]
    e.copy_address += 64
    with pytest.raises(
        PlanError,
        match=rf"op 'c' at step 1, core 0: relayout copy of 'p' for 'c' at address {e.copy_address} is not a multiple "
        r"of the 128-byte stick",
    ):
        simulate(p)


def test_relayout_beyond_fan_in_is_rejected():
    p = pair_plan(RELAYOUT)
    p.hardware = dict(p.hardware, relayout_fan_in=7)
    with pytest.raises(
        PlanError,
        match=r"op 'c' at step 1: relayout of tensor 'p' to core 0 gathers 8 fragments \(from cores \[0, 1, 2, 3, 4, "
        r"5, 6, 7\]\), above the fan-in limit 7",
    ):
        simulate(p)


def test_division_beyond_the_span_limit_is_rejected():
    p = plan("decode_proj")
    p.hardware = dict(p.hardware, span_limit_bytes=64 * 1024)
    with pytest.raises(
        PlanError,
        match=r"op 'proj' at step 0: core \d+ addresses a span of \d+ bytes of tensor '\w+' .* above the span limit 65536",
    ):
        simulate(p)


def test_graph_output_kept_only_in_scratchpad_is_rejected():
    p = softmax_plan()
    last = p.ops[-1]
    t = p.tensor(last.name)
    last.residency = t.residency = "lx"
    t.address, t.lifetime = HW.planner_lx_bytes // 2, [4, 5]
    with pytest.raises(PlanError, match=r"graph output\(s\) \['softmax.div'\] never written to device memory"):
        simulate(p)


def test_relayout_through_a_changed_stick_is_rejected():
    g = so.Graph("t")
    x = g.input("x", (64, 256))
    y = g.pointwise("exp", x, name="e")
    g.output(g.pointwise("neg", y, name="n"))
    p = plan_for(g, {"e": ({"d0": 32}, 1, "lx"), "n": ({"d0": 32}, 1, "hbm")})
    simulate(p)
    p.ops[1].stick = p.tensor("n").stick = 0  # the consumer now wants stick dim 0, the edge still says in place
    p.ops[1].division = {"d0": 1, "d1": 32}
    with pytest.raises(PlanError, match=r"stored with stick dim 1 but the op reads it with stick dim 0"):
        simulate(p)


# ---- mechanisms ----------------------------------------------------------------------
def test_device_memory_one_way_balanced_and_short_requests():
    n = 32
    tau_burst = 1 / HW.hbm_gbps_peak + M.hbm_request_overhead_ns / M.burst_bytes
    caps = np.full(n, 1e9)
    reads = share_device_memory(np.full(n, tau_burst), caps, np.zeros(n, dtype=bool), M.turnaround_ns_per_byte)
    assert reads.sum() == pytest.approx(HW.hbm_gbps_effective, rel=1e-9)
    mixed = share_device_memory(np.full(n, tau_burst), caps, np.arange(n) % 2 == 1, M.turnaround_ns_per_byte)
    assert mixed.sum() == pytest.approx(HW.hbm_gbps_balanced, rel=1e-9)
    tau_stick = 1 / HW.hbm_gbps_peak + M.hbm_request_overhead_ns / HW.stick_bytes
    short = share_device_memory(np.full(n, tau_stick), caps, np.zeros(n, dtype=bool), M.turnaround_ns_per_byte)
    assert short.sum() < HW.hbm_gbps_effective / 5
    capped = share_device_memory(np.array([tau_burst]), np.array([3.0]), np.array([False]), 0.0)
    assert capped[0] == 3.0  # a lone stream runs at its own DMA cap


def test_one_core_is_limited_by_requests_in_flight():
    one = run_pipeline([CoreJob(0, read_bytes=1 << 20, read_requests=(1 << 20) // M.burst_bytes)], M)
    cap = HW.dma_max_inflight * M.burst_bytes / M.params.dma_latency_ns
    assert one.time_ns >= (1 << 20) / min(cap, HW.hbm_gbps_peak)  # a lone core: no other core's requests between
    short = run_pipeline([CoreJob(0, read_bytes=1 << 20, read_requests=(1 << 20) // HW.stick_bytes)], M)
    assert short.time_ns >= (1 << 20) / (HW.dma_max_inflight * HW.stick_bytes / M.params.dma_latency_ns)
    many = run_pipeline([CoreJob(c, read_bytes=1 << 15, read_requests=256) for c in range(32)], M)
    assert many.time_ns < short.time_ns  # same short requests over 32 cores: the shared bandwidth, not one DMA


def test_a_cores_dma_engine_caps_its_reads_and_writes_together():
    slow = Machine(HW, SimParams(core_dma_gbps=20.0))
    nb, req = 1 << 20, (1 << 20) // M.burst_bytes
    alone = run_pipeline([CoreJob(0, read_bytes=nb, read_requests=req, write_bytes=nb, write_requests=req)], slow)
    assert alone.time_ns >= 2 * nb / 20.0  # one engine moves both directions
    four = run_pipeline([CoreJob(c, read_bytes=nb, read_requests=req) for c in range(4)], slow)
    assert four.time_ns == pytest.approx(nb / 20.0, rel=0.05)  # each core has its own engine


def test_a_device_tensor_in_another_stick_is_transposed_on_the_way_in():
    g = so.Graph("t")
    g.output(g.pointwise("copy", g.transpose(g.input("x", (2048, 512)), 0, 1), name="copy"))
    device = SimParams(transpose_on_read=True)
    r = simulate_op(g, {"copy": ({"d0": 8}, 1, "hbm")}, params=device)  # each core: 64 columns of x, one stick wide
    assert r.breakdown["copy"]["restickify"] == 0  # no round trip through device memory first
    assert r.device_read_bytes == r.device_write_bytes == 2048 * 512 * 2
    plain = so.Graph("c")
    plain.output(plain.pointwise("copy", plain.input("x", (512, 2048)), name="copy"))
    untransposed = simulate_op(plain, {"copy": ({"d0": 8}, 1, "hbm")}, params=device)
    assert r.breakdown["copy"]["compute"] > untransposed.breakdown["copy"]["compute"]  # the transpose unit's work


def test_each_op_pays_the_start_cost():
    p = plan("softmax")
    base = simulate(p, SimParams()).time_us
    assert simulate(p, SimParams(op_overhead_ns=1000.0)).time_us == pytest.approx(base + len(p.ops), rel=1e-6)


def test_double_buffering_overlaps_memory_and_compute():
    nbytes, req = 4 << 20, (4 << 20) // M.burst_bytes
    mem = run_pipeline([CoreJob(0, read_bytes=nbytes, read_requests=req)], M).time_ns
    comp = run_pipeline([CoreJob(0, compute_ns=mem)], M).time_ns
    both = run_pipeline([CoreJob(0, read_bytes=nbytes, read_requests=req, compute_ns=mem)], M).time_ns
    assert comp == pytest.approx(mem)
    assert max(mem, comp) < both < 0.75 * (mem + comp)


def test_ring_hops_direction_and_contention():
    nb = 1 << 16
    near = run_ring([RingTransfer(0, 1, nb, nb // M.burst_bytes)], M)
    far = run_ring([RingTransfer(0, 16, nb, nb // M.burst_bytes)], M)
    assert far > near
    assert run_ring([RingTransfer(0, 31, nb, 16)], M) == pytest.approx(near)  # the short way round
    wide = Machine(HW, SimParams(core_ingress_gbps=1e4))  # links, not each core's ingress, bind
    near = run_ring([RingTransfer(0, 1, nb, nb // M.burst_bytes)], wide)
    shared = run_ring([RingTransfer(0, 2, nb, 16), RingTransfer(1, 3, nb, 16)], wide)  # both use link 1->2
    apart = run_ring([RingTransfer(0, 2, nb, 16), RingTransfer(3, 1, nb, 16)], wide)  # opposite directions
    assert shared > 1.8 * (near - M.hop_ns - M.issue_ns)
    assert apart < shared
    short_runs = run_ring([RingTransfer(0, 1, nb, nb // HW.stick_bytes)], M)
    assert short_runs > near


def test_pe_row_underfill_and_vector_costs():
    def rate(rows):
        box = ((0, rows), (0, 512), (0, 512))
        return rows * 512 * 512 / M.matmul_ns(box, 0)

    assert rate(2) / rate(1024) == pytest.approx(0.5, rel=0.02)
    assert rate(2) < rate(4) < rate(8) < rate(64)
    assert rate(1024) == pytest.approx(HW.sustained_macs_per_ns_per_core, rel=0.01)
    assert M.vector_ns(100, "add", 2) > M.vector_ns(100, "exp", 1) == M.vector_ns(100, "neg", 1)  # softmax (c), (d)
    slow = Machine(HW, SimParams(transcendental_cycles=2.0))
    assert slow.vector_ns(100, "exp", 1) == 2 * slow.vector_ns(100, "neg", 1)
    assert M.reduce_ns(100, True) > M.reduce_ns(100, False)


def _mm(m, k, n):
    g = so.Graph("mm")
    g.output(g.matmul(g.input("a", (m, k)), g.weight("b", (k, n)), name="mm"))
    return g


def test_op_families_measure_in_isolation():
    g = _mm(128, 1024, 512)
    plain = simulate_op(g, {"mm": ({"m": 4, "n": 8}, 1, "hbm")})
    ksplit = simulate_op(g, {"mm": ({"m": 4, "n": 2, "k": 4}, 1, "hbm")})
    assert plain.breakdown["mm"]["psum"] == 0 and ksplit.breakdown["mm"]["psum"] > 0
    one = simulate_op(g, {"mm": ({}, 1, "hbm")})
    eight = simulate_op(g, {"mm": ({"n": 8}, 1, "hbm")})
    assert one.breakdown["mm"]["compute"] > 7 * eight.breakdown["mm"]["compute"]
    assert one.time_us > eight.time_us
    # replicated reads: an m split reads B on every m block, but device memory serves each slice once (multicast)
    assert plain.device_read_bytes == eight.device_read_bytes == one.device_read_bytes == (128 + 512) * 1024 * 2
    # a producer/consumer pair whose slices differ: a relayout, then a restickify
    r = so.Graph("r")
    y = r.pointwise("exp", r.input("x", (256, 512)), name="p")
    r.output(r.pointwise("neg", y, name="c"))
    rel = simulate_op(r, {"p": ({"d0": 32}, 1, "lx"), "c": ({"d0": 4, "d1": 8}, 1, "hbm")})
    assert rel.breakdown["c"]["relayout"] > 0 and rel.breakdown["c"]["restickify"] == 0
    res = simulate_op(r, {"p": ({"d0": 32}, 1, "lx"), "c": ({"d0": 4, "d1": 8}, 0, "hbm")})
    assert res.breakdown["c"]["restickify"] > 0 and res.breakdown["c"]["relayout"] == 0
    with pytest.raises(PlanError, match="no decision for op 'c'"):
        plan_for(r, {"p": ({"d0": 32}, 1, "lx")})


def test_scratchpad_occupancy_follows_lifetimes():
    g = so.Graph("occ")
    x = g.input("x", (256, 512))
    y = g.pointwise("exp", x, name="p")
    z = g.pointwise("neg", y, name="c")
    g.output(g.pointwise("add", y, z, name="o"))
    p = plan_for(g, {"p": ({"d0": 32}, 1, "lx"), "c": ({"d0": 4, "d1": 8}, 1, "lx"), "o": ({"d0": 32}, 1, "hbm")})
    assert sorted(e.mode for e in p.edges) == ["inplace", "relayout", "relayout"]
    r = simulate(p)
    live = [0] * len(p.ops)  # every core holds equal slices here, so the plan's sizes are exact
    for t in p.tensors:
        if t.residency != "hbm":
            for step in range(*t.lifetime):
                live[step] += t.bytes_per_core
    for e in p.edges:
        live[p.ops.index(p.op(e.consumer))] += e.copy_bytes_per_core
    for core in (0, 17, 31):
        occ = r.lx_occupancy[core]
        assert [t for t, _ in occ] == sorted(t for t, _ in occ)
        assert [b for _, b in occ] == live + [0]  # at each op's start, then everything freed at the end
    assert r.peak_lx_bytes == [max(live)] * HW.cores


def test_plan_json_round_trip_and_cli(tmp_path, capsys):
    import argparse

    from spyreopt.cli.simulate import add_parser

    p = plan("mlp")
    path = tmp_path / "plan.json"
    path.write_text(p.to_json())
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["simulate", str(path)])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    total = simulate(p).time_us
    assert f"total {total:.3f} us simulated" in out
    for o in p.ops:
        assert o.name in out
    assert copy.deepcopy(p) == p
