"""MILP backend (registry name "milp"): the Formulation as a mixed-integer program (PuLP; HiGHS or CBC).

``solve`` (``milp.backend``) starts from a checked incumbent, builds the model of
``milp.model`` over the shared presolve's domains, runs the solver
(``milp.run``) and cuts unplaceable buffer groups until the plan places.
"""

from spyreopt.solvers.milp.backend import ACCEPTS, solve

__all__ = ["ACCEPTS", "solve"]
