"""spyreopt: joint planning of work division, stick layout, scratchpad residency,
relayouts and addresses for dataflow AI accelerators (IBM Spyre is the reference).
"""

from spyreopt import models, workloads
from spyreopt.api import solve
from spyreopt.batch import solve_many
from spyreopt.cache import PlanCache
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import FormatError, GraphError, InfeasibleError, PlanError, SolverError, SpyreoptError
from spyreopt.hw.execute import check_execution, execute, reference
from spyreopt.hw.simulator import SimResult, simulate
from spyreopt.hw.spec import HardwareSpec
from spyreopt.model.formulation import Formulation
from spyreopt.model.graph import Graph
from spyreopt.model.plan import Plan
from spyreopt.model.problem import Problem

__all__ = [
    "Coefficients", "FormatError", "PlanCache", "solve_many", "Formulation", "Graph", "GraphError", "HardwareSpec", "InfeasibleError",
    "Plan", "PlanError", "Problem", "SimResult", "SolverError", "SpyreoptError", "check_execution", "execute",
    "models", "reference", "simulate", "solve", "workloads",
]  # fmt: skip
__version__ = "0.1.0"
