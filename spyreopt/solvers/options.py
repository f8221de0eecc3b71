"""The options each backend with a heavy import takes besides ``time_limit`` and ``seed``, named here so that
``registry.check_options`` rejects a wrong one before any work without importing OR-Tools, PuLP or numba
(a second or more of a short limit). The backends read their own ``ACCEPTS`` from here."""

from __future__ import annotations

CPSAT = frozenset({"deterministic", "lns", "log", "window", "workers", "hint"})
MILP = frozenset({"solver", "hint"})
TRWS = frozenset({"rounds", "budget", "then_anneal"})  # and every anneal option (it goes on with anneal)
