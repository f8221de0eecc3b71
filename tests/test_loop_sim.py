"""Tiled loops in numeric execution and in the simulator: tile by tile, a loop computes the
untiled reference; the simulator runs a loop iteration by iteration, keeps intermediates
that would not fit on chip, charges every tile, and catches a tile written over a live one."""

from __future__ import annotations

import json
from functools import cache

import numpy as np
import pytest
from test_loop_check import matmul_loop, mutate, sdpa_loop, softmax_loop

import spyreopt as so
from spyreopt.errors import PlanError
from spyreopt.hw.execute import check_execution, execute, reference
from spyreopt.hw.sim_machine import SimParams
from spyreopt.hw.simulator import simulate
from spyreopt.model.check.loops import check_loops
from spyreopt.solving.fixed import plan_for
from spyreopt.testing.loops import with_loop


def _ops(g: so.Graph) -> list[str]:
    return [o.name for o in g.compute_ops()]


# ---- numeric execution -----------------------------------------------------------
@pytest.mark.parametrize("tiles", [2, 4, 16])
def test_row_tiled_softmax_computes_the_reference(tiles):
    p = softmax_loop(tiles=tiles)
    check_loops(p)
    assert check_execution(p, seed=3)["softmax.div"] < 1e-5


@pytest.mark.parametrize("staged", [(), ("k", "v")])
def test_query_row_tiled_attention_computes_the_reference(staged):
    p = sdpa_loop(staged=staged)
    check_loops(p)
    assert check_execution(p, seed=2)["context"] < 1e-5


@pytest.mark.parametrize("division", [{"m": 4, "n": 4}, {"m": 4, "n": 2, "k": 4}])
@pytest.mark.parametrize("tiles", [2, 4])
def test_k_tiled_matmul_accumulates_to_the_reference(division, tiles):
    p = matmul_loop(tiles=tiles, division=division)
    check_loops(p)
    assert check_execution(p, seed=1)["mm"] < 1e-4


@pytest.mark.parametrize("fn", ["sum", "max", "min", "mean"])
def test_a_reduction_tiled_along_its_reduced_dim_accumulates(fn):
    g = so.Graph("red")
    g.output(g.pointwise("exp", g.reduce(fn, g.input("x", (64, 1024)), dims=(1,), name="r"), name="e"))
    p = plan_for(g, {"r": ({"d0": 8}, 1, "hbm"), "e": ({"d0": 8}, 1, "hbm")})
    lp = with_loop(p, ["r"], {"r": "d1"}, 4, accumulate=True)
    check_loops(lp)
    check_execution(lp, seed=4)


def test_a_tile_written_over_a_live_tile_computes_wrong_numbers_and_is_rejected():
    p = softmax_loop()
    at = p.tensor("softmax.sum").address
    bad = mutate(p, lambda d: next(t for t in d["tensors"] if t["name"] == "softmax.exp").update(address=at))
    with pytest.raises(PlanError, match="differs from the reference"):
        check_execution(bad)
    with pytest.raises(PlanError, match=r"writing tensor 'softmax\.(exp|sum)' .* overwrites live"):
        simulate(bad)


@pytest.mark.parametrize(
    "make",
    [
        softmax_loop,
        lambda: softmax_loop(tiles=16),
        sdpa_loop,
        lambda: sdpa_loop(staged=()),
        matmul_loop,
        lambda: matmul_loop(division={"m": 4, "n": 2, "k": 4}),
    ],  # fmt: skip
)
def test_the_simulators_scratchpad_peak_is_the_checkers_footprint(make):
    """Two derivations that share no code agree where nothing else is live during the loop."""
    p = make()
    assert simulate(p).loops[0]["peak_lx_bytes"] == p.loops[0].footprint_bytes


def test_staged_and_streamed_operands_give_the_same_numbers():
    a, b = execute(sdpa_loop(staged=("k", "v")), seed=5), execute(sdpa_loop(staged=()), seed=5)
    g = so.Graph.from_dict(sdpa_loop().graph)
    np.testing.assert_array_equal(a["context"], b["context"])
    np.testing.assert_allclose(a["context"], reference(g, seed=5)["context"], rtol=1e-4, atol=1e-5)


# ---- simulator ---------------------------------------------------------------------
@cache
def _big_softmax_hbm() -> str:
    """Softmax over 8192 x 4096 fp16 rows: 2 MiB per core of each intermediate, above a core's 1.55 MiB."""
    g = so.Graph("big_softmax")
    g.output(g.softmax(g.input("x", (8192, 4096)), dim=1))
    return plan_for(g, {n: ({"d0": 32}, 1, "hbm") for n in _ops(g)}).to_json()


def big_softmax(tiles: int | None) -> so.Plan:
    p = so.Plan.from_json(_big_softmax_hbm())
    if tiles is None:
        return p
    ops = [o.name for o in p.ops]
    return with_loop(p, ops, dict.fromkeys(ops, "d0"), tiles)


def test_the_big_softmax_does_not_fit_untiled():
    p = big_softmax(None)
    per_core = 8192 * 4096 * 2 // 32
    assert per_core > so.HardwareSpec.from_dict(p.hardware).planner_lx_bytes
    with pytest.raises(PlanError, match="resident output needs 2097152 bytes per core"):
        plan_for(
            so.Graph.from_dict(p.graph),
            {o.name: ({"d0": 32}, 1, "lx" if o.name != "softmax_1.div" else "hbm") for o in p.ops},
        )


def test_a_tiled_loop_keeps_intermediates_on_chip_and_beats_device_memory():
    hbm, tiled = simulate(big_softmax(None)), simulate(big_softmax(8))
    check_loops(big_softmax(8))
    assert tiled.time_us * 2 < hbm.time_us
    x = 8192 * 4096 * 2
    assert tiled.device_read_bytes == pytest.approx(2 * x, rel=0.01)  # the input, by max and by sub; nothing else
    assert tiled.device_write_bytes == pytest.approx(x, rel=0.01)
    assert hbm.device_read_bytes > 3 * x
    assert set(tiled.op_us) == {o.name for o in big_softmax(8).ops}


def test_more_tiles_cost_more_overhead():
    runs = {t: simulate(big_softmax(t)) for t in (8, 16, 32)}
    assert all(r.loops[0]["double_buffered"] for r in runs.values())
    times = [runs[t].time_us for t in (8, 16, 32)]
    assert times[0] < times[1] < times[2]
    barriers = [sum(b["barrier"] for b in runs[t].breakdown.values()) for t in (8, 16, 32)]
    assert barriers[1] == pytest.approx(2 * barriers[0]) and barriers[2] == pytest.approx(2 * barriers[1])


def test_double_buffering_follows_the_free_scratchpad():
    four, eight = simulate(big_softmax(4)).loops[0], simulate(big_softmax(8)).loops[0]
    cap = so.HardwareSpec().planner_lx_bytes
    for info in (four, eight):
        assert info["double_buffered"] == (cap - info["peak_lx_bytes"] >= 2 * info["streamed_bytes_per_tile"])
    assert not four["double_buffered"] and eight["double_buffered"]
    # the prefetch overlaps the iterations, but they share device memory: the loop moves 3 tiles (x by max and
    # by sub, the output) of 8 MiB per iteration, and cannot be faster than device memory carries them
    assert eight["exposed_prefetch_us"] < eight["prefetch_us"]
    assert eight["time_us"] < sum(eight["iteration_us"]) + eight["prefetch_us"]
    assert eight["time_us"] * 1e3 >= 8 * 3 * (8 << 20) / so.HardwareSpec().hbm_gbps_effective


def test_unstaged_invariant_operands_are_read_again_every_tile():
    staged, unstaged = simulate(sdpa_loop(staged=("k", "v"))), simulate(sdpa_loop(staged=()))
    per_read = 4 * 256 * 64 * 2  # k or v: each head served once, multicast to the 8 cores of its row split
    # unstaged, every tile reads v, and k twice (k^T is a view: each core reads its head, transposes it through
    # device memory, then the op reads it back, multicast); staged, each is read once, k through the DMA
    # transpose unit
    saved = 4 * (1 + 8 + 1) * per_read - 2 * per_read
    assert unstaged.device_read_bytes - staged.device_read_bytes == pytest.approx(saved, rel=0.01)
    assert staged.loops[0]["staged_us"] > 0 and unstaged.loops[0]["staged_us"] == 0
    assert staged.time_us < unstaged.time_us
    # on the device's machine (transposed on the way in), every unstaged tile reads v and k once each
    device = SimParams(transpose_on_read=True)
    staged, unstaged = simulate(sdpa_loop(staged=("k", "v")), device), simulate(sdpa_loop(staged=()), device)
    assert unstaged.device_read_bytes - staged.device_read_bytes == pytest.approx(4 * 2 * per_read - 2 * per_read, rel=0.01)


def test_the_accumulator_is_written_once():
    r = simulate(matmul_loop(tiles=8))
    assert r.device_write_bytes == 128 * 256 * 2
    # x and w once each: with 4-way m and n splits, 4 cores read each block of either, served once (multicast),
    # in the first tile and in every prefetched one alike
    assert r.device_read_bytes == pytest.approx((128 * 1024 + 1024 * 256) * 2, rel=0.01)


def test_staged_tensors_must_fit_beside_the_tiles():
    tight = mutate(sdpa_loop(), lambda d: d["hardware"].update(planner_fraction=0.03))
    with pytest.raises(PlanError, match="staged tensor 'v' of loop 0"):
        simulate(tight)
    with pytest.raises(PlanError, match="exceed the scratchpad capacity"):
        check_loops(tight)


def test_loop_plans_round_trip_and_simulate_deterministically():
    p = sdpa_loop()
    q = so.Plan.from_json(p.to_json())
    assert q == p and json.loads(q.to_json())["loops"][0]["staged"] == ["k", "v"]
    assert simulate(p).time_us == simulate(q).time_us


# ---- the Inductor adapter -----------------------------------------------------------
def test_the_inductor_record_reports_its_plans_loops():
    pytest.importorskip("torch")
    from spyreopt.integrations.inductor.records import CapturedGraph, Options

    p = sdpa_loop()
    buffers = {o.name: f"buf{i}" for i, o in enumerate(p.ops)}
    r = CapturedGraph("g0", "inference", Options(), so.Graph.from_dict(p.graph), p, buffers, {"matmul": 2})
    (loop,) = r.loops
    assert loop["ops"] == [o.name for o in p.ops] and loop["buffers"] == sorted(buffers.values())
    assert (loop["dim"], loop["tiles"], loop["staged"]) == ("m", 4, ["k", "v"])
    assert loop["footprint_bytes"] == p.loops[0].footprint_bytes
    assert "loop 0: 8 ops buf0..buf7 over m in 4 tiles" in r.summary()  # no origins: the Inductor buffers and "staged k, v" in r.summary()
    assert CapturedGraph("g1", "inference", Options()).loops == []


# ---- loops the planner makes ----------------------------------------------------------
def _pinned(g: so.Graph, dims: dict[str, str], tiles: int) -> so.Plan:
    return so.solve(
        g, backend="greedy", time_limit=10, pin={n: {"tiling": {"dim": d, "tiles": tiles}} for n, d in dims.items()}
    )


def _planner_loops():
    sm = so.workloads.get("softmax")
    yield "softmax", sm, dict.fromkeys(_ops(sm), "d0"), 4
    sw = so.workloads.get("swiglu")
    yield "swiglu", sw, {n: "m" if sw.ops[n].kind == "matmul" else "d0" for n in _ops(sw)}, 2
    at = so.workloads.get("sdpa")
    yield "sdpa", at, {n: "m" if at.ops[n].kind == "matmul" else "d2" for n in _ops(at)}, 4
    yield "sdpa heads", at, {n: "b1" if at.ops[n].kind == "matmul" else "d1" for n in _ops(at)}, 2
    km = so.workloads.get("ktiled_matmul", tokens=256, k=16384, n=256)
    yield "ktiled_matmul", km, {"act": "d1", "proj": "k"}, 8


@pytest.mark.parametrize("name,g,dims,tiles", list(_planner_loops()), ids=lambda x: x if isinstance(x, str) else "")
def test_planner_loops_validate_simulate_and_compute_the_reference(name, g, dims, tiles):
    p = _pinned(g, dims, tiles)
    assert [(sorted(lp.ops), lp.tiles) for lp in p.loops] == [(sorted(dims), tiles)]
    p.validate()
    r = simulate(p)
    assert r.loops[0]["tiles"] == tiles and set(r.op_us) == {o.name for o in p.ops}
    assert r.loops[0]["peak_lx_bytes"] >= p.loops[0].footprint_bytes
    check_execution(p, seed=6)


def test_the_planners_attention_loop_keeps_the_scores_on_chip_and_beats_the_untiled_plan():
    g = so.workloads.get("long_attention", heads=8, seq=2048, head_dim=64)
    assert 8 * 2048 * 2048 * 2 > 32 * so.HardwareSpec().planner_lx_bytes  # the scores exceed every scratchpad together
    dims = {n: "m" if g.ops[n].kind == "matmul" else "d2" for n in _ops(g)}
    tiled = _pinned(g, dims, 8)
    untiled = so.solve(g, backend="greedy", time_limit=10, forbid=("tiling",))
    tiled.validate()
    fast, slow = simulate(tiled), simulate(untiled)
    assert fast.time_us * 1.5 < slow.time_us
    scores = 8 * 2048 * 2048 * 2
    assert slow.device_write_bytes > scores > 3 * fast.device_write_bytes  # no score tile leaves the chip


def test_a_staged_tensor_produced_before_the_loop():
    g = so.Graph("stage")
    a = g.pointwise("tanh", g.input("w", (256, 512)), name="a")
    g.output(g.matmul(g.input("y", (1024, 256)), a, name="mm"))
    p = plan_for(g, {"a": ({"d0": 4}, 1, "lx"), "mm": ({"m": 4, "n": 4}, 1, "hbm")})
    staged, unstaged = (with_loop(p, ["mm"], {"mm": "m"}, 4, staged=s) for s in (["a"], []))
    check_loops(staged)
    check_execution(staged, seed=7)
    fast, slow = simulate(staged), simulate(unstaged)
    per_read = 256 * 512 * 2  # all of a: each column block served once, multicast to its 4 m-split cores
    assert slow.device_read_bytes - fast.device_read_bytes == pytest.approx(3 * per_read, rel=0.01)


def test_an_accumulator_must_fit_on_chip():
    p = matmul_loop(division={"m": 1, "n": 1})  # every core accumulates the whole 128 x 256 output: 64 KiB
    simulate(p)
    tight = mutate(p, lambda d: d["hardware"].update(planner_fraction=0.03))  # 60 KiB per core
    with pytest.raises(PlanError, match="accumulator of op 'mm' .* needs 65536 bytes"):
        simulate(tight)
    with pytest.raises(PlanError, match="exceed the scratchpad capacity"):
        check_loops(tight)


def test_inductor_options_forbid_capabilities():
    pytest.importorskip("torch")
    from spyreopt.errors import SolverError
    from spyreopt.integrations.inductor.hook import Session
    from spyreopt.integrations.inductor.records import CapturedGraph, Options

    assert Options.from_dict({"forbid": "tiling"}).forbid == ("tiling",)
    with pytest.raises(SolverError, match=r"cannot forbid \['loops'\]"):
        Options.from_dict({"forbid": ["loops"]})
    plans = {}
    for forbid in ((), ("inplace",)):
        record = CapturedGraph("g", "inference", Options.from_dict({"forbid": forbid}), so.workloads.get("softmax"))
        Session(record.options)._solve(record)
        plans[forbid] = record.plan
    assert any("lx" in o.residency for o in plans[()].ops)
    assert all(o.residency == "hbm" for o in plans[("inplace",)].ops)
