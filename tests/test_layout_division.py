"""Stick padding, spans, divisions and every legality rule (each test fails if its rule is dropped)."""

import pytest

import spyreopt as so
from spyreopt.errors import PlanError
from spyreopt.model.candidates import OpCandidates
from spyreopt.model.division import enumerate_divisions, iteration_box, label, owners, parse_label
from spyreopt.model.edge_analysis import analyse_edge
from spyreopt.model.layout import contiguous_runs, num_sticks, padded_bytes, span_bytes
from spyreopt.model.opspace import op_space

HW = so.HardwareSpec()
COEF = so.Coefficients.load()


def cands(g, name, **kw):
    return OpCandidates(g, g.ops[name], HW, COEF, max_layouts=kw.pop("max_layouts", 1000), **kw)


def test_stick_padding_arithmetic():
    assert num_sticks(64, 2, 128) == 1 and num_sticks(65, 2, 128) == 2 and num_sticks(32, 4, 128) == 1
    assert num_sticks(1, 1, 128) == 1 and num_sticks(129, 1, 128) == 2
    # [3, 100] fp16 stick on dim 1: 100 elems -> 2 sticks of 64 -> 3 * 256 bytes
    assert padded_bytes((3, 100), 1, 2, 128) == 3 * 256
    # stick on dim 0: 3 elems -> 1 stick; 100 rows of it
    assert padded_bytes((3, 100), 0, 2, 128) == 100 * 128
    assert padded_bytes((7, 33), 1, 4, 128) == 7 * 2 * 128


def test_span_of_a_stick_split_is_contiguous_and_a_row_split_is_strided():
    shape = (1024, 1024)  # fp16, stick on dim 1 -> 16 tiles of [1024 rows x 64]
    cols = ((0, 1024), (0, 64))  # one tile
    rows = ((0, 64), (0, 1024))  # 64 rows of every tile
    assert span_bytes(cols, shape, 1, 2, 128) == 1024 * 128
    assert span_bytes(rows, shape, 1, 2, 128) == 15 * 1024 * 128 + 64 * 128


def test_contiguous_runs():
    whole = ((0, 8), (0, 128))  # fp16, 2 tiles of 8 rows
    assert contiguous_runs(whole, whole, 1, 2, 128) == 1
    assert contiguous_runs(((0, 4), (0, 128)), whole, 1, 2, 128) == 2  # half the rows in each of 2 tiles
    assert contiguous_runs(((0, 8), (0, 64)), whole, 1, 2, 128) == 1  # one whole tile


def _mm(m, k, n, dtype="fp16"):
    g = so.Graph("mm")
    g.output(g.matmul(g.input("a", (m, k), dtype), g.weight("b", (k, n), dtype), name="mm"))
    return g


def test_factors_split_the_stick_dim_in_whole_sticks():
    g = _mm(64, 64, 192)  # n = 192 fp16 = 3 sticks: 1, 3, or 2 uneven (2 + 1 sticks), never 4
    space = op_space(g, g.ops["mm"])
    divs = enumerate_divisions(space, (1, 64, 64), 32)
    assert {d.factors[1] for d in divs} == {1, 2, 3}
    assert [d.chunks[1] for d in divs if d.factors == (1, 2, 1)] == [128]
    with pytest.raises(PlanError, match="factor 4 on dim n leaves a part empty"):
        cands(g, "mm", fixed=((1, 4, 1), 1))
    g5 = _mm(64, 64, 320)  # 5 sticks: 4 parts of 2 sticks use only 3 cores
    with pytest.raises(PlanError, match="'mm': factor 4 on dim n leaves a part empty"):
        cands(g5, "mm", fixed=((1, 4, 1), 1))


def test_product_at_most_cores():
    g = _mm(256, 256, 4096)
    assert all(lay.division.cores <= HW.cores for lay in cands(g, "mm").layouts)
    with pytest.raises(PlanError, match="more than 32"):
        cands(g, "mm", fixed=((8, 8, 1), 1))


def test_at_most_one_reduction_split_and_reduce_never_splits_reduced_dim():
    g = so.Graph("r")
    g.output(g.reduce("sum", g.input("x", (64, 1024)), 1, name="r"))
    assert all(lay.division.factors[1] == 1 for lay in cands(g, "r").layouts)
    with pytest.raises(PlanError, match="reduced dim"):
        cands(g, "r", fixed=((1, 2), 1))


def test_span_limit_forces_a_k_split_on_the_big_matmul():
    g = so.workloads.get("big_matmul")
    layouts = cands(g, "mm").layouts
    assert layouts, "some division must be legal"
    for lay in layouts:
        assert lay.division.factors[2] > 1, lay.division  # every legal candidate splits k
    with pytest.raises(PlanError, match="span"):
        cands(g, "mm", fixed=((2, 16, 1), 1))


def test_span_limit_is_what_forbids_unsplit_k():
    g = so.workloads.get("big_matmul")
    roomy = HW.with_(span_limit_bytes=1 << 40)
    c = OpCandidates(g, g.ops["mm"], roomy, COEF, 1000)
    assert any(lay.division.factors[2] == 1 for lay in c.layouts)


def test_k_split_owners_hold_the_output():
    g = _mm(64, 256, 64)
    c = cands(g, "mm", fixed=((2, 1, 4), 1))
    space = c.space
    assert owners(space, c.layouts[0].division) == [0, 4]
    assert iteration_box(space, c.layouts[0].division, 5) == ((32, 64), (0, 64), (64, 128))


def _chain(producer_split, consumer_split):
    g = so.Graph("c")
    x = g.input("x", (256, 1024))
    y = g.pointwise("exp", x, name="p")
    g.output(g.pointwise("neg", y, name="c"))
    p = cands(g, "p", fixed=(producer_split, 1)).layouts[0]
    cc = cands(g, "c", fixed=(consumer_split, 1))
    c = cc.layouts[0]
    return analyse_edge(p, cc, c, 0, g.tensors["p"], HW, COEF)


def test_view_matching_equal_slices_are_in_place():
    ea = _chain((4, 8), (4, 8))
    assert ea.inplace


def test_view_matching_different_slices_are_not():
    ea = _chain((4, 8), (8, 4))
    assert not ea.inplace and ea.relayout_legal and ea.fan_in == 2  # 2 column blocks per row block


def test_view_matching_broadcast_read_is_not_in_place():
    g = so.Graph("b")
    x = g.input("x", (256, 1024))
    s = g.reduce("sum", x, 1, name="s")  # [256, 1]
    g.output(g.pointwise("div", x, s, name="d"))
    s_lay = cands(g, "s", fixed=((32, 1), 1)).layouts[0]
    rows_c, cols_c = cands(g, "d", fixed=((32, 1), 1)), cands(g, "d", fixed=((4, 8), 1))
    same_rows, split_cols = rows_c.layouts[0], cols_c.layouts[0]
    assert analyse_edge(s_lay, rows_c, same_rows, 1, g.tensors["s"], HW, COEF).inplace
    ea = analyse_edge(s_lay, cols_c, split_cols, 1, g.tensors["s"], HW, COEF)
    assert not ea.inplace  # 8 cores read the same rows: one buffer per core cannot serve them


def test_relayout_legality_destination_multiple_of_source():
    ea = _chain((4, 8), (2, 1))  # 32 source cores -> 2 destination cores
    assert not ea.relayout_legal and "multiple" in ea.why


def test_relayout_legality_fan_in():
    ea = _chain((1, 16), (16, 1))  # each destination row block gathers from 16 column blocks
    assert ea.fan_in == 16 and not ea.relayout_legal and "fan-in" in ea.why


def test_divisions_read_as_named_factors_in_tables_and_errors():
    assert label({"d0": 16, "d1": 2}) == "d0:16 x d1:2"
    assert label({"b": 16, "m": 1, "k": 2}) == "b:16 x k:2"
    assert label({"m": 1, "n": 1}) == "unsplit"
    plan = so.solve(so.workloads.get("softmax"), backend="greedy")
    table = plan.table()
    assert all(label(o.division) in table for o in plan.ops) and "d0:" in table
    g = so.workloads.get("mlp")
    with pytest.raises(PlanError, match=r"division m:8 x n:8 uses 64 cores"):
        cands(g, "up").checked_layout((8, 8, 1), 1)
    # pins take the same names
    assert parse_label("n:4 x k:2", ("m", "n", "k")) == (1, 4, 2) and parse_label("unsplit", ("m",)) == (1,)
    with pytest.raises(PlanError, match=r"'q:2' is not dim:factor over the dims \['m', 'n', 'k'\]"):
        parse_label("q:2", ("m", "n", "k"))
    plan = so.solve(so.Problem(g, fixed={"gelu": ("d0:2 x d1:8", 1, "hbm")}), backend="greedy")
    assert label(plan.op("gelu").division) == "d0:2 x d1:8"
