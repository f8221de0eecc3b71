"""What a plan's summary says besides its cost: which budget cut which stage, in words and µs.

Reads the structured record ``stats["limits"]`` (``{"cut": [{"stage", "by": "clock" | "work", "reached_us"}],
"fallback"}``) when the solve wrote one, else derives the same from what the stages record: ``stats["auto"]``
(and its timing), the presolve's ``cut_by_clock``, a backend's ``wall_limit_hit`` or ``budget_done``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spyreopt.limits import PAST_DEADLINE

if TYPE_CHECKING:
    from spyreopt.model.plan_data import PlanData


def budget_cuts(plan: PlanData) -> list[str]:
    """One sentence per stage a time or work budget cut (empty when every stage finished its own budget)."""
    stats = plan.stats
    limits = stats.get("limits")
    if isinstance(limits, dict):
        return _from_limits(limits)
    out = []
    auto = stats.get("auto") if isinstance(stats.get("auto"), dict) else {}
    timing = stats.get("timing", {}).get("auto", {}) if isinstance(stats.get("timing"), dict) else {}
    if auto.get("budget_cut") or timing.get("budget_cut") or "stopped on the clock" in plan.message:
        unit = stats.get("cost_unit_us", 1e-6)
        cut = [s for s in auto.get("stages", []) if s.get("status") == "timeout"]
        for s in cut:
            where = f" of segment {s['segment']}" if "segment" in s else ""
            out.append(f"auto's {s['backend']} stage{where} was cut by the clock{_reached(s, unit)}")
        if not cut:
            out.append(f"a stage of auto ({auto.get('method', 'its method')}) was cut by the clock")
    presolve = stats.get("presolve")
    if isinstance(presolve, dict) and presolve.get("cut_by_clock"):
        out.append(f"{plan.backend}'s presolve was cut by the clock: its reductions stopped early")
    if stats.get("wall_limit_hit") or stats.get("budget_done") is False or plan.status == "timeout":
        out.append(f"{plan.backend} was cut by the clock with a plan of {plan.cost_us:,.3f} µs")
    return out


def _from_limits(limits: dict[str, Any]) -> list[str]:
    out = []
    for c in limits.get("cut") or []:
        by = "the clock" if c.get("by") == "clock" else "its work budget"
        reached = c.get("reached_us")
        with_plan = "" if reached is None else f" with a plan of {reached:,.3f} µs"
        if c.get("stage") == PAST_DEADLINE:
            at = "" if reached is None else f" ({reached:,.3f} µs)"
            out.append(f"the plan{at} was ready only after the deadline (start-up and build overran it)")
            continue
        out.append(f"{c.get('stage', 'a stage')} was cut by {by}{with_plan}")
    if limits.get("fallback"):
        out.append(f"fell back to {limits['fallback']}")
    return out


def _reached(stage: dict, unit: float) -> str:
    objective = stage.get("objective")
    return "" if objective is None else f" with a plan of {objective * unit:,.3f} µs"


def summary_line(plan: PlanData, baselines: dict[str, float] | None = None, wall: str | None = None) -> str:
    """``total X µs predicted; baselines: independent Y µs (r x), hbm Z µs (r x)   [backend, status, time]``
    (r: the baseline's cost over the plan's)."""
    text = f"total {plan.cost_us:,.3f} µs predicted"
    if plan.bound_us is not None:
        text += f" (bound {plan.bound_us:,.3f} µs)"
    shown = [
        f"{name} {cost:,.3f} µs" + (f" ({cost / plan.cost_us:,.2f}x)" if plan.cost_us > 0 else "")
        for name, cost in (baselines or {}).items()
    ]
    if shown:
        text += "; baselines: " + ", ".join(shown)
    took = wall or (f"{plan.solve_seconds:.2f} s" if plan.solve_seconds else "")  # absent from saved JSON
    return text + f"   [{plan.backend}, {plan.status}{', ' + took if took else ''}]"
