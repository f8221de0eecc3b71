"""Whole-model pictures aggregate by layer: a fixed size, and numbers that add up to the plan's."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

import spyreopt as so  # noqa: E402
from spyreopt import viz  # noqa: E402
from spyreopt.cli import main  # noqa: E402
from spyreopt.model.plan_table import AGGREGATE_OPS, group_table, groups_of, repeated_ops  # noqa: E402


@pytest.fixture(scope="module")
def plan():
    p = so.solve(so.workloads.get("layer_stack", layers=4), backend="greedy")
    assert len(p.ops) > AGGREGATE_OPS
    return p


def test_groups_are_the_layers_and_cover_every_op_once(plan):
    groups = groups_of(plan)
    assert [k for k, _ in groups][:4] == ["l0", "l1", "l2", "l3"]
    assert sorted(i for _, idx in groups for i in idx) == list(range(len(plan.ops)))
    merged = repeated_ops(plan)
    assert sum(len(idx) for _, idx in merged) == len(plan.ops)
    totals = [sum(plan.ops[i].predicted_us for i in idx) for _, idx in merged]
    assert totals == sorted(totals, reverse=True)
    assert any(name.startswith("*.") and len(idx) == 4 for name, idx in merged)
    table = group_table(plan)
    assert len(table.splitlines()) == len(groups) + 2


def test_occupancy_grid_holds_exactly_the_live_bytes(plan):
    grid = viz.occupancy_grid(plan)
    size = viz._capacity(plan) / viz.ADDRESS_BINS
    for step in range(len(plan.ops)):
        live = sum(
            t.bytes_per_core for t in plan.tensors if t.address is not None and t.lifetime[0] <= step < t.lifetime[1]
        )
        live += sum(
            e.copy_bytes_per_core
            for e in plan.edges
            if e.copy_address is not None and e.lifetime[0] <= step < e.lifetime[1]
        )
        assert grid[:, step].sum() * size == pytest.approx(live, rel=1e-9, abs=1e-6)
    binned = viz.occupancy_grid(plan, columns=10)
    assert binned.shape == (viz.ADDRESS_BINS, 10) and 0.0 <= binned.min() and binned.max() <= 1.0
    widths = np.diff(np.linspace(0, len(plan.ops), 11).astype(int))
    assert (binned * widths[None, :]).sum() == pytest.approx(grid.sum(), rel=1e-9)  # each column: its steps' mean


def test_overview_has_one_bar_per_layer_and_a_fixed_size(plan, tmp_path):
    fig = viz.plan_overview(plan)
    bars = fig.axes[0].containers[0]
    assert len(bars) == len(groups_of(plan))
    assert fig.get_size_inches()[1] * 110 <= 4000
    plt.close(fig)
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    out = tmp_path / "p.png"
    assert main(["show", str(path), "--png", str(out)]) == 0
    head = out.read_bytes()[16:24]
    width, height = int.from_bytes(head[:4], "big"), int.from_bytes(head[4:], "big")
    assert height <= 4000 and width <= 4000


def test_the_per_op_charts_aggregate_too_above_the_size(plan):
    """Notebooks call the per-op charts directly: on a whole model they draw the aggregated views."""
    fig = viz.cost_breakdown(plan)
    assert len(fig.axes[0].containers[0]) == len(groups_of(plan))
    plt.close(fig)
    fig = viz.scratchpad_chart(plan)
    assert fig.axes[0].images and fig.get_size_inches()[1] * 110 <= 4000
    plt.close(fig)
    fig = viz.division_chart(plan)
    assert len(fig.axes[0].containers[0]) == min(viz.TOP_OPS, len(repeated_ops(plan)))
    plt.close(fig)
