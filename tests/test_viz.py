"""Every picture renders for every workload and shows what matters (rectangles at addresses and lifetimes)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

import spyreopt as so  # noqa: E402
from spyreopt import viz  # noqa: E402
from spyreopt.cli import main  # noqa: E402

KIB = 1024


@pytest.fixture(scope="module")
def plans():
    return {name: so.solve(so.workloads.get(name), backend="greedy") for name in so.workloads.names()}


def _patches(fig, prefix):
    return {p.get_gid(): p for ax in fig.axes for p in ax.patches if isinstance(p, Rectangle) and (p.get_gid() or "").startswith(prefix)}


@pytest.mark.parametrize("name", so.workloads.names())
def test_scratchpad_chart_has_one_rectangle_per_resident_buffer(plans, name):
    plan = plans[name]
    fig = viz.scratchpad_chart(plan)
    rects = _patches(fig, "tensor:")
    resident = [t for t in plan.tensors if t.address is not None]
    assert len(rects) == len(resident)
    for t in resident:
        r = rects[f"tensor:{t.name}"]
        assert r.get_x() == t.lifetime[0] and r.get_width() == t.lifetime[1] - t.lifetime[0]
        assert r.get_y() == pytest.approx(t.address / KIB) and r.get_height() == pytest.approx(t.bytes_per_core / KIB)
    copies = _patches(fig, "copy:")
    assert len(copies) == sum(1 for e in plan.edges if e.copy_address is not None)
    plt.close(fig)


@pytest.mark.parametrize("name", so.workloads.names())
def test_division_and_cost_charts(plans, name):
    plan = plans[name]
    fig = viz.division_chart(plan)
    bars = [p for p in fig.axes[0].patches if isinstance(p, Rectangle)]
    assert [b.get_width() for b in bars] == [o.cores for o in plan.ops]
    plt.close(fig)
    fig = viz.cost_breakdown(plan)
    ax = fig.axes[0]
    # the stacked components of each op end at its total before overlap; minus the overlap it is the predicted time
    ends = {}
    for container in ax.containers[: len(viz.COMPONENTS)]:
        for i, bar in enumerate(container):
            ends[i] = max(ends.get(i, 0.0), bar.get_x() + bar.get_width())
    for i, o in enumerate(plan.ops):
        assert ends[i] + o.breakdown["overlap"] == pytest.approx(o.predicted_us, abs=1e-6)
    plt.close(fig)
    for fig in viz.show_plan(plan):
        plt.close(fig)


def test_backend_comparison_from_rows(plans):
    rows = []
    for name in ("softmax", "mlp"):
        for backend in ("greedy", "independent", "hbm"):
            plan = plans[name] if backend == "greedy" else so.solve(so.workloads.get(name), backend=backend)
            rows.append({"workload": name, "backend": backend, "cost_us": plan.cost_us})
    fig = viz.backend_comparison(rows, metric="cost_us")
    heights = [p.get_height() for p in fig.axes[0].patches]
    assert len(heights) == 6 and max(heights) > 1.0
    plt.close(fig)


def test_show_cli_writes_a_png(plans, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(plans["softmax"].to_json())
    out = tmp_path / "plan.png"
    assert main(["show", str(path), "--png", str(out)]) == 0
    assert out.stat().st_size > 10_000
