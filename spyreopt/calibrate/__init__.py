"""Calibration: fit the cost model's coefficients to measured samples.

It sits above the simulator and the planner because sampling plans one op
(``spyreopt.solving.fixed``), places its addresses (``solvers``) and measures it on the
simulator (``hw``); the cost model it calibrates stays at the bottom, importing
none of them.
"""
