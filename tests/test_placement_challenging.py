"""The six MiniMalloc "challenging" production instances, solved exactly (slow: seconds each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from spyreopt.solvers.placement import place, read_csv, validate

CHALLENGING = Path(__file__).resolve().parents[2] / "shared" / "benchmarks" / "minimalloc" / "challenging"
CAPACITY = 1048576


@pytest.mark.slow
@pytest.mark.parametrize("name", list("ABCDEF"))
def test_search_solves_challenging_instance(name):
    path = CHALLENGING / f"{name}.{CAPACITY}.csv"
    assert path.exists(), f"{path} is missing: the tests need shared/ beside the clone"
    buffers = read_csv(path)
    result = place(buffers, CAPACITY, method="search", time_limit=60)
    assert result.status == "placed", result.message
    assert validate(buffers, result.offsets, CAPACITY) == []
