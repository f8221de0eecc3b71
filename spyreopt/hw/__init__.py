"""The machine: ``spec`` (HardwareSpec presets), ``simulator`` (the plan simulator) and
``execute`` (numeric plan execution against a reference).

This package's ``__init__`` imports nothing: the model imports ``hw.spec``, and the
simulator and numerics load only where they are used (``spyreopt.simulate``,
``spyreopt.execute``). Plans of chosen decisions for measuring one op
(``plan_for``, ``simulate_op``) are in ``spyreopt.solving.fixed``: they place addresses
with a solver, which sits above the machine.
"""
