"""Simulated-annealing backend (registry name "anneal"): a joint local search over the whole Formulation.

``solve`` (``anneal.search``) is the entry point; ``anneal.units`` merges
nodes that force each other, ``anneal.model`` compiles the formulation for
incremental evaluation, ``anneal.guide`` runs the message-passing rounds,
``anneal.moves`` and ``anneal.state`` make and score the moves.
"""

from spyreopt.solvers.anneal.search import ACCEPTS, solve

__all__ = ["ACCEPTS", "solve"]
