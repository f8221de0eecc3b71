"""The contest engine: exact reductions, determinism, feasibility, time limits, scores (judged by ``evaluate_iopddl``)."""

from __future__ import annotations

import gzip
import itertools
import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from spyreopt.cli import main as cli_main
from spyreopt.contest.kernels import total_cost
from spyreopt.contest.reduce import reduce_instance
from spyreopt.contest.search import Search, build_graph
from spyreopt.contest.solve import solve_instance
from spyreopt.errors import FormatError
from spyreopt.formats.iopddl import contest_table, evaluate_iopddl, read_instance, validate
from spyreopt.testing.formulations import iopddl_document

BIG = 10**18


def bench_file(name: str) -> Path:
    """A shipped instance: tests/data/iopddl, then $SPYREOPT_DATA/iopddl, then the shared benchmarks folder."""
    places = [Path(__file__).parent / "data" / "iopddl"]
    if os.environ.get("SPYREOPT_DATA"):
        places.append(Path(os.environ["SPYREOPT_DATA"]) / "iopddl")
    places.append(Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "iopddl")
    for p in places:
        if (p / name).exists():
            return p / name
    raise FileNotFoundError(f"{name}: not in {[str(p) for p in places]}")


doc = iopddl_document


def judge(d, solution) -> SimpleNamespace:
    """The one judge's verdict as attributes."""
    cost, feasible, details = evaluate_iopddl(d, solution)
    return SimpleNamespace(cost=cost, feasible=feasible, peak_usage=details["peak_usage"])


def test_loader_names_the_bad_field():
    d = doc([(0, 1)], [[1, 2]], [[0]])
    with pytest.raises(FormatError, match=r"usages\[0\]"):
        validate(d)
    d = doc([(0, 1), (0, 1)], [[1], [2]], [[0], [0]], edge_nodes=[(0, 1)], edge_costs=[[1, 2]])
    with pytest.raises(FormatError, match=r"edges.costs\[0\]"):
        validate(d)


def test_contest_table_has_all_25_instances():
    t = contest_table()
    assert len(t) == 25
    assert t["asplos-2025-iopddl-B"] == {"time_limit": 60, "best_cost": 532_843}
    assert t["asplos-2025-iopddl-Y"]["time_limit"] == 300


# ---- exact reductions: brute force on small random instances ------------------
def random_doc(rng: np.random.Generator, n: int) -> dict:
    k = rng.integers(1, 4, n)
    costs = [[int(c) for c in rng.integers(0, 50, kk)] for kk in k]
    usages = [[int(u) for u in rng.integers(0, 10, kk)] for kk in k]
    intervals = [tuple(sorted(int(t) for t in rng.integers(0, 6, 2))) for _ in range(n)]
    edges, tables = [], []
    for _ in range(n + 2):
        u, v = (int(a) for a in rng.integers(0, n, 2))
        t = rng.integers(0, 30, (k[u], k[v]))
        if rng.random() < 0.5:  # a follower edge: one finite partner per row
            t = np.full((k[u], k[v]), BIG)
            t[np.arange(k[u]), rng.integers(0, k[v], k[u])] = rng.integers(0, 30, k[u])
        edges.append((u, v))
        tables.append([int(c) for c in t.ravel()])
    return doc(intervals, costs, usages, edges, tables, limit=int(rng.integers(5, 25)))


@pytest.mark.parametrize("seed", range(12))
def test_reductions_keep_the_optimum_and_the_costs(seed):
    rng = np.random.default_rng(seed)
    d = random_doc(rng, 6)
    ks = [len(c) for c in d["problem"]["nodes"]["costs"]]
    brute = min(
        (v.cost for v in (judge(d, list(s)) for s in itertools.product(*map(range, ks))) if v.feasible), default=None
    )
    r = reduce_instance(validate(d))
    best = None
    for x in itertools.product(*map(range, r.k)):
        x = np.array(x, np.int64)
        v = judge(d, r.expand(x))
        if v.cost < BIG:  # a finite reduced solution costs exactly what the judge says
            assert total_cost(x, r.k, r.off, r.cost, r.ea, r.eb, r.eoff, r.ecost) == v.cost
        if v.feasible:
            best = v.cost if best is None else min(best, v.cost)
    if brute is not None and brute < BIG:
        assert best == brute


# ---- the search on a real instance ------------------------------------------------
@pytest.fixture(scope="module")
def b_doc():
    return read_instance(bench_file("asplos-2025-iopddl-B.json.gz"))


def test_same_seed_same_solution_and_feasible(b_doc):
    r = reduce_instance(b_doc)
    runs = [Search(r, build_graph(r), 3).run(time.monotonic() + 120, max_rounds=40) for _ in range(2)]
    assert not runs[0].cut_by_clock
    assert np.array_equal(runs[0].x, runs[1].x) and runs[0].cost == runs[1].cost
    v = judge(b_doc, r.expand(runs[0].x))
    assert v.feasible and v.cost == runs[0].cost


def test_time_limit_is_honoured(b_doc):
    start = time.monotonic()
    out = solve_instance(b_doc, 6.0, start=start)
    assert time.monotonic() - start <= 6.0 + 1.5
    assert judge(b_doc, out.solution).feasible


def test_cli_default_writes_a_feasible_solution(tmp_path, capsys):
    d = doc([(0, 2), (1, 3)], [[5, 1], [4, 2]], [[1, 3], [1, 3]], [(0, 1)], [[0, 9, 9, 0]], limit=4, name="tiny")
    src = tmp_path / "tiny.json.gz"
    src.write_bytes(gzip.compress(json.dumps(d).encode()))
    assert cli_main(["iopddl", str(src), "--time-limit", "3", "--out", str(tmp_path / "sol.json")]) == 0
    sol = json.loads((tmp_path / "sol.json").read_text())
    assert judge(d, sol).cost == min(judge(d, s).cost for s in ([0, 0], [1, 0], [0, 1]) if judge(d, s).feasible)
    assert "feasible: True" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.parametrize("letter", ["B", "G"])
def test_b_and_g_reach_the_best_contest_cost(letter):
    d = read_instance(bench_file(f"asplos-2025-iopddl-{letter}.json.gz"))
    name = d.name
    out = solve_instance(d, contest_table()[name]["time_limit"])
    v = judge(d, out.solution)
    assert v.feasible and v.cost == contest_table()[name]["best_cost"]


def test_warm_children_compile_every_kernel_without_error():
    from spyreopt.contest import warm

    r = warm.tiny()
    assert (r.k > 1).all() and len(r.ea) == 2  # nothing reduced away: every kernel sees real work
    procs = warm.start()
    assert warm.wait(procs, time.monotonic() + 600)
    assert [p.exitcode for p in procs] == [0, 0]


def test_warm_wait_never_waits_past_its_deadline():
    """Kernels not compiled by the deadline are not waited for: the children are killed and False returned."""
    from spyreopt.contest import warm

    procs = warm.start()
    began = time.monotonic()
    done = warm.wait(procs, began)  # a deadline already reached
    assert time.monotonic() - began < 5.0  # the kill and join only, never the compile
    assert not any(p.is_alive() for p in procs)
    assert done == all(p.exitcode == 0 for p in procs)


def test_solve_instance_falls_back_when_the_kernels_are_not_ready(monkeypatch):
    """The fallback answers, and the outcome says so (the stage cut, the fallback's name)."""
    from spyreopt.contest import solve as contest_solve
    from spyreopt.contest import warm

    monkeypatch.setattr(warm, "wait", lambda procs, deadline: False)
    doc = {"problem": {"name": "t", "nodes": {"intervals": [[0, 1]], "costs": [[3, 1]], "usages": [[0, 0]]},
                       "edges": {"nodes": [], "costs": []}, "usage_limit": 1}}  # fmt: skip
    out = contest_solve.solve_instance(validate(doc), 5.0, fallback=lambda inst, s: ([1], 1.0, "greedy"))
    assert out.solution == [1] and out.limits["fallback"] == "greedy" and out.limits["cut"]
    lean = contest_solve.solve_instance(validate(doc), 5.0)  # by default numpy's least-usage strategies answer
    assert lean.limits["fallback"] == "lean" and judge(doc, lean.solution).feasible


@pytest.mark.parametrize("seed", range(3))
def test_trws_decodes_the_optimum_of_a_tree(seed):
    """TRW-S is exact on a tree: after a few passes its decoding is a brute-force minimum."""
    from spyreopt.contest.trws import trws_iterate

    rng = np.random.default_rng(seed)
    n, k = 7, 3
    parents = [int(rng.integers(0, i)) for i in range(1, n)]
    d = doc(
        [(0, 0)] * n,
        [rng.integers(0, 50, k).tolist() for _ in range(n)],
        [[0] * k] * n,
        edge_nodes=[(p, i + 1) for i, p in enumerate(parents)],
        edge_costs=[rng.integers(0, 50, k * k).tolist() for _ in parents],
    )
    r = reduce_instance(validate(d))
    assert r.n == n and len(r.ea) == n - 1  # nothing merged or fixed: the tree is intact
    g = build_graph(r)
    s = Search(r, g, 0)
    x = np.zeros(n, np.int64)
    msg = np.zeros(g.moff[-1])
    trws_iterate(msg, g.moff, g.rev, r.cost, 5, x, r.k, r.off, g.ptr, g.nbr, g.edg, g.fst, r.eoff, r.ecost)
    best = min(s.cost(np.array(y)) for y in itertools.product(range(k), repeat=n))
    assert s.cost(x) == best


@pytest.mark.parametrize("seed", range(16))
def test_region_step_is_exact_on_its_region_and_never_loses(seed):
    """The MILP over a region, the rest fixed, finds the best completion by brute force over that region, and
    a step keeps the incumbent unless the answer is cheaper and within the limit."""
    from spyreopt.contest.merge import FINITE
    from spyreopt.contest.region import improve

    rng = np.random.default_rng(seed)
    for _ in range(200):  # draw until the lean start is a finite, feasible incumbent with a region to re-optimise
        r = reduce_instance(validate(random_doc(rng, 7)))
        s = Search(r, build_graph(r), 0)
        x = s.lean_start()
        free = np.flatnonzero(r.k > 1)
        if len(free) >= 2 and (s.profile(x) <= r.usage_limit).all() and s.cost(x) < FINITE:
            break
    else:
        pytest.fail("no draw in 200 had a finite feasible start to re-optimise")
    region = free[: max(2, len(free) - 1)]
    step = improve(r, x, s.cost, region, 30.0)
    assert step.finished and s.cost(step.x) <= s.cost(x) and (s.profile(step.x) <= r.usage_limit).all()
    best = s.cost(x)
    for y in itertools.product(*(range(r.k[g]) for g in region)):
        z = x.copy()
        z[region] = y
        if (s.profile(z) <= r.usage_limit).all():
            best = min(best, s.cost(z))
    assert s.cost(step.x) == best and step.improved == (best < s.cost(x))
