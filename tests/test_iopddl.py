"""IOPDDL: the contest evaluator, the loader against it, malformed inputs, exact reductions, the CLI."""

from __future__ import annotations

import argparse
import copy
import gzip
import itertools
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from spyreopt.errors import FormatError
from spyreopt.formats.iopddl import (
    best_known,
    evaluate_iopddl,
    load_iopddl,
    read_instance,
    read_json,
    save_solution,
    validate,
)
from spyreopt.model.formulation import Affine, Edge, Formulation, MaxTerm, Node, Placement
from spyreopt.solvers.presolve import reduce_formulation
from spyreopt.solvers.registry import solve_formulation
from spyreopt.testing.formulations import iopddl_document, random_formulation

BENCH = Path(__file__).parent / "data" / "iopddl"  # vendored (tests/data/SOURCE.md): a missing file fails the tests
INSTANCES = [BENCH / f"asplos-2025-iopddl-{name}.json.gz" for name in "BG"]
BIG = 10**18


doc = iopddl_document


# ---- the evaluator on hand-made instances -----------------------------------
def test_parallel_edges_all_count_and_row_major_index():
    d = doc(
        [(0, 1), (0, 1)],
        [[1, 2], [10, 20, 30]],
        [[0, 0], [0, 0, 0]],
        edge_nodes=[(0, 1), (0, 1), (1, 0)],
        edge_costs=[[100, 200, 300, 400, 500, 600], [1000, 2000, 3000, 4000, 5000, 6000], [7, 8, 9, 10, 11, 12]],
    )
    # node 0 takes 1, node 1 takes 2: first edge index 1*3+2, reversed edge index 2*2+1
    cost, feasible, details = evaluate_iopddl(d, [1, 2])
    assert details["node_cost"] == 2 + 30
    assert details["edge_cost"] == 600 + 6000 + 12
    assert (cost, feasible) == (32 + 6612, True)
    assert load_iopddl(d).evaluate([1, 2]) == cost


def test_usage_limit_at_interval_boundary():
    # half-open: [0, 2) and [2, 4) never overlap, so 5 + 5 is never live at once
    d = doc([(0, 2), (2, 4)], [[0], [0]], [[5], [5]], limit=5)
    cost, feasible, details = evaluate_iopddl(d, [0, 0])
    assert feasible and details["peak_usage"] == 5 and details["steps_over_limit"] == []
    # [0, 3) and [2, 4) overlap exactly at step 2
    d = doc([(0, 3), (2, 4)], [[0], [0]], [[5], [5]], limit=9)
    _, feasible, details = evaluate_iopddl(d, [0, 0])
    assert not feasible and details["steps_over_limit"] == [2] and details["peak_usage"] == 10
    # usage equal to the limit is allowed, one more is not
    assert evaluate_iopddl(doc([(0, 3), (2, 4)], [[0], [0]], [[5], [5]], limit=10), [0, 0])[1]
    f = load_iopddl(d)
    assert not f.is_feasible([0, 0])


def test_empty_interval_is_never_live():
    d = doc([(0, 0), (1, 2), (3, 3)], [[0], [0], [0]], [[10**12], [4], [10**12]], limit=4)
    cost, feasible, details = evaluate_iopddl(d, [0, 0, 0])
    assert feasible and details["peak_usage"] == 4
    assert load_iopddl(d).is_feasible([0, 0, 0])


def test_no_usage_limit_means_always_feasible():
    d = doc([(0, 5)], [[3]], [[10**15]])
    assert evaluate_iopddl(d, [0])[:2] == (3, True)


def test_sums_beyond_int64_are_exact():
    n = 12
    d = doc(
        [(0, 1)] * n,
        [[BIG, 1] for _ in range(n)],
        [[0, 0]] * n,
        edge_nodes=[(i, i + 1) for i in range(n - 1)],
        edge_costs=[[BIG, BIG, BIG, 7]] * (n - 1),
    )
    cost, _, _ = evaluate_iopddl(d, [0] * n)
    assert cost == n * BIG + (n - 1) * BIG == 23 * 10**18 > 2**63
    assert evaluate_iopddl(d, [1] * n)[0] == n + 7 * (n - 1)
    assert load_iopddl(d).evaluate([0] * n) == cost


def test_hyperedge_evaluated_but_not_loaded():
    d = doc([(0, 1)] * 3, [[0, 0], [0, 0, 0], [0, 0]], [[0, 0], [0, 0, 0], [0, 0]], [(0, 1, 2)], [list(range(12))])
    assert evaluate_iopddl(d, [1, 2, 1])[0] == 1 * 6 + 2 * 2 + 1
    with pytest.raises(FormatError, match=r"edges\.nodes\[0\]"):
        load_iopddl(d)


# ---- loader versus evaluator on the real instances -------------------------
@pytest.fixture(scope="module", params=INSTANCES, ids=lambda p: p.name)
def instance(request):
    data = read_json(request.param)
    return data, load_iopddl(data)


def test_loader_agrees_with_evaluator_on_real_instances(instance):
    data, f = instance
    p = data["problem"]
    assert len(f.nodes) == len(p["nodes"]["costs"]) and len(f.edges) == len(p["edges"]["nodes"])
    assert f.usage_limit == p["usage_limit"] and best_known(f.name) is not None
    rng = np.random.default_rng(7)
    lowest = [int(np.argmin(n.usages)) for n in f.nodes]  # the least memory: feasible on these instances
    assignments = [lowest] + [[int(rng.integers(n.num_candidates)) for n in f.nodes] for _ in range(15)]
    verdicts = set()
    for a in assignments:
        cost, feasible, _ = evaluate_iopddl(data, a)
        assert f.evaluate(a) == cost
        assert f.is_feasible(a) == feasible
        verdicts.add(feasible)
    assert verdicts == {True, False}


def test_plain_and_gzip_files_load_alike(tmp_path):
    raw = gzip.decompress(INSTANCES[0].read_bytes())
    plain = tmp_path / "x.json"
    plain.write_bytes(raw)
    a, b = load_iopddl(plain), load_iopddl(INSTANCES[0])
    assert a.name == b.name and len(a.edges) == len(b.edges)
    assert all(np.array_equal(x.costs, y.costs) for x, y in zip(a.edges, b.edges))


def test_save_solution_writes_a_json_list(tmp_path):
    out = tmp_path / "s.json"
    save_solution(out, (np.int64(3), 0, 2))
    assert json.loads(out.read_text()) == [3, 0, 2]


# ---- malformed input ----------------------------------------------------------
GOOD = doc([(0, 2), (1, 3)], [[1, 2], [3]], [[4, 5], [6]], [(0, 1)], [[7, 8]], limit=100)


def broken(edit):
    d = copy.deepcopy(GOOD)
    edit(d["problem"])
    return d


@pytest.mark.parametrize(
    "edit, field",
    [
        (lambda p: p.pop("nodes"), r"problem\.nodes: missing"),
        (lambda p: p["nodes"].pop("usages"), r"problem\.nodes\.usages: missing"),
        (lambda p: p["edges"].pop("costs"), r"problem\.edges\.costs: missing"),
        (lambda p: p["nodes"]["usages"].pop(), r"problem\.nodes\.usages: 1 entries"),
        (lambda p: p["nodes"]["usages"][0].pop(), r"problem\.nodes\.usages\[0\]: 1 entries"),
        (lambda p: p["nodes"]["costs"].__setitem__(1, []), r"problem\.nodes\.costs\[1\]"),
        (lambda p: p["nodes"]["usages"][0].__setitem__(1, -1), r"problem\.nodes\.usages\[0\]\[1\]: negative"),
        (lambda p: p["nodes"]["costs"][0].__setitem__(0, 1.5), r"problem\.nodes\.costs\[0\]\[0\]: expected an integer"),
        (lambda p: p["nodes"]["costs"][0].__setitem__(0, True), r"problem\.nodes\.costs\[0\]\[0\]"),
        (lambda p: p["nodes"]["costs"][0].__setitem__(0, 2**63), r"problem\.nodes\.costs\[0\]\[0\]: .* 64-bit"),
        (lambda p: p["nodes"]["intervals"].__setitem__(0, [3, 1]), r"problem\.nodes\.intervals\[0\]"),
        (lambda p: p["nodes"]["intervals"].__setitem__(0, [1]), r"problem\.nodes\.intervals\[0\]"),
        (lambda p: p["edges"]["nodes"].__setitem__(0, [0, 2]), r"problem\.edges\.nodes\[0\]: node 2 out of range"),
        (lambda p: p["edges"]["nodes"].__setitem__(0, [-1, 0]), r"problem\.edges\.nodes\[0\]: node -1"),
        (lambda p: p["edges"]["costs"][0].append(9), r"problem\.edges\.costs\[0\]: 3 entries"),
        (lambda p: p["edges"]["costs"].append([1]), r"problem\.edges\.costs: 2 entries"),
        (lambda p: p.__setitem__("usage_limit", -5), r"problem\.usage_limit"),
        (lambda p: p.__setitem__("edges", []), r"problem\.edges: expected an object"),
    ],
)
def test_malformed_input_names_the_field(edit, field):
    with pytest.raises(FormatError, match=field):
        load_iopddl(broken(edit))
    with pytest.raises(FormatError, match=field):
        evaluate_iopddl(broken(edit), [0, 0])


@pytest.mark.parametrize(
    "solution, field",
    [
        ([0], r"solution: 1 entries"),
        ([2, 0], r"solution\[0\]: strategy 2"),
        ([0, -1], r"solution\[1\]"),
        ([0, "a"], r"solution\[1\]"),
    ],
)
def test_malformed_solution_names_the_entry(solution, field):
    with pytest.raises(FormatError, match=field):
        evaluate_iopddl(GOOD, solution)


def test_bad_file_is_a_format_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FormatError, match="not valid JSON"):
        load_iopddl(bad)
    with pytest.raises(FormatError, match="problem: expected an object"):
        validate([1, 2])


# ---- exact reductions, proved by brute force ---------------------------------
def structured_formulation(seed: int) -> Formulation:
    """IOPDDL-like small instances: follower edges (identity, 1e18 elsewhere), 0/1e18 alias
    tables, never-live nodes, constant usages, loops, parallel edges, edge memory, a max term."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 7))
    sizes = [int(rng.integers(1, 4)) for _ in range(n)]
    nodes = []
    for i, s in enumerate(sizes):
        kind = rng.integers(0, 4)
        lo = int(rng.integers(0, 4))
        usages = rng.integers(0, 4, size=s) * 100
        if kind == 1:
            usages[:] = usages[0]
        costs = rng.integers(0, 30, size=s)
        if rng.random() < 0.2:
            costs[rng.integers(0, s)] = BIG
        interval = (0, 0) if kind == 0 else (lo, lo + int(rng.integers(1, 4)))
        nodes.append(Node(f"n{i}", costs.astype(np.int64), usages.astype(np.int64), interval))
    edges = []
    for _ in range(int(rng.integers(n - 1, 2 * n))):
        u, v = (int(x) for x in rng.integers(0, n, size=2))
        if u == v and rng.random() < 0.7:
            continue
        su, sv = sizes[u], sizes[v]
        r = rng.random()
        if r < 0.35 and su == sv and u != v:
            costs = np.full((su, sv), BIG, np.int64)
            np.fill_diagonal(costs, 0)
        elif r < 0.5:
            costs = np.where(rng.random((su, sv)) < 0.5, BIG, 0).astype(np.int64)
            costs[0, 0] = 0
        else:
            costs = rng.integers(0, 40, size=(su, sv)).astype(np.int64)
        usages, interval = None, (0, 0)
        if rng.random() < 0.2:
            usages = (rng.integers(0, 3, size=(su, sv)) * 100).astype(np.int64)
            lo = int(rng.integers(0, 4))
            interval = (lo, lo + int(rng.integers(0, 3)))
        allowed = None
        if rng.random() < 0.15:
            allowed = rng.random((su, sv)) < 0.7
            allowed[0, 0] = True
        edges.append(Edge(u, v, costs, allowed, usages, interval))
    terms = ()
    if seed % 3 == 0 and edges:
        k = int(rng.integers(0, len(edges)))
        e = edges[k]
        terms = tuple(
            [
                MaxTerm(
                    e.v,
                    tuple(
                        Affine(
                            rng.integers(0, 20, size=sizes[e.v]).astype(np.int64),
                            ((k, rng.integers(0, 20, size=e.costs.shape).astype(np.int64)),),
                        )
                        for _ in range(2)
                    ),
                )
            ]
        )
    peak = sum(int(x.usages.max()) for x in nodes) + sum(int(e.usages.max()) for e in edges if e.usages is not None)
    limit = int(peak * rng.uniform(0.3, 1.0)) // 100 * 100 + 300
    return Formulation(tuple(nodes), tuple(edges), limit, terms, name=f"structured-{seed}")


def all_assignments(f: Formulation):
    return itertools.product(*[range(n.num_candidates) for n in f.nodes])


def brute_force(f: Formulation):
    best, arg = None, None
    for a in all_assignments(f):
        if not f.violations(a):
            c = f.evaluate(a)
            if best is None or c < best:
                best, arg = c, a
    return best, arg


def profile(f: Formulation, a) -> list[int]:
    steps = f.usage_profile(a)
    while steps and steps[-1] == 0:
        steps.pop()
    return steps


def check_reduction(f: Formulation, counts: Counter) -> None:
    best, arg = brute_force(f)
    if best is None:
        return
    for ub in (None, best, best + 3):
        red = reduce_formulation(f, upper_bound=ub)
        g = red.formulation
        counts.update({k: v for k, v in red.stats.items() if k in KINDS})
        assert brute_force(g)[0] == best, (f.name, ub)
        for a in all_assignments(g):
            if not any("not allowed" in v for v in g.violations(a)):
                # same cost, same memory at every step, same verdict: whatever the limit
                x = red.expand(a)
                assert f.evaluate(x) == g.evaluate(a), (f.name, ub, a)
                assert profile(f, x) == profile(g, a), (f.name, ub, a)
                assert f.violations(x) == g.violations(a), (f.name, ub, a)
        hint = red.project(arg)
        assert hint is not None and g.violations(hint) == [] and g.evaluate(hint) <= best


KINDS = ("bound", "arc", "dominated", "folded", "parallel", "follower", "leaf", "series")


def test_reduction_keeps_the_optimum_and_every_cost():
    counts: Counter = Counter()
    for seed in range(60):
        check_reduction(structured_formulation(seed), counts)
    for seed in range(25):
        rng = np.random.default_rng(seed)
        f = random_formulation(
            seed,
            num_nodes=int(rng.integers(2, 6)),
            edge_prob=0.5,
            max_terms=seed % 2 == 0,
            tight=float(rng.uniform(0.2, 1)),
        )
        check_reduction(f, counts)
    # the instances exercise every reduction, else this test proves less than it claims
    assert all(counts[k] > 0 for k in KINDS), counts


def test_reduction_maps_offsets_back_to_the_original_buffers():
    for seed in range(30):
        f = structured_formulation(seed)
        f = Formulation(f.nodes, f.edges, None, f.max_terms, Placement(10**9, 100), name=f.name)
        red = reduce_formulation(f)
        g = red.formulation
        rng = np.random.default_rng(seed)
        for _ in range(10):
            a = [int(rng.integers(n.num_candidates)) for n in g.nodes]
            if any("not allowed" in v for v in g.violations(a, {})):
                continue
            offsets, top = {}, 0  # every buffer at its own address: valid whatever the lifetimes
            for b in g.buffers(a):
                offsets[b.key] = top
                top += -(-b.size // 100) * 100
            assert g.violations(a, offsets) == []
            x = red.expand(a)
            assert f.violations(x, red.expand_offsets(offsets)) == []
            assert red.project_offsets(red.expand_offsets(offsets)) == offsets


def test_reduction_guards_int64():
    # folding two 6e18 costs would leave int64: the fold must be skipped, not wrapped
    big = 6 * 10**18
    a_node = Node("a", np.array([big, 1], np.int64), np.array([0, 5], np.int64), (0, 1))  # 0 saves memory
    b_node = Node("b", np.array([big], np.int64), np.zeros(1, np.int64), (0, 0))
    f = Formulation((a_node, b_node), (Edge(0, 1, np.array([[big], [2]], np.int64)),), 10)
    red = reduce_formulation(f)
    g = red.formulation
    assert len(g.edges) == 1 and g.nodes[0].num_candidates == 2
    for a in all_assignments(g):
        assert g.evaluate(a) == f.evaluate(red.expand(a))


def random_allowed_assignment(g: Formulation, seed: int) -> list[int]:
    """An assignment with every edge pair allowed (memory ignored), steered by a random objective."""
    from ortools.sat.python import cp_model

    rng = np.random.default_rng(seed)
    m = cp_model.CpModel()
    x = [m.new_int_var(0, n.num_candidates - 1, f"x{i}") for i, n in enumerate(g.nodes)]
    for e in g.edges:
        if e.allowed is None:
            continue
        if e.u == e.v:
            m.add_allowed_assignments([x[e.u]], [(s,) for s in np.flatnonzero(np.diagonal(e.allowed))])
        else:
            m.add_allowed_assignments([x[e.u], x[e.v]], [tuple(map(int, p)) for p in np.argwhere(e.allowed)])
    m.minimize(sum(int(w) * v for w, v in zip(rng.integers(-5, 6, size=len(x)), x)))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.max_time_in_seconds = 10
    solver.parameters.stop_after_first_solution = True
    assert solver.solve(m) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    return [int(solver.value(v)) for v in x]


def test_reduction_of_real_instances(instance):
    data, f = instance
    bound = best_known(f.name) * 3  # a bound only prunes: any value >= the optimum keeps it exact
    red = reduce_formulation(f, upper_bound=bound)
    g = red.formulation
    assert red.stats["active_nodes"] < len(f.nodes) / 2 and red.stats["follower"] > 300
    assert red.stats["candidates_after"] < red.stats["candidates_before"] / 2
    # every allowed reduced assignment maps to a contest solution of the same cost and verdict
    for seed in range(4):
        a = random_allowed_assignment(g, seed)
        assert not any("not allowed" in v for v in g.violations(a))
        cost, feasible, _ = evaluate_iopddl(data, list(red.expand(a)))
        assert cost == g.evaluate(a) and feasible == g.is_feasible(a)
        assert cost < 10**18  # forbidden pairs are exactly the contest's 1e18 entries that no good plan uses


def test_milp_proves_the_contest_best_optimal_on_b():
    """The headline claim, in the default run (G with it under ``-m slow`` in test_milp): the contest's best
    cost on B is optimal, the MILP proves it through the registry's presolve, and the contest's own
    evaluator agrees with the plan."""
    data = read_json(INSTANCES[0])
    f = load_iopddl(data)
    sol = solve_formulation(f, "milp", time_limit=120, seed=0)
    cost, feasible, _ = evaluate_iopddl(data, list(sol.assignment))
    assert feasible and cost == sol.objective == best_known(f.name)
    assert sol.status == "optimal" and sol.bound == sol.objective


# ---- the command line -----------------------------------------------------
def run_cli(argv: list[str]) -> int:
    from spyreopt.cli import iopddl as cli

    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.mark.parametrize("reduce", [False, True])
def test_cli_solves_writes_and_scores(tmp_path, capsys, reduce):
    d = doc(
        [(0, 2), (1, 3), (2, 4)],
        [[5, 1], [2, 8, 3], [4, 4]],
        [[1, 9], [1, 1, 9], [2, 1]],
        [(0, 1), (1, 2), (1, 2)],
        [[0, 5, 5, 5, 0, 5], [0, 1, 1, 0, 3, 3], [2, 0, 0, 2, 0, 0]],
        limit=11,
    )
    src = tmp_path / "p.json"
    src.write_text(json.dumps(d))
    out = tmp_path / "sol.json"
    code = run_cli(["iopddl", str(src), "--time-limit", "5", "--out", str(out)] + (["--reduce"] if reduce else []))
    assert code == 0
    solution = json.loads(out.read_text())
    cost, feasible, _ = evaluate_iopddl(d, solution)
    printed = capsys.readouterr().out
    assert feasible and f"cost: {cost}\n" in printed and "feasible: True" in printed and "score: n/a" in printed


def test_cli_reports_bad_input(tmp_path, capsys):
    src = tmp_path / "bad.json"
    src.write_text(json.dumps(broken(lambda p: p["edges"]["nodes"].__setitem__(0, [0, 5]))))
    assert run_cli(["iopddl", str(src), "--out", str(tmp_path / "s.json")]) == 2
    assert "problem.edges.nodes[0]" in capsys.readouterr().err


def test_the_chain_maps_back_a_valid_plan_no_worse_than_greedy():
    for seed in range(8):
        f = structured_formulation(seed)
        best, _ = brute_force(f)
        if best is None:
            continue
        sol = solve_formulation(f, "greedy", time_limit=5, seed=0)
        assert f.violations(sol.assignment, sol.offsets) == []
        assert sol.objective == f.evaluate(sol.assignment) >= best
        assert sol.objective <= solve_formulation(f, "greedy", time_limit=5, presolve=False).objective
        assert "presolve" in sol.stats


# ---- the fast reader ------------------------------------------------------------
@pytest.mark.parametrize("path", INSTANCES, ids=lambda p: p.name)
def test_fast_reader_gives_the_exact_paths_arrays(path):
    from spyreopt.formats.iopddl_read import _fast, read_bytes

    assert _fast(read_bytes(path).strip()) is not None  # the contest's compact files take the fast path
    fast, exact = read_instance(path), validate(read_json(path))
    for field in ("k", "off", "cost", "usage", "lo", "hi", "endoff", "ends", "eoff", "ecost"):
        assert np.array_equal(getattr(fast, field), getattr(exact, field)), field
    assert (fast.name, fast.usage_limit) == (exact.name, exact.usage_limit)


GOOD_TEXT = json.dumps(GOOD, separators=(",", ":"))


@pytest.mark.parametrize(
    "text",
    [
        GOOD_TEXT,
        GOOD_TEXT.replace("[[1,2],[3]]", "[[1,2],3,[3]]"),  # a bare number among the rows
        GOOD_TEXT.replace("[[1,2],[3]]", "[[1,2],[[3]]]"),  # a nested row
        GOOD_TEXT.replace("[[1,2],[3]]", "[[1,2],[]]"),  # an empty row
        GOOD_TEXT.replace("[[1,2],[3]]", "[[1.5,2],[3]]"),  # a float
        GOOD_TEXT.replace("[[1,2],[3]]", "[[9223372036854775808,2],[3]]"),  # beyond int64
        GOOD_TEXT.replace("[[1,2],[3]]", "[[-1,2],[3]]"),  # negative
        GOOD_TEXT.replace('"name":"t"', '"name":"a [b]"'),  # brackets in a string
        GOOD_TEXT.replace("[[1,2],[3]]", '[[1,2],[3]],"extra":[[1]]'),  # another list of rows
        json.dumps(GOOD),  # whitespace: the exact path
    ],
)
def test_fast_reader_accepts_and_rejects_what_the_exact_path_does(tmp_path, text):
    path = tmp_path / "x.json"
    path.write_text(text)
    try:
        expected = validate(json.loads(text))
    except (FormatError, ValueError) as exc:
        with pytest.raises(FormatError, match=str(exc).split(":")[0].replace("[", r"\[").replace("]", r"\]")):
            read_instance(path)
        return
    got = read_instance(path)
    assert np.array_equal(got.cost, expected.cost) and np.array_equal(got.ecost, expected.ecost)
    assert np.array_equal(got.k, expected.k) and got.name == expected.name
