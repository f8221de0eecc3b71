"""CP-SAT backend (registry name "cpsat"): the exact model over the shared presolve's domains.

``solve`` (``cpsat.backend``) warm-starts, searches the whole model or
large-neighbourhood windows (``cpsat.search``), and reports; the model is
``cpsat.model`` (nodes, objective, max terms) with ``cpsat.edges`` (pair
literals and links) and ``cpsat.memory`` (capacity and addresses).
"""

from spyreopt.solvers.cpsat.backend import ACCEPTS, solve

__all__ = ["ACCEPTS", "solve"]
