"""The machine: HardwareSpec presets, the plan simulator and numeric plan execution.

``simulate``, ``simulate_op``, ``plan_for``, ``SimResult``, ``SimParams``, ``execute``,
``reference`` and ``check_execution`` load on first use (the model imports
``hw.spec`` while it is itself being imported, so nothing heavy loads here).
"""

from __future__ import annotations

import importlib

_LAZY = {
    "simulate": "spyreopt.hw.simulator",
    "SimResult": "spyreopt.hw.simulator",
    "simulate_op": "spyreopt.hw.sim_fixed",
    "plan_for": "spyreopt.hw.sim_fixed",
    "SimParams": "spyreopt.hw.sim_machine",
    "reference": "spyreopt.hw.execute",
    "check_execution": "spyreopt.hw.execute",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "execute":  # the module spyreopt.hw.execute is callable: it runs a plan
        return importlib.import_module("spyreopt.hw.execute")
    raise AttributeError(f"module 'spyreopt.hw' has no attribute {name!r}")


__all__ = ["SimParams", "SimResult", "check_execution", "execute", "plan_for", "reference", "simulate", "simulate_op"]
