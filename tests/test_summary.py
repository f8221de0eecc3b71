"""The plan's summary: baselines beside the total, budget cuts in words and µs, each edge not in place by name."""

from __future__ import annotations

import re

import spyreopt as so
from spyreopt.cli import main
from spyreopt.model.plan_summary import budget_cuts, summary_line


def _plan():
    return so.solve(so.workloads.get("mlp"), backend="greedy")


def test_the_structured_limits_record_is_what_the_summary_says():
    plan = _plan()
    plan.stats["limits"] = {
        "cut": [
            {"stage": "anneal", "by": "clock", "reached_us": 12345.6789},
            {"stage": "cpsat", "by": "work", "reached_us": None},
        ],
        "fallback": "the hbm baseline",
    }
    assert budget_cuts(plan) == [
        "anneal was cut by the clock with a plan of 12,345.679 µs",
        "cpsat was cut by its work budget",
        "fell back to the hbm baseline",
    ]
    assert "budget: anneal was cut by the clock" in plan.table()


def test_without_the_record_the_cut_is_derived_from_the_stages():
    plan = _plan()
    assert budget_cuts(plan) == []
    plan.stats.pop("limits", None)  # a plan from before the record (every solve writes one now)
    plan.stats["auto"] = {
        "method": "exact",
        "stages": [{"backend": "cpsat", "status": "timeout", "objective": 2_000_000_000}],
    }
    plan.stats["timing"] = {"auto": {"budget_cut": True}}
    assert budget_cuts(plan) == ["auto's cpsat stage was cut by the clock with a plan of 2,000.000 µs"]
    plan.stats["auto"]["stages"][0]["status"] = "feasible"
    assert budget_cuts(plan) == ["a stage of auto (exact) was cut by the clock"]
    plan.stats = {"presolve": {"cut_by_clock": True}}
    assert budget_cuts(plan) == ["greedy's presolve was cut by the clock: its reductions stopped early"]


def test_summary_line_has_both_baselines_with_their_ratio():
    plan = _plan()
    line = summary_line(plan, {"independent": 2 * plan.cost_us, "hbm": 3000.0}, "1.0 s")
    assert line.startswith(f"total {plan.cost_us:,.3f} µs predicted; baselines: independent ")
    assert "(2.00x)" in line and "hbm 3,000.000 µs" in line and line.endswith("[greedy, feasible, 1.0 s]")


def test_cli_solve_prints_one_total_with_baselines_and_names_the_edges(capsys):
    assert main(["solve", "softmax", "--backend", "greedy"]) == 0
    out = capsys.readouterr().out
    totals = [line for line in out.splitlines() if line.startswith("total ")]
    assert len(totals) == 1 and "baselines: independent" in totals[0] and ", hbm " in totals[0]
    independent = float(re.search(r"independent ([\d,.]+) µs", totals[0]).group(1).replace(",", ""))
    g = so.workloads.get("softmax")
    assert abs(independent - so.solve(g, backend="independent").cost_us) < 1e-3
    assert "softmax.exp: softmax.exp -> softmax.sum: relayout" in out and "division: parts per iteration dim" in out
    assert "incumbent" not in out and not re.search(r"\d{9,}", out)  # no raw picoseconds
