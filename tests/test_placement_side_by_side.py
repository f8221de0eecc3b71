"""The exact placement search runs its static orders side by side: independent, and decided by work alone.

What would break: orders sharing state (one order's placement leaking into another's floors), a search whose
answer depends on the clock, or the side-by-side run doing more than the orders' slices.
"""

from __future__ import annotations

import time
from pathlib import Path

from spyreopt.solvers.placement import read_csv, validate
from spyreopt.solvers.placement import search as search_module
from spyreopt.solvers.placement.search import SLICE, search_place
from spyreopt.solvers.placement.sweep import sweep

A = Path(__file__).parent / "data" / "minimalloc" / "challenging" / "A.1048576.csv"
CAPACITY = 1048576


def _alone(buffers, sw, order: str):
    """One order's search run by itself to its end: (status, nodes, offsets)."""
    s = search_module._CanonicalSearch(buffers, CAPACITY, time.monotonic() + 60, sw, order)
    status, _ = search_module._side_by_side([s])
    return status, s.nodes, list(s.solution)


def test_the_winner_searched_exactly_what_it_searches_alone_and_the_others_no_more_than_their_turns():
    buffers = read_csv(A)
    sw = sweep(buffers)
    status, offsets, stats = search_place(buffers, CAPACITY, 60, sw)
    assert status == "placed" and validate(buffers, {b.id: o for b, o in zip(buffers, offsets)}, CAPACITY) == []
    alone_status, alone_nodes, alone_offsets = _alone(buffers, sw, stats["order"])
    assert alone_status == search_module.FOUND and alone_offsets == offsets
    # every order had at most one more turn of SLICE nodes than the winner's
    assert alone_nodes <= stats["nodes"] <= stats["orders"] * (alone_nodes + SLICE)


def test_same_input_same_placement_and_same_work():
    buffers = read_csv(A)
    first = search_place(buffers, CAPACITY, 60, sweep(buffers))
    again = search_place(buffers, CAPACITY, 60, sweep(buffers))
    assert first == again
