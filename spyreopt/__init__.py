"""spyreopt: joint planning of work division, stick layout, scratchpad residency,
relayouts and addresses for dataflow AI accelerators (IBM Spyre is the reference).

The public names load on first use (PEP 562), so ``import spyreopt`` and the
command line pay only for what they touch: a plan's solver backend, the cache's
disk store or the simulator's numerics are imported when first asked for.
"""

from __future__ import annotations

import importlib

# public name -> the module that defines it
_EXPORTS = {
    "Coefficients": "spyreopt.costmodel.coefficients",
    "FormatError": "spyreopt.errors",
    "GraphError": "spyreopt.errors",
    "InfeasibleError": "spyreopt.errors",
    "PlanError": "spyreopt.errors",
    "SolverError": "spyreopt.errors",
    "SpyreoptError": "spyreopt.errors",
    "Formulation": "spyreopt.model.formulation",
    "Graph": "spyreopt.model.graph",
    "DTYPES": "spyreopt.model.graph_parts",
    "POINTWISE_FUNCTIONS": "spyreopt.model.graph_parts",
    "REDUCTIONS": "spyreopt.model.graph_parts",
    "Plan": "spyreopt.model.plan",
    "Problem": "spyreopt.model.problem",
    "HardwareSpec": "spyreopt.model.hardware",
    "SimResult": "spyreopt.hw.simulator",
    "simulate": "spyreopt.hw.simulator",
    "check_execution": "spyreopt.hw.execute",
    "execute": "spyreopt.hw.execute",
    "reference": "spyreopt.hw.execute",
    "solve": "spyreopt.solving.entry",
    "solve_many": "spyreopt.batch",
    "PlanCache": "spyreopt.cache.store",
}
_SUBMODULES = ("presets", "workloads")

__all__ = sorted([*_EXPORTS, *_SUBMODULES])
__version__ = "0.1.0"


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"spyreopt.{name}")
    else:
        raise AttributeError(f"module 'spyreopt' has no attribute {name!r}")
    globals()[name] = value  # later look-ups bypass this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
