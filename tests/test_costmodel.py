"""The analytic cost model against hand-computed values."""

import math

import pytest

from spyreopt.calibrate.sampling import reference_coefficients
from spyreopt.costmodel import analytic as cm
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import FormatError

C = reference_coefficients()  # the public figures (the shipped default is fitted to the simulator)


def test_device_memory_formula():
    assert cm.hbm_ns(C, 150_000, 0) == pytest.approx(1000.0)
    assert cm.hbm_ns(C, 1000, 1000) == pytest.approx(2000 / 150 + 0.00574 * 1000)


def test_balanced_traffic_is_about_105_gbps():
    x = 1 << 20
    assert 2 * x / cm.hbm_ns(C, x, x) == pytest.approx(105, rel=0.01)


def test_matmul_rate_and_row_underfill():
    assert cm.pe_efficiency(C, 2) == pytest.approx(0.50, abs=0.02)
    assert cm.pe_efficiency(C, 4) == pytest.approx(0.63, abs=0.02)
    assert cm.pe_efficiency(C, 8) == pytest.approx(0.72, abs=0.02)
    macs = 1140 * 1000
    assert cm.matmul_compute_ns(C, macs, 8) == pytest.approx(1000 / cm.pe_efficiency(C, 8))


def test_overlap_gamma_one_is_max():
    assert cm.overlap(C, 3.0, 5.0) == 5.0
    assert cm.overlap(C, 7.0, 5.0) == 7.0


def test_relayout_formula():
    runs, split, span = 10, 4, 547 * 100
    expected = runs * (-1.14 + 3.92 * math.log2(split)) + 100
    assert cm.relayout_ns(C, runs, split, span) == pytest.approx(expected)


def test_restick_rate():
    assert cm.restick_ns(C, 116_000, 0) == pytest.approx(1000.0)


def test_fixed_point_is_picoseconds():
    assert cm.ps(1.2345) == 1234 or cm.ps(1.2345) == 1235
    assert cm.COST_UNIT_US == 1e-6


def test_coefficient_file_errors_name_the_field(tmp_path):
    bad = dict(C.to_dict())
    bad["hbm_bytes_per_ns"] = "fast"
    with pytest.raises(FormatError, match="hbm_bytes_per_ns"):
        Coefficients.from_dict(bad)
    del bad["hbm_bytes_per_ns"]
    with pytest.raises(FormatError, match="missing"):
        Coefficients.from_dict(bad)


# ---- what the published device measurements changed, in the model and in the simulator alike ----------
def test_a_shared_read_costs_its_distinct_bytes_or_the_busiest_cores_delivery():
    c = Coefficients.from_dict({**C.to_dict(), "hbm_shared_bytes_per_ns": 40.0})
    assert cm.read_ns(c, 150_000) == pytest.approx(1000.0)  # nothing shared: a transfer
    assert cm.read_ns(c, 150_000, shared_bytes=20_000) == pytest.approx(1000.0)  # device memory still binds
    assert cm.read_ns(c, 150_000, shared_bytes=80_000) == pytest.approx(2000.0)  # the busiest core binds


def _decode(split):
    import spyreopt as so
    from spyreopt.model.problem import Problem

    g = so.Graph("d")
    g.output(g.matmul(g.input("x", (32, 4096)), g.weight("w", (4096, 4096)), name="mm"))
    return g, Problem(g, so.HardwareSpec(), fixed={"mm": (split, 1, "hbm")})


def test_an_m_split_reads_the_weight_once_from_device_memory():
    """An m split of 32 replicates the weight's reads on every core: device memory serves it once, so the
    model's bytes and the simulator's bytes are the distinct bytes, and each core's delivery rate binds."""
    import spyreopt as so
    from spyreopt.solving.fixed import plan_for

    weight, x = 4096 * 4096 * 2, 32 * 4096 * 2
    times = []
    for split in ((32, 1, 1), (1, 32, 1)):
        g, p = _decode(split)
        lq = p.layout_quantities(0)
        assert int(lq.leaf_bytes[0]) == weight + x
        assert int(lq.leaf_shared[0]) == (weight if split[0] == 32 else x)  # what each core shares with others
        sim = so.simulate(plan_for(g, {"mm": (split, 1, "hbm")}))
        assert sim.device_read_bytes == pytest.approx(weight + x)
        times.append(sim.time_us)
    assert times[0] > 3 * times[1]  # the published o_proj: (32,1,1) 806.5 us, (4,8,1) 209.6 us


def test_simulated_multicast_is_limited_by_each_cores_ingress():
    from spyreopt.hw.sim_flows import CoreJob, run_pipeline
    from spyreopt.hw.sim_machine import Machine
    from spyreopt.model.hardware import HardwareSpec

    m = Machine(HardwareSpec())
    nbytes = 1 << 22
    jobs = [
        CoreJob(c, nbytes, nbytes // 4096, read_shared_bytes=nbytes, read_served_bytes=nbytes / 8) for c in range(8)
    ]
    shared = run_pipeline(jobs, m)
    assert shared.read_bytes == pytest.approx(nbytes)  # served once
    assert shared.time_ns == pytest.approx(nbytes / m.params.multicast_gbps, rel=0.05)


def test_a_lone_core_reads_and_writes_at_once():
    """One core alone streams its reads and writes concurrently (the published one-core softmax moves 8.4 MB
    in 32.5 us); cores sharing device memory pay the balanced figure."""
    from spyreopt.hw.sim_flows import CoreJob, run_pipeline
    from spyreopt.hw.sim_machine import Machine
    from spyreopt.model.hardware import HardwareSpec

    m = Machine(HardwareSpec())
    nb, nq = 1 << 20, (1 << 20) // 4096
    alone = run_pipeline([CoreJob(0, nb, nq, 0.0, nb, nq)], m).time_ns
    assert alone < 1.25 * nb / m.hw.hbm_gbps_peak
    pair = run_pipeline([CoreJob(c, nb, nq, 0.0, nb, nq) for c in range(2)], m).time_ns
    assert pair > 4 * nb / m.hw.hbm_gbps_balanced * 0.9


def test_relayout_charges_the_bytes_a_core_takes_in_from_others():
    """Rows split 8 ways to columns split 8 ways: each core keeps an eighth of its copy and takes the rest in
    over the ring (the published 8-core relayout: 229 KB of 262 KB into each core in 8.72 us)."""
    import spyreopt as so
    from spyreopt.model.candidates import OpCandidates
    from spyreopt.model.edge_analysis import analyse_edge

    g = so.Graph("r")
    y = g.pointwise("neg", g.input("x", (1024, 1024)), name="p")
    g.output(g.pointwise("relu", y, name="c"))
    hw = so.HardwareSpec()
    prod = OpCandidates(g, g.ops["p"], hw, C, 1, ((8, 1), 1))
    cons = OpCandidates(g, g.ops["c"], hw, C, 1, ((1, 8), 1))
    ea = analyse_edge(prod.layouts[0], cons, cons.layouts[0], 0, g.tensors[y], hw, C)
    assert ea.copy_bytes == 1024 * 128 * 2
    assert ea.ingress_bytes == ea.copy_bytes * 7 // 8


def test_a_lone_cores_write_adds_no_time_in_the_model():
    """The model's side of the lone core: the write streams while the op reads, so only the reads are memory
    time; on several cores the write is charged as before."""
    import spyreopt as so
    from spyreopt.model.problem import Problem

    g = so.Graph("w")
    g.output(g.pointwise("exp", g.input("x", (256, 1024)), name="e"))
    one = Problem(g, so.HardwareSpec(cores=1), fixed={"e": ((1, 1), 1, "hbm")})
    many = Problem(g, so.HardwareSpec(), fixed={"e": ((32, 1), 1, "hbm")})
    c, nbytes = one.coef, 256 * 1024 * 2
    u = one.unary_parts(0, 0)
    assert u.leaf_bytes == nbytes
    assert u.mem * 1e-3 == pytest.approx(float(cm.read_ns(c, nbytes, 0, 1)), abs=0.002)  # no requests, no write
    spread = many.unary_parts(0, 0)
    assert spread.mem * 1e-3 > float(cm.read_ns(c, nbytes, 0, 1)) + nbytes / c.hbm_bytes_per_ns


def test_a_cores_own_dma_floors_its_traffic():
    """Each core moves its share of the op's reads and write through its own DMA engine: on one core a copy
    of 512 KB (in and out) takes at least 1 MB x ``hbm_core_ns_per_byte``, its write included; spread over 32
    cores the floor is a 32nd and the aggregate terms rule; 0 disables the floor (the shipped default)."""
    from dataclasses import replace

    import spyreopt as so
    from spyreopt.model.problem import Problem

    assert cm.core_floor_ns(replace(C, hbm_core_ns_per_byte=0.025), 1000, 600, 4) == pytest.approx(10.0)
    assert cm.core_floor_ns(C, 1000, 600, 4) == 0.0
    g = so.Graph("f")
    g.output(g.pointwise("neg", g.input("x", (256, 1024)), name="e"))
    nbytes, floor = 256 * 1024 * 2, replace(C, hbm_core_ns_per_byte=0.025)
    one = Problem(g, so.HardwareSpec(cores=1), floor, fixed={"e": ((1, 1), 1, "hbm")})
    assert one.unary_parts(0, 0).mem * 1e-3 == pytest.approx(2 * nbytes * 0.025, abs=0.002)
    without = Problem(g, so.HardwareSpec(cores=1), C, fixed={"e": ((1, 1), 1, "hbm")})
    assert without.unary_parts(0, 0).mem * 1e-3 == pytest.approx(float(cm.read_ns(C, nbytes, 0, 1)), abs=0.002)
    many = Problem(g, so.HardwareSpec(), floor, fixed={"e": ((32, 1), 1, "hbm")})
    spread = Problem(g, so.HardwareSpec(), C, fixed={"e": ((32, 1), 1, "hbm")})
    assert 2 * nbytes / 32 * 0.025 < spread.unary_parts(0, 0).mem * 1e-3  # below the aggregate: no effect
    assert many.unary_parts(0, 0).mem == spread.unary_parts(0, 0).mem
