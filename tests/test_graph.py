"""Graph builder: shapes, decomposition, every GraphError, JSON round trip."""

import json

import pytest

import spyreopt as so
from spyreopt.errors import FormatError, GraphError


def test_softmax_decomposes_into_primitives():
    g = so.Graph("s")
    g.output(g.softmax(g.input("x", (4, 128)), name="sm"))
    kinds = [(o.kind, o.attrs.get("fn")) for o in g.ops.values()]
    assert kinds == [("reduce", "max"), ("pointwise", "sub"), ("pointwise", "exp"), ("reduce", "sum"), ("pointwise", "div")]
    assert g.tensors["sm.max"].shape == (4, 1)
    assert g.tensors["sm.div"].shape == (4, 128)


def test_layernorm_and_rmsnorm_decompose():
    g = so.Graph("n")
    x = g.input("x", (8, 64))
    g.output(g.layernorm(x, g.weight("g", (64,)), g.weight("b", (64,)), name="ln"))
    assert [o.attrs.get("fn") for o in g.ops.values()] == ["mean", "sub", "square", "mean", "rsqrt", "mul", "mul", "add"]
    g2 = so.Graph("r")
    g2.output(g2.rmsnorm(g2.input("x", (8, 64)), name="rms"))
    assert [o.attrs.get("fn") for o in g2.ops.values()] == ["square", "mean", "rsqrt", "mul"]


def test_batched_matmul_broadcasts_leading_dims():
    g = so.Graph("b")
    y = g.matmul(g.input("x", (16, 32)), g.weight("w", (4, 32, 8)))
    assert g.tensors[y].shape == (4, 16, 8)


def test_pointwise_broadcasting():
    g = so.Graph("p")
    y = g.pointwise("add", g.input("x", (3, 5)), g.weight("b", (5,)))
    assert g.tensors[y].shape == (3, 5)


def test_transpose_is_a_view():
    g = so.Graph("t")
    t = g.transpose(g.input("x", (2, 3, 4)))
    assert g.tensors[t].shape == (2, 4, 3) and g.ops[t].kind == "view"


@pytest.mark.parametrize(
    "build, needle",
    [
        (lambda g: g.matmul(g.input("a", (4, 8)), g.input("b", (9, 4)), name="mm"), "shape mismatch"),
        (lambda g: g.pointwise("add", g.input("a", (4, 8)), g.input("b", (3, 8)), name="add1"), "do not broadcast"),
        (lambda g: g.input("a", (4, 0)), "zero-size"),
        (lambda g: g.input("a", (4, 8), dtype="int4"), "unknown dtype"),
        (lambda g: g.pointwise("frobnicate", g.input("a", (4,))), "unknown pointwise"),
        (lambda g: g.reduce("argmax", g.input("a", (4,)), 0), "unknown reduction"),
        (lambda g: g.reduce("sum", g.input("a", (4,)), 3), "invalid for shape"),
        (lambda g: g.input("huge", (1 << 20, 1 << 20, 1 << 10)), "more than device memory"),
        (lambda g: g.pointwise("exp", "nope", name="e"), "unknown tensor 'nope'"),
        (lambda g: g.reshape(g.input("a", (4, 8)), (5, 7), name="rs"), "cannot reshape"),
        (lambda g: g.permute(g.input("a", (4, 8)), (0, 0), name="pm"), "not a permutation"),
    ],
)
def test_graph_errors_name_the_problem(build, needle):
    with pytest.raises(GraphError, match=needle):
        build(so.Graph("bad"))


def test_error_names_the_op():
    g = so.Graph("bad")
    with pytest.raises(GraphError, match="'mm'"):
        g.matmul(g.input("a", (4, 8)), g.input("b", (9, 4)), name="mm")


def test_no_outputs_is_an_error():
    g = so.Graph("bad")
    g.pointwise("exp", g.input("x", (4,)))
    with pytest.raises(GraphError, match="no outputs"):
        g.check()


def test_cycle_in_json_is_rejected():
    g = so.workloads.get("mlp")
    data = g.to_dict()
    # make 'up' read the output of 'down': a cycle (and a use before production)
    data["ops"][0]["inputs"][0] = "down"
    with pytest.raises(GraphError, match="unknown tensor 'down'"):
        so.Graph.from_dict(data)


@pytest.mark.parametrize("name", so.workloads.names())
def test_json_round_trip(name):
    g = so.workloads.get(name)
    text = g.to_json()
    assert so.Graph.from_json(text).to_json() == text


@pytest.mark.parametrize(
    "mutate, needle",
    [
        (lambda d: d.pop("ops"), "missing field 'ops'"),
        (lambda d: d["leaves"][0].update(shape=[4, -1]), "zero or negative"),
        (lambda d: d["leaves"][0].update(dtype="fp64"), "unknown dtype"),
        (lambda d: d["ops"][0].update(kind="conv"), "unknown op kind"),
        (lambda d: d["ops"][0].update(inputs="x"), "expected list"),
        (lambda d: d["ops"][0].update(shape=[1, 2]), "declared shape"),
        (lambda d: d["leaves"][0].update(role="bias"), "role"),
    ],
)
def test_bad_graph_json_is_a_typed_error(mutate, needle):
    data = so.workloads.get("mlp").to_dict()
    mutate(data)
    with pytest.raises((GraphError, FormatError), match=needle):
        so.Graph.from_json(json.dumps(data))
