"""Greedy's window moves: the window optimum equals brute force, a move is made only when it strictly improves
and stays feasible, determinism, and greedy finds tiled loops that one-node moves cannot reach."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import spyreopt as so
from spyreopt.model.problem import Problem
from spyreopt.solvers import greedy
from spyreopt.solvers.local import LocalView
from spyreopt.solvers.presolve.limits import memory_limit
from spyreopt.solvers.window_moves import (
    WindowSearch,
    build_window,
    local_objective,
    peak_entries,
    solve_window,
    window_value,
)
from spyreopt.testing.formulations import random_formulation
from spyreopt.testing.strategies import formulations
from spyreopt.testing.synthetic import layered_dag, residual_stack

HW = so.HardwareSpec(cores=4, lx_bytes=64 * 1024, program_reserve_bytes=4096)  # 48 KiB: big tensors need loops
# A core addresses at most 64 KiB of one tensor, so every op of ``chain()`` runs on all 4 cores: a lone core
# streams its reads and writes at once, which hides the round trip a loop saves (as in test_tiling.py).
SPLIT = HW.with_(span_limit_bytes=64 * 1024)


def chain(ops: int = 3) -> so.Graph:
    """x -> neg -> exp -> relu, each output 256 KiB: on chip only a tile at a time."""
    g = so.Graph("chain")
    y = g.input("x", (512, 256))
    for name in ("neg", "exp", "relu")[:ops]:
        y = g.pointwise(name, y, name=name)
    g.output(y)
    return g


def window_brute_force(f, a, nodes) -> int:
    """The least objective over every allowed choice of ``nodes``, the rest as in ``a`` (memory ignored)."""
    best = None
    for combo in itertools.product(*[range(f.nodes[i].num_candidates) for i in nodes]):
        b = list(a)
        for i, s in zip(nodes, combo):
            b[i] = s
        if all(e.is_allowed(b[e.u], b[e.v]) for e in f.edges):
            value = f.evaluate(b)
            best = value if best is None or value < best else best
    return best


def check_window_exact(f, a, nodes) -> None:
    w = build_window(LocalView(f), a, nodes)
    value, cands = solve_window(w)
    b = list(a)
    for i, s in zip(nodes, cands):
        b[i] = s
    assert f.evaluate(b) == window_brute_force(f, a, nodes)
    # the window's factors are exactly the objective terms that read a window node
    assert value - window_value(w, [a[i] for i in nodes]) == f.evaluate(b) - f.evaluate(a)
    view = LocalView(f)
    assert local_objective(view, b, nodes) - local_objective(view, a, nodes) == f.evaluate(b) - f.evaluate(a)


def test_the_window_optimum_equals_brute_force_on_seeded_formulations():
    for seed in range(40):
        f = random_formulation(seed, num_nodes=7, edge_prob=0.5)  # edges skipping nodes, max terms over several
        rng = np.random.default_rng(seed)
        a = [0] * len(f.nodes)  # candidate 0 pairs with everything
        lo = int(rng.integers(0, 3))
        nodes = list(range(lo, min(lo + int(rng.integers(2, 6)), len(f.nodes))))
        for i in range(len(f.nodes)):
            if i not in nodes:  # others fixed anywhere allowed
                a[i] = int(rng.integers(0, f.nodes[i].num_candidates))
        if not all(e.is_allowed(a[e.u], a[e.v]) for e in f.edges):
            a = [0] * len(f.nodes)
        check_window_exact(f, a, nodes)


@settings(max_examples=40, deadline=None)
@given(formulations(max_nodes=6, max_candidates=4), st.data())
def test_the_window_optimum_equals_brute_force(f, data):
    n = len(f.nodes)
    lo = data.draw(st.integers(0, n - 1))
    hi = data.draw(st.integers(lo + 1, n))
    check_window_exact(f, [0] * n, list(range(lo, hi)))


def test_a_window_too_big_for_the_cap_is_shrunk_not_solved():
    f = random_formulation(3, num_nodes=6, max_candidates=6, edge_prob=0.8, forbid_prob=0.0)
    view = LocalView(f)
    w = build_window(view, [0] * 6, list(range(6)))
    search = WindowSearch(view, cap=peak_entries(w) - 1)
    a, prof = [0] * 6, view.profile([0] * 6)
    search.sweep(a, prof, np.ones(6, dtype=bool), deadline=float("inf"))
    assert search.stats["shrunk"] >= 1


def test_a_move_is_made_only_when_it_strictly_improves_and_stays_feasible():
    made = 0
    for seed in range(30):
        f = random_formulation(seed, num_nodes=8, tight=0.3, edge_prob=0.5)
        view = LocalView(f)
        check = replace(f, placement=None, usage_limit=view.limit, _incident={})
        search = WindowSearch(view, width=4)
        a = [0] * len(f.nodes)  # zero memory, every pair allowed: feasible
        prof = view.profile(a)
        for p in range(len(a) - 3):
            before, value = list(a), f.evaluate(a)
            if search.try_window(a, prof, list(range(p, p + 4))):
                made += 1
                assert f.evaluate(a) < value and not check.violations(a)
                assert all(a[i] == before[i] for i in range(len(a)) if not p <= i < p + 4)
            else:
                assert a == before
            assert list(prof) == list(view.profile(a))  # the profile follows the moves
    assert made > 0


def test_greedy_with_windows_is_never_worse_and_deterministic():
    for f in (layered_dag(seed=1, num_nodes=120), residual_stack(layers=4, seed=2)):
        plain = greedy.solve(f, time_limit=20, window=1)  # width 1: descent alone
        runs = [greedy.solve(f, time_limit=20) for _ in range(2)]
        assert runs[0].assignment == runs[1].assignment and runs[0].offsets == runs[1].offsets
        assert runs[0].objective <= plain.objective
        assert f.violations(runs[0].assignment, runs[0].offsets) == []


def test_greedy_finds_the_k_loop_that_one_node_moves_miss():
    g = so.workloads.get("ktiled_matmul")  # two ops: a loop over k pays only when both switch to it together
    plan = so.solve(g, backend="greedy")
    assert plan.loops and plan.stats["accepted"] >= 1
    alone = so.solve(g, backend="greedy", window=1, presolve=False)  # width 1: descent alone (the presolve
    # chain's incumbent is greedy with its default windows)
    assert not alone.loops and plan.cost_us < alone.cost_us
    untiled = so.solve(g, backend="greedy", forbid=("tiling",))
    assert plan.cost_us < untiled.cost_us
    assert so.solve(g, backend="greedy").to_json() == plan.to_json()


def test_greedy_reaches_the_brute_force_optimum_on_a_small_tiled_chain():
    f = Problem(chain(2), SPLIT).formulation
    check = replace(f, placement=None, usage_limit=memory_limit(f), _incident={})  # addresses aside
    best = min(
        f.evaluate(a) for a in itertools.product(*[range(n.num_candidates) for n in f.nodes]) if check.is_feasible(a)
    )
    assert greedy.solve(f, time_limit=10).objective == best
    plan = so.solve(chain(2), hardware=SPLIT, backend="greedy")
    assert [loop.ops for loop in plan.loops] == [["neg", "exp"]]
    plan.validate()
