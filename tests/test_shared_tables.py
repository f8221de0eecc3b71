"""The build and presolve share tables instead of copying them: exact, and nobody writes into a shared one.

What would break: the presolve state writing into the caller's Formulation (it now shares its arrays), a
backend writing into a reduced Formulation's tables (now read-only views of the state), dominance's memo of
row comparisons answering for a different profile, and the per-signature stage and alias tables differing
from what a build without sharing gives.
"""

from __future__ import annotations

import numpy as np
import pytest

import spyreopt as so
from spyreopt.model.problem import Problem
from spyreopt.model.staging import stage_edge_index
from spyreopt.solvers.presolve import domains, reduce_formulation
from spyreopt.solvers.presolve import dominance as dominance_module
from spyreopt.testing.formulations import random_formulation


def _arrays(f):
    out = []
    for n in f.nodes:
        out += [n.costs, n.usages]
    for e in f.edges:
        out += [a for a in (e.costs, e.allowed, e.usages, e.alias) if a is not None]
    for m in f.max_terms:
        for alt in m.alternatives:
            out += [alt.unary] + [t for _, t in alt.edge_parts]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_reduction_leaves_its_input_alone_and_hands_out_read_only_tables(seed):
    f = random_formulation(seed, num_nodes=9, max_candidates=4, inplace=seed % 2 == 0, placement=seed % 3 == 0)
    before = [a.copy() for a in _arrays(f)]
    red = reduce_formulation(f)
    assert all(np.array_equal(a, b) for a, b in zip(_arrays(f), before))
    tables = _arrays(red.formulation)
    assert tables and not any(a.flags.writeable for a in tables)


@pytest.mark.parametrize("seed", range(6))
def test_dominance_memo_answers_exactly_what_the_comparison_gives(seed, monkeypatch):
    f = random_formulation(seed, num_nodes=10, max_candidates=5, forbid_prob=0.1)
    with_memo = domains(f)
    monkeypatch.setattr(dominance_module._Comparisons, "KEPT", 0)  # every profile compared afresh
    without = domains(f)
    assert all(np.array_equal(a, b) for a, b in zip(with_memo.masks, without.masks))
    assert with_memo.replaced == without.replaced and with_memo.counts == without.counts


def test_comparisons_tell_equal_bytes_of_other_shapes_apart():
    memo = dominance_module._Comparisons()
    a = np.array([[1, 2, 3, 4], [0, 2, 3, 5]], dtype=np.int64)
    b = a.reshape(4, 2)  # the same bytes, another profile
    assert memo.better(a).shape == (2, 2) and memo.better(b).shape == (4, 4)
    assert memo.better(b)[1, 0] == bool((b[1] <= b[0]).all())


def test_repeated_layers_share_their_stage_and_alias_tables_with_equal_values():
    """Readers of a staged input in every layer get one table per signature, equal to the table a build that
    shares nothing between ops computes (every op its own signature id, as each op's own key did before)."""
    p = Problem(so.presets.get("tiny", layers=3))
    f = p.formulation
    alone = Problem(so.presets.get("tiny", layers=3))
    alone.sig = list(range(len(alone.ops)))  # equal ids still mean equal layouts; no two ops share an id
    ref = alone.formulation
    assert len(f.edges) == len(ref.edges)
    for e, x in zip(f.edges, ref.edges):
        assert (e.u, e.v, e.interval, e.tail) == (x.u, x.v, x.interval, x.tail)
        for a, b in ((e.costs, x.costs), (e.allowed, x.allowed), (e.usages, x.usages), (e.alias, x.alias)):
            assert (a is None) == (b is None) and (a is None or np.array_equal(a, b))
    index = stage_edge_index(p)
    readers = [k for key, k in index.items() if len(key) == 2]
    assert len(readers) > len({id(f.edges[k].costs) for k in readers})  # equal signatures hold one table
