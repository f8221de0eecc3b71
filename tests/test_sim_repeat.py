"""A tiled loop that repeats one already simulated takes its times: the same verdict as simulating it again."""

from __future__ import annotations

import pytest

import spyreopt as so
from spyreopt.cli import main
from spyreopt.hw.simulator import simulate
from spyreopt.presets import get as preset


@pytest.fixture(scope="module")
def plan():
    """Two Llama-3-8B layers at 1,024 tokens, each layer planned once: the same attention loop in both."""
    p = so.solve(preset("llama-3-8b", seq=1024, layers=2), backend="greedy", decompose="layers")
    assert len(p.loops) >= 2
    return p


def test_repeated_loops_give_the_full_simulation(plan):
    steps = []
    fast = simulate(plan, progress=lambda done, total: steps.append((done, total)))
    full = simulate(plan, repeats=False)
    assert fast.repeated_loops >= 1 and full.repeated_loops == 0
    assert fast.time_us == full.time_us and fast.op_us == full.op_us and fast.breakdown == full.breakdown
    assert fast.op_start_us == full.op_start_us and fast.device_read_bytes == full.device_read_bytes
    assert fast.core_busy == pytest.approx(full.core_busy, rel=1e-12)
    assert [len(x) for x in fast.lx_occupancy] == [len(x) for x in full.lx_occupancy]
    assert [b for x in fast.lx_occupancy for _, b in x] == [b for x in full.lx_occupancy for _, b in x]
    assert [x["ops"] for x in fast.loops] == [x["ops"] for x in full.loops]
    assert steps[-1][0] == steps[-1][1] and all(a <= b for (a, _), (b, _) in zip(steps, steps[1:]))


def test_cli_simulate_says_what_it_reused(plan, tmp_path, capsys):
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    assert main(["simulate", str(path)]) == 0
    captured = capsys.readouterr()
    assert "repeat a loop simulated before" in captured.out and "simulated / predicted" in captured.out
    assert "simulate: " in captured.err  # the progress line
    assert main(["simulate", str(path), "--full"]) == 0
    assert "repeat a loop" not in capsys.readouterr().out
