"""The six MiniMalloc "challenging" production instances, solved exactly.

A (peak live bytes equal to the capacity: a valid packing has no fragmentation
at the peak) and D run by default, a second or two each; the other four are
slow (seconds each under load) and run with ``-m slow``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from spyreopt.solvers.placement import place, read_csv, validate

CHALLENGING = Path(__file__).parent / "data" / "minimalloc" / "challenging"
CAPACITY = 1048576
DEFAULT_RUN = "AD"


@pytest.mark.parametrize("name", [n if n in DEFAULT_RUN else pytest.param(n, marks=pytest.mark.slow) for n in "ABCDEF"])
def test_search_solves_challenging_instance(name):
    path = CHALLENGING / f"{name}.{CAPACITY}.csv"
    assert path.exists(), f"{path} is missing: the vendored test data (tests/data/SOURCE.md) must be in the clone"
    buffers = read_csv(path)
    result = place(buffers, CAPACITY, method="search", time_limit=60)
    assert result.status == "placed", result.message
    assert validate(buffers, result.offsets, CAPACITY) == []
