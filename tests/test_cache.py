"""Plan cache: canonical keys, the on-disk store, relabelling on a hit, and repeated-layer decomposition."""

from __future__ import annotations

import dataclasses
import json
import pickle
import random
from concurrent.futures import ProcessPoolExecutor

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import spyreopt as so
from spyreopt.cache import PlanCache, problem_key
from spyreopt.cache.key import canonical_graph
from spyreopt.costmodel.coefficients import default
from spyreopt.errors import SolverError
from spyreopt.solving.segments import Schedule, cut_points, split

# ---- graphs built from a name-free spec, under any names and leaf order ---------------------------

DIMS = st.sampled_from([32, 64, 128, 256])


@st.composite
def specs(draw):
    """A small graph as data: input dims, dtype, and a chain of ops (matmuls carry their own n)."""
    kinds = draw(st.lists(st.sampled_from(["matmul", "gelu", "add_input", "sum", "softmax"]), min_size=1, max_size=4))
    return {
        "rows": draw(DIMS),
        "cols": draw(DIMS),
        "dtype": draw(st.sampled_from(["fp16", "bf16", "fp32"])),
        "ops": [[k, draw(DIMS)] for k in kinds],
    }


def build(spec: dict, prefix: str = "", leaf_order_seed: int = 0) -> so.Graph:
    """The spec's graph; ``prefix`` renames every op and tensor, the seed permutes leaf creation."""
    g = so.Graph(f"{prefix}graph")
    dt = spec["dtype"]
    shapes, cols = [], spec["cols"]
    for kind, n in spec["ops"]:
        if kind == "matmul":
            shapes.append((cols, n))
            cols = n
        elif kind == "sum":
            cols = 1
    order = list(range(len(shapes)))
    random.Random(leaf_order_seed).shuffle(order)
    weights = {}
    for j in order:
        weights[j] = g.weight(f"{prefix}w{j}", shapes[j], dt)
    x0 = g.input(f"{prefix}x", (spec["rows"], spec["cols"]), dt)
    x, mm = x0, 0
    for i, (kind, _) in enumerate(spec["ops"]):
        name = f"{prefix}op{i}"
        if kind == "matmul":
            x = g.matmul(x, weights[mm], name=name)
            mm += 1
        elif kind == "add_input" and g.tensors[x].shape == g.tensors[x0].shape:
            x = g.pointwise("add", x, x0, name=name)
        elif kind in ("gelu", "add_input"):  # an add whose shapes differ becomes a gelu
            x = g.pointwise("gelu", x, name=name)
        elif kind == "softmax":
            x = g.softmax(x, name=name)
        else:
            x = g.reduce("sum", x, -1, name=name)
    g.output(x if g.tensors[x].producer else g.pointwise("copy", x, name=f"{prefix}copy"))
    return g


def key(g, backend="greedy", hw=None, coef=None, **opts):
    opts.setdefault("time_limit", 10.0)
    opts.setdefault("seed", 0)
    return problem_key(g, backend, hardware=hw, coefficients=coef, **opts)


HW_FIELDS = [f.name for f in dataclasses.fields(so.HardwareSpec) if f.name != "name"]
COEF_FIELDS = [f.name for f in dataclasses.fields(so.Coefficients)]


def changed_hw(field: str) -> so.HardwareSpec:
    hw = so.HardwareSpec()
    value = getattr(hw, field)
    if field == "planner_fraction":
        return hw.with_(planner_fraction=value / 2)
    if field == "program_reserve_bytes":
        return hw.with_(program_reserve_bytes=value // 2)
    return hw.with_(**{field: value * 2})


@settings(max_examples=40, deadline=None)
@given(spec=specs(), seed=st.integers(0, 1000))
def test_key_equal_for_renamed_and_reordered_leaves(spec, seed):
    a, b = build(spec), build(spec, prefix="renamed.", leaf_order_seed=seed)
    assert a.to_dict() != b.to_dict() or not spec["ops"]
    assert key(a) == key(b)


@settings(max_examples=40, deadline=None)
@given(spec=specs(), data=st.data())
def test_key_differs_when_anything_planned_on_differs(spec, data):
    base = key(build(spec))
    what = data.draw(st.sampled_from(["shape", "dtype", "hardware", "coefficient", "option", "backend"]))
    if what == "shape":
        mutated = json.loads(json.dumps(spec))
        slot = data.draw(
            st.sampled_from(["rows", "cols"] + [i for i, (k, _) in enumerate(spec["ops"]) if k == "matmul"])
        )
        if isinstance(slot, str):
            mutated[slot] = mutated[slot] * 2
        else:
            mutated["ops"][slot][1] *= 2
        other = key(build(mutated))
    elif what == "dtype":
        other = key(build({**spec, "dtype": "fp8" if spec["dtype"] != "fp8" else "fp16"}))
    elif what == "hardware":
        other = key(build(spec), hw=changed_hw(data.draw(st.sampled_from(HW_FIELDS))))
    elif what == "coefficient":
        coef = default()
        name = data.draw(st.sampled_from(COEF_FIELDS))
        other = key(build(spec), coef=dataclasses.replace(coef, **{name: getattr(coef, name) * 1.5 + 0.1}))
    elif what == "option":
        opt = data.draw(st.sampled_from([{"time_limit": 11.0}, {"seed": 1}, {"restarts": 3}]))
        other = key(build(spec), **opt)
    else:
        other = key(build(spec), backend="cpsat")
    assert other != base


def test_key_ignores_hardware_label_and_number_spelling():
    g = so.workloads.get("mlp")
    assert key(g) == key(g, hw=so.HardwareSpec(name="lab-board")) == key(g, time_limit=10)
    assert key(g) == key(g, hw=so.HardwareSpec(cores=32.0))


def test_key_differs_for_a_different_schedule_of_the_same_ops():
    def two_branches(first: str) -> so.Graph:
        g = so.Graph("g")
        x = g.input("x", (64, 128))
        out = {}
        for fn in (first, "relu" if first == "gelu" else "gelu"):
            out[fn] = g.pointwise(fn, x, name=fn)
        g.output(g.pointwise("add", out["gelu"], out["relu"], name="add"))
        return g

    assert key(two_branches("gelu")) != key(two_branches("relu"))


def test_unhashable_option_is_a_clear_error():
    with pytest.raises(SolverError, match="cannot be part of a plan-cache key"):
        key(so.workloads.get("mlp"), hint=object())


def test_canonical_names_cover_every_op_and_tensor():
    g = so.workloads.get("sdpa")
    c = canonical_graph(g)
    assert set(c.op_names) == set(g.ops) and set(c.tensor_names) == set(g.tensors)
    assert len(set(c.op_names.values())) == len(g.ops) and len(set(c.tensor_names.values())) == len(g.tensors)


# ---- the store ------------------------------------------------------------------------------------


def test_hit_returns_the_same_plan_and_counts(tmp_path):
    g = so.workloads.get("mlp")
    with PlanCache(tmp_path) as cache:
        first = so_solve(g, cache)
        second = so_solve(g, cache)
        assert first.stats["timing"]["cache"]["hit"] is False and second.stats["timing"]["cache"]["hit"] is True
        assert second.to_json() == first.to_json() == so.solve(g, backend="greedy").to_json()
        stats = cache.stats()
        assert (stats.hits, stats.misses, stats.entries) == (1, 1, 1) and stats.bytes > 0
        so_solve(g, cache, seed=1)  # another option: another entry
        assert cache.stats().entries == 2 and cache.stats().misses == 2
        assert cache.clear() == 2
        assert cache.stats().as_dict() == {
            "hits": 0,
            "misses": 0,
            "stale": 0,
            "entries": 0,
            "bytes": cache.stats().bytes,
        }


def so_solve(g, cache, **kw):
    return so.solve(g, "greedy", cache=cache, **kw)


def test_hit_is_relabelled_to_the_callers_names(tmp_path):
    spec = {"rows": 128, "cols": 256, "dtype": "fp16", "ops": [["matmul", 1024], ["gelu", 0], ["matmul", 256]]}
    a, b = build(spec), build(spec, prefix="other.", leaf_order_seed=3)
    with PlanCache(tmp_path) as cache:
        so_solve(a, cache)
        plan = so_solve(b, cache)
        assert plan.stats["timing"]["cache"]["hit"] is True
    plan.validate()
    assert plan.graph == b.to_dict()
    names = {o.name for o in plan.ops} | {t.name for t in plan.tensors} | {e.consumer for e in plan.edges}
    assert names and all(n.startswith("other.") for n in names)
    assert plan.to_json() == so.solve(b, backend="greedy").to_json()


def test_a_directory_path_works_and_is_shared(tmp_path):
    g = so.workloads.get("softmax")
    so_solve(g, str(tmp_path))
    plan = so_solve(g, tmp_path)
    assert plan.stats["timing"]["cache"]["hit"] is True
    with PlanCache(tmp_path) as cache:  # a cache sent to a worker reopens the same directory
        copy = pickle.loads(pickle.dumps(cache))
        assert copy.directory == cache.directory and len(copy) == len(cache) == 1
        copy.close()


def test_stale_entry_is_dropped_and_solved_again(tmp_path):
    g = so.workloads.get("mlp")
    with PlanCache(tmp_path) as cache:
        plan = so_solve(g, cache)
        k = plan.stats["timing"]["cache"]["key"]
        data = cache.get_canonical(k)
        data["cost_us"] += 1.0  # as if the cost model had changed since it was stored
        cache.put_canonical(k, data)
        again = so_solve(g, cache)
        assert again.stats["timing"]["cache"]["hit"] is False and again.to_json() == plan.to_json()
        assert cache.stats().stale == 1


def _solve_in_process(args):
    name, directory = args
    plan = so.solve(so.workloads.get(name), "greedy", cache=directory)
    return plan.stats["timing"]["cache"]["hit"], plan.to_json()


def test_concurrent_processes_share_one_cache(tmp_path):
    jobs = [(name, str(tmp_path)) for name in ["softmax", "mlp", "rmsnorm"] * 4]
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(_solve_in_process, jobs))
    by_name: dict[str, set] = {}
    for (name, _), (_, text) in zip(jobs, results):
        by_name.setdefault(name, set()).add(text)
    assert all(len(texts) == 1 for texts in by_name.values())
    with PlanCache(tmp_path) as cache:
        stats = cache.stats()
    assert stats.entries == 3 and stats.hits + stats.misses == len(jobs) and stats.hits >= len(jobs) - 6


# ---- decomposition of repeated layers -------------------------------------------------------------


@pytest.fixture(scope="module")
def stack():
    return so.workloads.get("layer_stack", layers=4)


def test_cuts_include_the_residual_stream_between_layers(stack):
    hw, coef = so.HardwareSpec(), default()
    cuts = cut_points(stack, hw, coef)
    per_layer = len(Schedule(stack).ops) // 4
    assert {per_layer, 2 * per_layer, 3 * per_layer} <= set(cuts)
    crossing = Schedule(stack).crossing()
    assert all(len(crossing[c]) <= 1 for c in cuts)


def test_split_cuts_whole_layers_and_leaves_unrepeated_graphs_whole(stack):
    hw, coef = so.HardwareSpec(), default()
    per_layer = len(Schedule(stack).ops) // 4
    assert [(s.start, s.stop) for s in split(stack, hw, coef)] == [
        (i * per_layer, (i + 1) * per_layer) for i in range(4)
    ]
    for name in so.workloads.names():
        g = so.workloads.get(name)
        assert len(split(g, hw, coef)) == 1, name


def test_decomposed_plan_reuses_layers_validates_and_fixes_boundaries(stack, tmp_path):
    plan = so.solve(stack, "greedy", decompose="layers")
    d = plan.stats["decomposition"]
    # every layer maps [1, S, E] to [1, S, E]: one distinct segment, solved once and reused three times
    assert (d["segments"], d["distinct"], d["reused"]) == (4, 1, 3)
    assert plan.stats["timing"]["decomposition"] == {"solved": 1, "cache_hits": 0, "seconds": plan.solve_seconds}
    plan.validate()
    assert plan.status == "feasible" and plan.bound_us is None
    assert d["segments_cost_us"] == pytest.approx(plan.cost_us, abs=1e-3)
    for _, tensors in d["cuts"]:
        (t,) = tensors
        tp = plan.tensor(t)
        assert tp.residency == "hbm" and tp.stick == len(stack.tensors[t].shape) - 1
    for i in (0, 2, 3):  # every layer has the decisions of layer 1
        for o in plan.ops:
            if o.name.startswith("l1."):
                twin = plan.op(f"l{i}." + o.name[3:])
                assert (twin.division, twin.stick, twin.residency) == (o.division, o.stick, o.residency)
    full = so.solve(stack, backend="greedy")
    assert plan.cost_us <= full.cost_us * 1.1  # the hbm boundary costs little here
    with PlanCache(tmp_path) as cache:
        cold = so.solve(stack, "greedy", decompose="layers", cache=cache)
        warm = so.solve(stack, "greedy", decompose="layers", cache=cache)
    assert cold.stats["timing"]["decomposition"]["solved"] == 1
    assert warm.stats["timing"]["decomposition"]["solved"] == 0
    assert warm.stats["timing"]["decomposition"]["cache_hits"] == 1
    assert warm.to_json() == cold.to_json() == plan.to_json()


def test_decompose_on_a_graph_without_repeats_is_the_plain_solve():
    g = so.workloads.get("mlp")
    plan = so.solve(g, "greedy", decompose="layers")
    assert plan.stats["decomposition"]["segments"] == 1
    assert plan.ops == so.solve(g, backend="greedy").ops


def test_bad_decompose_value():
    with pytest.raises(SolverError, match="decompose"):
        so.solve(so.workloads.get("mlp"), decompose="heads")


# ---- command line ---------------------------------------------------------------------------------


def run_cli(argv):
    from spyreopt.cli import main

    return main(argv)


def test_cli_stats_and_clear(tmp_path, capsys):
    so_solve(so.workloads.get("softmax"), tmp_path)
    assert run_cli(["cache", "stats", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "entries 1" in out and "misses 1" in out
    assert run_cli(["cache", "clear", "--dir", str(tmp_path)]) == 0
    assert "cleared 1" in capsys.readouterr().out
    with PlanCache(tmp_path) as cache:
        assert cache.stats().entries == 0


def test_solve_takes_cache_and_decompose(tmp_path):
    g = so.workloads.get("softmax")
    first = so.solve(g, backend="greedy", cache=tmp_path)
    second = so.solve(g, backend="greedy", cache=str(tmp_path))
    assert second.stats["timing"]["cache"]["hit"] and second.to_json() == first.to_json()
    assert so.solve(g, decompose="layers").stats["decomposition"]["segments"] == 1


def test_cli_stats_of_a_missing_directory_is_an_error(tmp_path, capsys):
    assert run_cli(["cache", "stats", "--dir", str(tmp_path / "nope")]) == 2
    assert "no such cache directory" in capsys.readouterr().err


def views_and_outputs_stack(layers: int) -> so.Graph:
    """Identical layers whose boundary tensor is also a graph output and is read through transposes."""
    g = so.Graph("views")
    x = g.input("x", (64, 128))
    for i in range(layers):
        a = g.matmul(x, g.weight(f"w{i}", (128, 128)), name=f"l{i}.a")
        u = g.matmul(g.transpose(x, name=f"l{i}.xt"), g.weight(f"v{i}", (64, 64)), name=f"l{i}.u")
        x = g.pointwise(
            "add", g.pointwise("gelu", a, name=f"l{i}.gelu"), g.transpose(u, name=f"l{i}.ut"), name=f"l{i}.out"
        )
        g.output(x)
    return g


def test_decompose_with_views_across_cuts_and_intermediate_outputs():
    g = views_and_outputs_stack(3)
    plan = so.solve(g, backend="greedy", decompose="layers")
    d = plan.stats["decomposition"]
    assert (d["segments"], d["distinct"]) == (3, 1)
    plan.validate()
    for i in range(3):
        assert plan.tensor(f"l{i}.out").residency == "hbm" and plan.tensor(f"l{i}.out").stick == 1
