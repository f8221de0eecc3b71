"""Property tests of placement on small generated instances, with CP-SAT as the independent referee."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spyreopt.solvers.placement import Buffer, minimize_capacity, place, validate

HORIZON = 10
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def live_peak(buffers: list[Buffer]) -> int:
    """Peak live bytes, counted step by step (independent of the solvers' sweep)."""
    return max(sum(b.size for b in buffers if b.lower <= t < b.upper) for t in range(HORIZON))


@st.composite
def instances(draw, max_buffers: int = 9, preplaced: bool = True, aligned: bool = True):
    """(buffers, capacity): capacity around the live-bytes peak, where placement is hardest."""
    buffers = []
    for k in range(draw(st.integers(1, max_buffers))):
        lower = draw(st.integers(0, HORIZON - 2))
        upper = draw(st.integers(lower + 1, HORIZON))
        alignment = draw(st.sampled_from([1, 1, 2, 4])) if aligned else 1
        offset = None
        if preplaced and draw(st.integers(0, 4)) == 0:
            offset = alignment * draw(st.integers(0, 4))
        buffers.append(Buffer(f"b{k}", lower, upper, draw(st.integers(1, 6)), alignment, offset))
    capacity = max(1, live_peak(buffers) + draw(st.integers(-1, 3)))
    return buffers, capacity


def check_honoured(buffers: list[Buffer], offsets: dict[str, int], capacity: int) -> None:
    assert validate(buffers, offsets, capacity) == []
    for b in buffers:
        assert offsets[b.id] % b.alignment == 0
        if b.offset is not None:
            assert offsets[b.id] == b.offset


@SETTINGS
@given(instances())
def test_search_and_cpsat_agree_and_placements_validate(instance):
    buffers, capacity = instance
    search = place(buffers, capacity, method="search", time_limit=5)
    cpsat = place(buffers, capacity, method="cpsat", time_limit=5)
    assert "timeout" not in (search.status, cpsat.status)
    assert search.status == cpsat.status, (search.message, cpsat.message)
    for result in (search, cpsat):
        if result.status == "placed":
            check_honoured(buffers, result.offsets, capacity)


@SETTINGS
@given(instances(max_buffers=14, preplaced=False, aligned=False))
def test_search_infeasible_only_when_cpsat_agrees_on_larger_plain_instances(instance):
    buffers, capacity = instance
    search = place(buffers, capacity, method="search", time_limit=5)
    if search.status == "infeasible":
        assert place(buffers, capacity, method="cpsat", time_limit=5).status == "infeasible"
    else:
        assert search.status == "placed"
        check_honoured(buffers, search.offsets, capacity)


@SETTINGS
@given(instances())
def test_bestfit_and_auto_placements_validate(instance):
    buffers, capacity = instance
    fast = place(buffers, capacity, method="bestfit")
    assert fast.status in ("placed", "timeout", "infeasible")
    if fast.status == "placed":
        check_honoured(buffers, fast.offsets, capacity)
    auto = place(buffers, capacity, method="auto", time_limit=5)
    assert auto.status in ("placed", "infeasible")
    if auto.status == "placed":
        check_honoured(buffers, auto.offsets, capacity)
    if fast.status == "placed":
        assert auto.status == "placed" and auto.method == "bestfit"


@SETTINGS
@given(instances(max_buffers=7), st.integers(0, 3))
def test_every_method_is_deterministic(instance, seed):
    buffers, capacity = instance
    for method in ("auto", "bestfit", "cpsat", "search"):
        first = place(buffers, capacity, method=method, seed=seed, time_limit=5)
        again = place(buffers, capacity, method=method, seed=seed, time_limit=5)
        assert (first.status, first.offsets, first.method) == (again.status, again.offsets, again.method)


@pytest.mark.parametrize("method", ["search", "cpsat"])
@settings(max_examples=30, deadline=None)
@given(instance=instances(max_buffers=7))
def test_minimize_capacity_is_tight_when_it_says_so(method, instance):
    buffers, _ = instance
    result = minimize_capacity(buffers, method=method, time_limit=5)
    if result.status == "infeasible":  # clashing pre-placed buffers: no capacity helps
        assert result.method == "bound"
        return
    capacity = result.stats["capacity"]
    assert capacity >= result.stats["lower_bound"] >= live_peak(buffers)
    assert validate(buffers, result.offsets, capacity, reported_height=capacity) == []
    if result.stats["proved_optimal"] and capacity > 0:
        assert place(buffers, capacity - 1, method="cpsat", time_limit=5).status == "infeasible"
