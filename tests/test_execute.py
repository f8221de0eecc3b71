"""Numeric execution: every plan computes the reference on per-core slices, and a plan
that moves the wrong slice computes wrong numbers."""

from __future__ import annotations

from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spyreopt as so
from spyreopt.errors import GraphError, PlanError
from spyreopt.hw.execute import check_execution, execute, reference
from spyreopt.hw.sim_numpy import POINTWISE, random_inputs
from spyreopt.hw.sim_sticks import decode, encode
from spyreopt.hw.simulator import simulate
from spyreopt.model.candidates import OpCandidates
from spyreopt.model.graph_parts import POINTWISE_FNS
from spyreopt.model.layout import _address
from spyreopt.solving.fixed import plan_for
from spyreopt.testing import strategies as sst

# big_matmul at full size is 1.5 GB of float32: execute a scaled copy whose span limit
# (256 KiB = half of A, as 256 MB is half of the full A) still forces the k split
BIG = {"m": 256, "k": 1024, "n": 512}
BIG_HW = so.HardwareSpec().with_(span_limit_bytes=256 * 1024)


def workload(name: str) -> tuple[so.Graph, so.HardwareSpec | None]:
    if name == "big_matmul":
        return so.workloads.get(name, **BIG), BIG_HW
    return so.workloads.get(name), None


@cache
def _plan_json(name: str) -> str:
    g, hw = workload(name)
    return so.solve(g, backend="greedy", time_limit=1, hardware=hw).to_json()


def plan(name: str) -> so.Plan:
    return so.Plan.from_json(_plan_json(name))


@pytest.mark.parametrize("name", so.workloads.names())
def test_every_greedy_plan_computes_the_reference(name):
    p = plan(name)
    errors = check_execution(p, seed=1)
    assert set(errors) == set(so.Graph.from_dict(p.graph).outputs)
    assert all(e <= 1e-3 for e in errors.values())


def test_scaled_big_matmul_keeps_the_k_split():
    g, hw = workload("big_matmul")
    cands = OpCandidates(g, g.ops["mm"], hw, so.Coefficients.load(), max_layouts=1000)
    assert cands.layouts and all(lay.division.factors[2] >= 2 for lay in cands.layouts)
    assert plan("big_matmul").op("mm").division["k"] >= 2


def test_execute_honours_given_inputs():
    p = plan("mlp")
    g = so.Graph.from_dict(p.graph)
    inputs = random_inputs(g, seed=7)
    got = so.execute(p, inputs)
    want = reference(g, inputs)
    np.testing.assert_allclose(got["down"], want["down"], rtol=1e-4, atol=1e-5)
    assert not np.allclose(execute(p, seed=8)["down"], got["down"])
    with pytest.raises(GraphError, match=r"input 'x': value has shape \(2, 2\)"):
        execute(p, dict(inputs, x=np.zeros((2, 2))))
    with pytest.raises(GraphError, match=r"no value for input\(s\) \['w2'\]"):
        execute(p, {k: v for k, v in inputs.items() if k != "w2"})


def softmax_plan() -> so.Plan:
    """Softmax with every op on a 32-way row split: every edge in place."""
    lx = ({"d0": 32}, 1, "lx")
    names = ("softmax.max", "softmax.sub", "softmax.exp", "softmax.sum")
    return plan_for(so.workloads.get("softmax"), {**dict.fromkeys(names, lx), "softmax.div": ({"d0": 32}, 1, "hbm")})


def test_altered_division_computes_wrong_numbers():
    p = softmax_plan()
    check_execution(p)
    # sub's slices change, the plan's edges and buffers do not: each core now wants 32 rows of the row
    # maxima where 16 are, and writes its slice in a shape the consumers misread
    p.op("softmax.sub").division = {"d0": 16, "d1": 2}
    with pytest.raises(PlanError, match="output 'softmax.div' differs from the reference"):
        check_execution(p)
    with pytest.raises(PlanError, match="op 'softmax.sub' at step 1, core 0: reads tensor 'softmax.max' in place"):
        simulate(p)


def test_dropped_relayout_computes_wrong_numbers():
    g = so.Graph("pair")
    y = g.pointwise("exp", g.input("x", (256, 512)), name="p")
    g.output(g.pointwise("neg", y, name="c"))
    p = plan_for(g, {"p": ({"d0": 32}, 1, "lx"), "c": ({"d0": 4, "d1": 8}, 1, "hbm")})
    check_execution(p)
    e = p.edges[0]
    assert e.mode == "relayout"
    e.mode, e.copy_address = "inplace", None
    with pytest.raises(PlanError, match="differs from the reference"):
        check_execution(p)


def test_overlapping_buffers_corrupt_values():
    p = softmax_plan()
    check_execution(p)
    # exp is read again by div (step 4); sum (step 3) now writes over it
    p.tensor("softmax.sum").address = p.tensor("softmax.exp").address
    with pytest.raises(PlanError, match="output 'softmax.div' differs from the reference"):
        check_execution(p)
    with pytest.raises(PlanError, match="writing tensor 'softmax.sum' .* overwrites live tensor 'softmax.exp'"):
        simulate(p)


def test_spill_and_device_memory_paths():
    g = so.Graph("spill")
    y = g.pointwise("exp", g.input("x", (128, 256)), name="p")
    z = g.pointwise("neg", y, name="c")
    g.output(g.pointwise("add", y, z, name="o"))
    # 32 producer cores cannot relayout onto 16 consumer cores: the tensor spills
    p = plan_for(g, {"p": ({"d0": 32}, 1, "lx+hbm"), "c": ({"d0": 16}, 1, "hbm"), "o": ({"d0": 32}, 1, "hbm")})
    modes = {(e.consumer, e.tensor): e.mode for e in p.edges}
    assert modes[("c", "p")] == "spill" and modes[("o", "c")] == "hbm" and modes[("o", "p")] == "inplace"
    check_execution(p)
    simulate(p)


def test_restickify_path():
    g = so.Graph("restick")
    y = g.pointwise("exp", g.input("x", (256, 512)), name="p")
    g.output(g.pointwise("neg", y, name="c"))
    p = plan_for(g, {"p": ({"d0": 32}, 1, "lx"), "c": ({"d0": 4, "d1": 8}, 0, "hbm")})
    assert p.edges[0].mode == "restickify"
    check_execution(p)


def test_reshape_and_views():
    g = so.Graph("rv")
    x = g.input("x", (64, 128))
    y = g.pointwise("exp", x, name="e")
    r = g.reshape(y, (32, 256), name="r")
    t = g.transpose(r, name="t")
    g.output(g.matmul(t, g.weight("w", (32, 64)), name="mm"))
    p = so.solve(g, time_limit=1)
    check_execution(p)


def test_reference_semantics():
    assert set(POINTWISE) == POINTWISE_FNS
    g = so.workloads.get("softmax", rows=8, cols=64)
    out = reference(g)["softmax.div"]
    np.testing.assert_allclose(out.sum(axis=-1), 1.0, rtol=1e-5)
    b = so.Graph("bmm")
    a = b.input("a", (3, 4, 8))
    w = b.weight("w", (8, 5))
    b.output(b.matmul(a, w, name="mm"))
    inputs = random_inputs(b, 0)
    np.testing.assert_allclose(reference(b, inputs)["mm"], inputs["a"] @ inputs["w"], rtol=1e-6)
    u = so.Graph("u")
    u.output(u.pointwise("pow", u.input("x", (2, 64)), name="bad"))
    with pytest.raises(GraphError, match="'pow' takes 2..2 operands, got 1"):
        reference(u)


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    data=st.data(),
    eps=st.sampled_from([4, 8, 32]),
)
def test_stick_encoding_round_trips(shape, data, eps):
    stick = data.draw(st.integers(0, len(shape) - 1))
    values = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    rows = encode(values, stick, eps)
    assert rows.shape == (-(-shape[stick] // eps) * int(np.prod(shape)) // shape[stick], eps)
    np.testing.assert_array_equal(decode(rows, tuple(shape), stick, eps), values)
    # the same order as the device layout's byte addresses (model.layout)
    elem = 128 // eps
    for index in [tuple(0 for _ in shape), tuple(d - 1 for d in shape), tuple(d // 2 for d in shape)]:
        addr = _address(index, tuple(shape), stick, elem, 128)
        assert rows[addr // 128, (addr % 128) // elem] == values[index]


@settings(max_examples=25, deadline=None)
@given(problem=sst.problems(max_ops=5, max_dim=192))
def test_generated_problems_simulate_and_compute_the_reference(problem):
    p = so.solve(problem, backend="greedy", time_limit=1)  # never InfeasibleError: an all-hbm plan always fits
    assert simulate(p).time_us > 0
    check_execution(p)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["anneal", "cpsat", "milp"])
@pytest.mark.parametrize("name", so.workloads.names())
def test_every_backend_plan_computes_the_reference(backend, name):
    g, hw = workload(name)
    p = so.solve(g, backend=backend, time_limit=5, hardware=hw)
    check_execution(p)
