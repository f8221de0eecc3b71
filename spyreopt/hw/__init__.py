"""The machine as a judge: ``simulator`` (the plan simulator) and ``execute`` (numeric plan execution
against a reference). Its description, ``HardwareSpec`` and the presets, is ``model.hardware``: the planner,
the cost model and the simulator all read it, so it sits in the model's layer, below this one.

This package's ``__init__`` imports nothing: the simulator and numerics load only where they are used
(``spyreopt.simulate``, ``spyreopt.execute``). Plans of chosen decisions for measuring one op (``plan_for``,
``simulate_op``) are in ``spyreopt.solving.fixed``: they place addresses with a solver, which sits above the machine.
"""
