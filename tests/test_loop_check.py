"""Loop legality (model/check/loops.py): each rule has a plan that breaks only it, so a test
fails if the rule is dropped. Loop plans are made by hand from untiled plans
(``spyreopt.testing.loops.with_loop``), independently of the planner's loop choice."""

from __future__ import annotations

import json
from functools import cache

import pytest

import spyreopt as so
from spyreopt.errors import PlanError
from spyreopt.model.check.loops import check_loops
from spyreopt.solving.fixed import plan_for
from spyreopt.testing.loops import with_loop


def _compute(g: so.Graph) -> list[str]:
    return [o.name for o in g.compute_ops()]


@cache
def _softmax_base() -> str:
    g = so.workloads.get("softmax")
    return plan_for(g, {n: ({"d0": 32}, 1, "hbm" if n == "softmax.div" else "lx") for n in _compute(g)}).to_json()


SM = ["softmax.max", "softmax.sub", "softmax.exp", "softmax.sum", "softmax.div"]


def softmax_loop(ops=SM, dims=None, tiles=4, **kw) -> so.Plan:
    return with_loop(so.Plan.from_json(_softmax_base()), list(ops), dims or dict.fromkeys(ops, "d0"), tiles, **kw)


@cache
def _sdpa_base() -> str:
    g = so.workloads.get("sdpa")
    dec = {}
    for n in _compute(g):
        div = {"b1": 4, "m": 8} if g.ops[n].kind == "matmul" else {"d1": 4, "d2": 8}
        dec[n] = (div, 3, "hbm" if n == "context" else "lx")
    return plan_for(g, dec).to_json()


def sdpa_loop(staged=("k", "v"), tiles=4) -> so.Plan:
    g = so.workloads.get("sdpa")
    ops = _compute(g)
    dims = {n: "m" if g.ops[n].kind == "matmul" else "d2" for n in ops}
    return with_loop(so.Plan.from_json(_sdpa_base()), ops, dims, tiles, staged=staged)


@cache
def _swiglu_base() -> str:
    g = so.workloads.get("swiglu")
    dec = {n: ({"m": 8, "n": 4} if g.ops[n].kind == "matmul" else {"d0": 8, "d1": 4}, 1, "lx") for n in _compute(g)}
    dec["down"] = ({"m": 8, "n": 4}, 1, "hbm")
    return plan_for(g, dec).to_json()


def swiglu_loop(ops=("silu", "glu"), tiles=2) -> so.Plan:
    g = so.workloads.get("swiglu")
    dims = {n: "m" if g.ops[n].kind == "matmul" else "d0" for n in ops}
    return with_loop(so.Plan.from_json(_swiglu_base()), list(ops), dims, tiles)


def matmul_loop(tiles=4, accumulate=True, division=None) -> so.Plan:
    g = so.Graph("mm")
    g.output(g.matmul(g.input("x", (128, 1024)), g.weight("w", (1024, 256)), name="mm"))
    p = plan_for(g, {"mm": (division or {"m": 4, "n": 4}, 1, "hbm")})
    return with_loop(p, ["mm"], {"mm": "k"}, tiles, accumulate=accumulate)


def mutate(plan: so.Plan, fn) -> so.Plan:
    data = json.loads(plan.to_json())
    fn(data)
    return so.Plan.from_json(json.dumps(data))


def edge(data: dict, producer: str, consumer: str) -> dict:
    return next(e for e in data["edges"] if e["producer"] == producer and e["consumer"] == consumer)


def op(data: dict, name: str) -> dict:
    return next(o for o in data["ops"] if o["name"] == name)


def rejects(plan: so.Plan, match: str) -> None:
    with pytest.raises(PlanError, match=match):
        check_loops(plan)


@pytest.mark.parametrize(
    "make",
    [
        softmax_loop,
        sdpa_loop,
        lambda: sdpa_loop(staged=()),
        swiglu_loop,
        lambda: swiglu_loop(("gate", "up", "silu", "glu")),
        matmul_loop,
        lambda: matmul_loop(division={"m": 4, "n": 2, "k": 4}),
    ],  # fmt: skip
)
def test_the_fixtures_are_legal(make):
    check_loops(make())


def test_a_plan_without_loops_passes_and_validate_runs_the_loop_check():
    check_loops(so.Plan.from_json(_softmax_base()))
    bad = mutate(softmax_loop(), lambda d: d["loops"][0].update(tiles=1))
    with pytest.raises(PlanError, match="at least 2"):
        bad.validate()


def test_unknown_op():
    rejects(mutate(softmax_loop(), lambda d: d["loops"][0]["ops"].append("nope")), "'nope' is not in the graph")


def test_a_view_is_not_a_compute_op():
    def f(d):
        d["loops"][0]["ops"].insert(0, "k_t")
        d["loops"][0]["op_dims"]["k_t"] = "d2"

    rejects(mutate(sdpa_loop(), f), "'k_t' is a view, not a compute op")


def test_an_op_in_two_loops():
    p = softmax_loop()
    p.loops.append(p.loops[0])
    rejects(p, "already in loop 0")


def test_at_least_two_tiles():
    rejects(mutate(softmax_loop(), lambda d: d["loops"][0].update(tiles=1)), "1 tiles; a loop needs at least 2")


def test_dim_is_the_first_ops_tiled_dim():
    rejects(mutate(softmax_loop(), lambda d: d["loops"][0].update(dim="d1")), "differs from its first op's tiled dim")


def test_op_dims_cover_the_loop():
    rejects(mutate(softmax_loop(), lambda d: d["loops"][0]["op_dims"].pop("softmax.exp")), "op_dims names")


def test_schedule_order():
    rejects(mutate(softmax_loop(), lambda d: d["loops"][0]["ops"].reverse()), "not listed in schedule order")


def test_contiguous_in_the_schedule():
    ops = ["softmax.max", "softmax.sub", "softmax.exp", "softmax.div"]
    rejects(softmax_loop(ops=ops), r"not contiguous in the schedule: op\(s\) \['softmax.sum'\]")


def test_op_loop_names_its_loop():
    rejects(mutate(softmax_loop(), lambda d: op(d, "softmax.exp").update(loop=None)), "plan says loop None")
    rejects(mutate(swiglu_loop(), lambda d: op(d, "down").update(loop=0)), "'down': plan says loop 0")


def test_connected():
    rejects(swiglu_loop(("gate", "up")), r"\['up'\] are not connected")


def test_every_op_has_its_tiled_dim():
    rejects(
        mutate(softmax_loop(), lambda d: d["loops"][0]["op_dims"].update({"softmax.exp": "k"})),
        "not one of its iteration dims",
    )


def test_tiles_line_up_across_an_inner_edge():
    dims = {n: "d0" for n in SM} | {"softmax.exp": "d1"}
    rejects(softmax_loop(dims=dims), "'softmax.sub' -> 'softmax.exp': .* tiles dim 0 .* tiles its dim 1")


def test_a_consumer_reading_the_whole_of_a_tiled_tensor():
    dims = {n: "d0" for n in SM} | {"softmax.sub": "d1", "softmax.exp": "d1"}  # sub would read all of max
    rejects(softmax_loop(ops=SM, dims=dims), "operand 1 .* does not have")


def test_extent_divides_into_tiles_times_cores():
    rejects(softmax_loop(tiles=32), "extent 512 does not split into 32 tiles x 32 cores")


def test_tile_core_blocks_are_whole_sticks():
    rejects(softmax_loop(ops=["softmax.exp"], dims={"softmax.exp": "d1"}, tiles=32), "not whole sticks")
    check_loops(softmax_loop(ops=["softmax.exp"], dims={"softmax.exp": "d1"}, tiles=16))


def test_a_reduction_over_the_tiled_dim_needs_the_accumulator():
    rejects(matmul_loop(accumulate=False), "reduces over its tiled dim 'k' but the loop does not accumulate")


def test_an_accumulated_result_cannot_feed_the_same_loop():
    ops = ["softmax.exp", "softmax.sum", "softmax.div"]
    rejects(
        softmax_loop(ops=ops, dims=dict.fromkeys(ops, "d1"), tiles=2, accumulate=True), r"op\(s\) \['softmax.div'\]"
    )


def test_accumulate_without_a_reduction_is_a_wrong_claim():
    rejects(softmax_loop(accumulate=True), "no op reduces over its tiled dim")


def test_staged_tensors_are_invariant_inputs_of_the_loop():
    rejects(sdpa_loop(staged=("q",)), "staged tensor 'q' varies with the tile")
    rejects(sdpa_loop(staged=("scores",)), "'scores' is produced inside the loop")
    no_reader = mutate(swiglu_loop(), lambda d: d["loops"][0]["staged"].append("w_down"))
    rejects(no_reader, "'w_down' is read by no op of the loop")


def test_edges_entering_the_loop_come_from_device_memory():
    rejects(
        mutate(swiglu_loop(), lambda d: edge(d, "gate", "silu").update(mode="inplace")),
        "enters the loop with mode 'inplace'",
    )


def test_edges_leaving_the_loop_go_to_device_memory():
    rejects(
        mutate(swiglu_loop(), lambda d: edge(d, "glu", "down").update(mode="inplace")),
        "leaves the loop with mode 'inplace'",
    )


def test_the_loops_outputs_are_written_to_device_memory():
    rejects(mutate(swiglu_loop(), lambda d: op(d, "glu").update(residency="lx")), "'glu': its output leaves the loop")


def test_inner_edges_stay_on_chip():
    rejects(
        mutate(softmax_loop(), lambda d: edge(d, "softmax.sub", "softmax.exp").update(mode="hbm")),
        "inside the loop has mode 'hbm'",
    )
    rejects(
        mutate(softmax_loop(), lambda d: op(d, "softmax.sub").update(residency="hbm")),
        "'softmax.sub': its output feeds",
    )


def test_footprint_is_recomputed():
    p = softmax_loop()
    assert p.loops[0].footprint_bytes == 2 * 4 * 1024 * 2  # the exp tile read by div while sub's tile is live: 2 tiles
    rejects(
        mutate(p, lambda d: d["loops"][0].update(footprint_bytes=p.loops[0].footprint_bytes - 128)),
        "one iteration needs 16384",
    )


def test_a_relayout_copy_of_a_tile_counts_in_the_footprint():
    p = softmax_loop()

    def relayout(d):
        edge(d, "softmax.sub", "softmax.exp").update(mode="relayout", copy_address=65536, copy_bytes_per_core=8192)

    copy = 4 * 1024 * 2  # exp's 4 x 1024 block of sub's tile
    rejects(mutate(p, relayout), f"one iteration needs {p.loops[0].footprint_bytes + copy} bytes")


def test_staged_tensors_count_in_the_footprint():
    kv = 2 * 256 * 64 * 2  # k and v of one head per core, fp16
    assert sdpa_loop().loops[0].footprint_bytes == sdpa_loop(staged=()).loops[0].footprint_bytes + kv


def test_the_accumulator_counts_in_the_footprint():
    assert matmul_loop().loops[0].footprint_bytes == 32 * 64 * 2  # one core's 32x64 block of the output


def test_footprint_fits_the_scratchpad():
    rejects(
        mutate(softmax_loop(), lambda d: d["hardware"].update(planner_fraction=0.005)), "exceed the scratchpad capacity"
    )


def test_buffers_live_across_the_loop_leave_it_room():
    p = swiglu_loop()
    cap = so.HardwareSpec.from_dict(p.hardware).planner_lx_bytes
    room = cap - p.loops[0].footprint_bytes

    def big_up(d, size):  # every other buffer dies before the loop; "up" lives across it
        for t in d["tensors"]:
            t["lifetime"] = [0, 1]
        t = next(t for t in d["tensors"] if t["name"] == "up")
        t.update(bytes_per_core=size, lifetime=[1, 4], address=t["address"] if t["address"] is not None else 0)

    check_loops(mutate(p, lambda d: big_up(d, room)))
    rejects(mutate(p, lambda d: big_up(d, room + 128)), f"at op 'silu' the loop holds .* {room + 128} bytes of other")


@cache
def _planner_softmax() -> str:
    """The planner's loop over the softmax: its divisions differ between ops, so tiles pass by relayout."""
    g = so.workloads.get("softmax")
    return so.solve(
        g, backend="greedy", time_limit=10, pin={n: {"tiling": {"dim": "d0", "tiles": 4}} for n in SM}
    ).to_json()


def test_in_place_needs_every_core_to_hold_the_block_it_reads():
    p = so.Plan.from_json(_planner_softmax())
    check_loops(p)
    assert edge(json.loads(p.to_json()), "softmax.max", "softmax.sub")["mode"] == "relayout"

    def in_place(d):
        edge(d, "softmax.max", "softmax.sub").update(mode="inplace", copy_address=None, copy_bytes_per_core=0)

    rejects(mutate(p, in_place), r"'softmax.max' -> 'softmax.sub' in place: core \d+ reads block")


def test_a_relayout_of_a_tile_respects_the_fan_in():
    p = so.Plan.from_json(_planner_softmax())
    rejects(mutate(p, lambda d: d["hardware"].update(relayout_fan_in=1)), r"from [2-8] cores, above the fan-in limit 1")


def test_in_place_keeps_the_stick():
    g = so.Graph("pair")
    g.output(g.pointwise("neg", g.pointwise("exp", g.input("x", (4096, 256)), name="e"), name="n"))
    p = plan_for(g, {"e": ({"d1": 4}, 1, "lx"), "n": ({"d1": 4}, 1, "hbm")})
    lp = with_loop(p, ["e", "n"], {"e": "d0", "n": "d0"}, 2)
    check_loops(lp)
    rejects(mutate(lp, lambda d: op(d, "n").update(stick=0)), "reads 'e' with stick dim 0, it is stored with 1")


def test_a_tensor_entering_the_loop_was_written_to_device_memory():
    g = so.Graph("stage")
    a = g.pointwise("tanh", g.input("w", (256, 512)), name="a")
    g.output(g.matmul(g.input("y", (1024, 256)), a, name="mm"))
    p = plan_for(g, {"a": ({"d0": 4}, 1, "lx"), "mm": ({"m": 4, "n": 4}, 1, "hbm")})
    lp = with_loop(p, ["mm"], {"mm": "m"}, 2, staged=["a"])
    check_loops(lp)
    assert lp.op("a").residency == "lx+hbm"

    def on_chip_only(d):
        op(d, "a")["residency"] = next(t for t in d["tensors"] if t["name"] == "a")["residency"] = "lx"

    rejects(mutate(lp, on_chip_only), "enters the loop from device memory, but op 'a' keeps 'a' in scratchpad only")
