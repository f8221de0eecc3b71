"""Backends behind one interface: a name maps to a module with a ``solve`` function.

Every backend module defines::

    def solve(f: Formulation, *, time_limit: float, seed: int, hint=None, **options) -> Solution

Modules are imported lazily so that a missing optional dependency surfaces as a
clear error for that backend only, never as an import failure of the package.
"""

from __future__ import annotations

import importlib
import time
from typing import Any

from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model.formulation import Formulation, Solution
from spyreopt.solvers import options
from spyreopt.solvers.presolve.feasibility import check_usage_feasible
from spyreopt.solvers.solving_chain import solve_chain

# name -> module with ``solve``; or "module:function" for a baseline that reads the Spyre Problem itself
BACKENDS: dict[str, str] = {
    "greedy": "spyreopt.solvers.greedy",
    "anneal": "spyreopt.solvers.anneal",
    "cpsat": "spyreopt.solvers.cpsat",
    "milp": "spyreopt.solvers.milp",
    "trws": "spyreopt.solvers.trws",  # the contest engine's start, then anneal
    "hbm": "spyreopt.solvers.baselines:hbm",
    "independent": "spyreopt.solvers.baselines:independent",
}


_BUILTIN = dict(BACKENDS)


def _reads_problem(name: str) -> bool:
    return ":" in BACKENDS.get(name, "")


def register(name: str, module: str) -> None:
    """Add a backend: ``module`` must define ``solve`` with the signature above."""
    BACKENDS[name] = module


def names() -> list[str]:
    return sorted(BACKENDS, key=lambda name: (_reads_problem(name), name))


def get_problem_backend(name: str):
    """The solve function of a baseline that needs the Problem, or None for formulation backends."""
    if not _reads_problem(name):
        return None
    module, func = BACKENDS[name].split(":")
    return getattr(importlib.import_module(module), func)


def get_backend(name: str):
    if _reads_problem(name):
        raise SolverError(f"backend {name!r} is a Spyre baseline: it needs a spyreopt.Problem, use spyreopt.solve")
    if name not in BACKENDS:
        raise SolverError(f"unknown backend {name!r}; known backends: {', '.join(names())}")
    try:
        module = importlib.import_module(BACKENDS[name])
    except ImportError as exc:
        raise SolverError(f"backend {name!r} is unavailable: {exc}") from exc
    return module.solve


CHAIN_OPTIONS = frozenset({"presolve"})  # ``solve_formulation``'s own options, for every formulation backend


def check_options(name: str, options: dict) -> None:
    """Reject, before any work, an option the backend does not take (its module's ``ACCEPTS``; a registered
    backend without one checks its own)."""
    if name not in BACKENDS:
        raise SolverError(f"unknown backend {name!r}; known backends: {', '.join(names())}")
    known = _light_accepts(name)
    if known is None:
        try:
            module = importlib.import_module(BACKENDS[name].split(":")[0])
        except ImportError as exc:
            raise SolverError(f"backend {name!r} is unavailable: {exc}") from exc
        known = getattr(module, "ACCEPTS", None)
    if known is not None and not _reads_problem(name):
        known = known | CHAIN_OPTIONS  # every formulation backend runs through the chain, which takes these
    unknown = sorted(set(options) - known) if known is not None else []
    if unknown:
        raise SolverError(
            f"backend {name!r}: unknown option(s) {', '.join(unknown)}; known: {', '.join(sorted(known)) or 'none'}"
        )


def _light_accepts(name: str) -> frozenset[str] | None:
    """The options of a built-in backend with a heavy import, without importing it (``solvers.options``)."""
    if BACKENDS.get(name) != _BUILTIN.get(name):
        return None  # re-registered: its module says
    if name == "trws":
        from spyreopt.solvers.anneal.search import ACCEPTS as anneal_accepts

        return options.TRWS | anneal_accepts
    return {"cpsat": options.CPSAT, "milp": options.MILP}.get(name)


def solve_formulation(
    f: Formulation,
    backend: str = "greedy",
    *,
    time_limit: float = 10.0,
    seed: int = 0,
    presolve: bool = True,
    **options: Any,
) -> Solution:
    """Run one backend through the reduction chain (``solving_chain``; ``presolve=False`` skips it).

    A backend that raises is reported as a typed error naming it, never swallowed.
    """
    solve = get_backend(backend)
    if time_limit <= 0:
        raise SolverError(f"time_limit must be positive, got {time_limit}")
    check_usage_feasible(f)
    start = time.perf_counter()
    try:
        if presolve:
            sol = solve_chain(f, backend, get_backend, time_limit=time_limit, seed=seed, **options)
        else:
            sol = solve(f, time_limit=time_limit, seed=seed, **options)
    except (SolverError, InfeasibleError):
        raise
    except Exception as exc:  # a solver crash becomes a typed error naming the backend
        raise SolverError(f"backend {backend!r} failed: {type(exc).__name__}: {exc}") from exc
    sol.stats.setdefault("backend", backend)
    if not sol.seconds:
        sol.seconds = time.perf_counter() - start
    return sol
