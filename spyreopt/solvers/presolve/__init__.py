"""The one presolve shared by every backend (CVXPY-style: reductions with an exact inverse).

* ``domains(f, ...)``: which candidates and pairs any better solution may use
  (memory, arc consistency, bound pruning against a checked incumbent,
  huge costs, dominance); backends call it on the formulation they search
  (CP-SAT also per large-neighbourhood window).
* ``reduce_formulation(f, ...)``: the chain of reductions (the domain rules,
  folding, followers, leaf and series elimination) with ``Reduction.expand``
  and ``Reduction.project``; ``solvers.chain`` runs it before every backend.
* ``memory_limit(f)``: the one byte budget per time step.
"""

from spyreopt.solvers.presolve.bounds import term_minima_bound
from spyreopt.solvers.presolve.chain import Reduction, reduce_formulation
from spyreopt.solvers.presolve.domains import domains
from spyreopt.solvers.presolve.limits import memory_limit
from spyreopt.solvers.presolve.masks import Domains

__all__ = ["Domains", "Reduction", "domains", "memory_limit", "reduce_formulation", "term_minima_bound"]
