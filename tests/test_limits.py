"""A time limit is a deadline from the start, what it cuts is recorded, and no backend answers worse than greedy.

No wall-clock assertion here (CI may be half as fast): a limit far below any build forces the cut, and the
properties asserted are structural (the record, the fallback's name, the exit status) or relative (costs).
"""

from __future__ import annotations

import time

import pytest

import spyreopt as so
from spyreopt import limits
from spyreopt.cli import main


def test_nested_deadlines_keep_the_earliest_and_pass_cuts_outwards():
    with limits.deadline(100.0) as outer:
        with limits.deadline(0.5) as inner:
            assert inner.at < outer.at and limits.current() is inner
            inner.cut("greedy", "clock", 12.5)
            inner.cut("greedy", "clock", 11.0)  # one entry per stage: the last result reached
            inner.fall_back("greedy")
        with limits.deadline(1000.0) as wide:
            assert wide.at == outer.at  # an inner block never extends the enclosing deadline
        assert limits.current() is outer
    assert outer.report() == {"cut": [{"stage": "greedy", "by": "clock", "reached_us": 11.0}], "fallback": "greedy"}
    assert limits.current() is None


def test_process_start_is_before_now():
    assert 0.0 < limits.process_age() and limits.process_start() < time.perf_counter()


@pytest.mark.parametrize("backend", ["cpsat", "anneal", "milp"])
def test_a_limit_shorter_than_the_build_falls_back_to_greedy_and_says_so(backend):
    plan = so.solve(so.workloads.get("softmax"), backend=backend, time_limit=0.001)
    plan.validate()
    report = plan.stats["limits"]
    assert report["fallback"] == "greedy" and {c["stage"] for c in report["cut"]} >= {backend}
    assert plan.backend == "greedy" and plan.stats["requested_backend"] == backend  # named, not only in the message
    assert "limited" in plan.message


@pytest.mark.parametrize("backend", ["auto", "anneal", "cpsat", "milp"])
def test_never_worse_than_greedy_at_the_same_limit(backend):
    graph = so.workloads.get("softmax")
    greedy = so.solve(graph, backend="greedy", time_limit=3.0)
    other = so.solve(graph, backend=backend, time_limit=3.0)
    if not (limits.limited(greedy.stats["limits"]) or limits.limited(other.stats["limits"])):
        assert other.cost_us <= greedy.cost_us
    if other.status != "optimal":  # "optimal" scope text only on optimal plans
        assert "optimal and bound" not in other.message


def test_greedy_is_reproducible_when_its_work_budget_ends_the_run():
    graph = so.workloads.get("mlp")
    a, b = (so.solve(graph, backend="greedy", time_limit=3.0) for _ in range(2))
    if not (limits.limited(a.stats["limits"]) or limits.limited(b.stats["limits"])):
        assert [vars(o) for o in a.ops] == [vars(o) for o in b.ops] and a.cost_us == b.cost_us


def test_strict_turns_a_limited_plan_into_exit_status_3(capsys):
    # in-process, the process started long ago: a short limit from process start has passed before the build
    assert main(["solve", "mlp", "--time-limit", "0.01", "--strict"]) == 3
    assert "limited" in capsys.readouterr().out
    assert main(["solve", "mlp", "--time-limit", "0.01"]) == 0


def test_unknown_options_are_rejected_by_every_backend():
    graph = so.workloads.get("mlp")
    for backend in ["auto", *so.solvers.registry.names()]:
        with pytest.raises(so.SpyreoptError, match="nonsense_option"):
            so.solve(graph, backend=backend, nonsense_option=3, time_limit=1.0)


@pytest.mark.parametrize("backend", ["auto", "greedy"])
def test_a_stitched_plan_that_cannot_be_repaired_is_replanned_not_refused(backend, monkeypatch):
    from spyreopt.errors import PlanError
    from spyreopt.solving import layers

    def refuse(*args, **kwargs):
        raise PlanError("decompose: refused for the test")

    monkeypatch.setattr(layers, "stitch", refuse)  # the one stitch, for auto and decompose="layers" alike
    graph = so.presets.get("tiny", seq=16)
    plan = so.solve(graph, backend=backend, decompose="layers" if backend != "auto" else None, time_limit=5.0)
    plan.validate()
    assert plan.stats["limits"]["fallback"] == "greedy (whole graph)" and "re-planned" in plan.message
