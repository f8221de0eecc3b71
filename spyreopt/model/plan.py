"""Plan: a plan's data (``model.plan_data``) with what a user does with one: check it, explain it, read it.

The conveniences reach the modules that read a plan (the judges in ``model.check``, ``model.explain``,
``model.plan_table``), which take a ``PlanData``; none of them imports this module, so there is no circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from spyreopt.model.json_form import parse_json
from spyreopt.model.plan_data import PlanData
from spyreopt.model.plan_json import plan_fields
from spyreopt.model.plan_table import plan_table

if TYPE_CHECKING:
    from spyreopt.model.explanation import Explanation
    from spyreopt.model.problem import Problem


class Plan(PlanData):
    """Every decision of a solved graph, as ``so.solve`` returns it (fields: ``model.plan_data.PlanData``)."""

    @classmethod
    def from_dict(cls, data: Any) -> Plan:
        """The plan a JSON document describes, every field type-checked (FormatError naming the field)."""
        return cls(**plan_fields(data))

    @classmethod
    def from_json(cls, text: str) -> Plan:
        """``from_dict`` of a JSON text (FormatError when it is not JSON)."""
        return cls.from_dict(parse_json(text, "plan JSON"))

    def table(self, summary: bool = True, labels: dict[str, str] | None = None) -> str:
        """A readable per-op table with a legend and the edges not in place; the total line with ``summary``;
        ``labels`` (op -> text, e.g. the model's module path) adds a column."""
        return plan_table(self, summary, labels)

    def explain(self, op: str | None = None) -> Explanation:
        """Why each op (or only ``op``) has its decision: its best rejected alternatives with their exact plan
        cost and the price of each change, and why each edge not in place is not (``model.explain``)."""
        from spyreopt.model.explain import explain  # rebuilds the plan's Problem: loaded when asked

        return explain(self, op)

    def show(self):
        """Render the main pictures (scratchpad over time, cost breakdown) in a notebook."""
        from spyreopt import viz  # the model never depends on the pictures; showing one loads matplotlib

        return viz.show_plan(self)

    def validate(self, problem: Problem | None = None) -> None:
        """Raise PlanError naming the constraint, op, buffer and numbers if any hard constraint fails.

        The check judges the plan against the one-candidate Problem of its own choices. A planner that holds that
        Problem already (every op fixed, as it built it) passes it as ``problem``: it is used only if it is the very
        Problem the check would build (same graph, hardware, coefficients, choices and staging), else rebuilt."""
        from spyreopt.model.check.plans import check_plan  # the judge loads when asked

        check_plan(self, problem)
