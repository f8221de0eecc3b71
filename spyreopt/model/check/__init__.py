"""The judges of a plan, given what they judge: ``plans.check_plan(plan, problem)`` checks every hard
constraint against the one-candidate Problem of the plan's choices, ``loops.check_loops(plan)`` the tiled loops.

They read a ``PlanData`` and never the module (``model.plan``) whose ``Plan.validate`` calls them."""
