"""Backends behind one interface: a name maps to a ``Backend`` entry that says where its solve function is and
which input it reads.

A formulation backend's module defines::

    def solve(f: Formulation, *, time_limit: float, seed: int, hint=None, **options) -> Solution

and runs through the reduction chain (``solve_formulation``); a baseline (``reads="problem"``) is a function
of the Spyre Problem itself, a fixed reference point with no search. ``solve`` runs either on the input its
entry names, so no caller tells them apart. Modules are imported lazily so that a missing optional dependency
surfaces as a clear error for that backend only, never as an import failure of the package.
"""

from __future__ import annotations

import importlib
import time
from dataclasses import dataclass
from typing import Any, Literal

from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.model.formulation import Formulation, Solution
from spyreopt.solvers import options
from spyreopt.solvers.presolve.feasibility import check_usage_feasible
from spyreopt.solvers.solving_chain import solve_chain


@dataclass(frozen=True)
class Backend:
    """Where a backend's solve function is, and the input it reads: the Formulation or the Spyre Problem."""

    module: str
    function: str = "solve"
    reads: Literal["formulation", "problem"] = "formulation"

    def load(self):
        return getattr(importlib.import_module(self.module), self.function)


BACKENDS: dict[str, Backend] = {
    "greedy": Backend("spyreopt.solvers.greedy"),
    "anneal": Backend("spyreopt.solvers.anneal"),
    "cpsat": Backend("spyreopt.solvers.cpsat"),
    "milp": Backend("spyreopt.solvers.milp"),
    "trws": Backend("spyreopt.solvers.trws"),  # the contest engine's start, then anneal
    "hbm": Backend("spyreopt.solvers.baselines", "hbm", reads="problem"),
    "independent": Backend("spyreopt.solvers.baselines", "independent", reads="problem"),
}


_BUILTIN = dict(BACKENDS)


def register(name: str, backend: Backend) -> None:
    """Add a backend (a formulation backend's module must define ``solve`` with the signature above)."""
    BACKENDS[name] = backend


def names() -> list[str]:
    return sorted(BACKENDS, key=lambda name: (BACKENDS[name].reads == "problem", name))


def entry(name: str) -> Backend:
    """The registry's entry for ``name``; a SolverError listing the known names when there is none."""
    if name not in BACKENDS:
        raise SolverError(f"unknown backend {name!r}; known backends: {', '.join(names())}")
    return BACKENDS[name]


def reads_problem(name: str) -> bool:
    """Whether ``name`` is a baseline that reads the Spyre Problem (a reference point, never a search)."""
    return entry(name).reads == "problem"


def get_backend(name: str):
    """The solve function of a formulation backend."""
    backend = entry(name)
    if backend.reads == "problem":
        raise SolverError(f"backend {name!r} is a Spyre baseline: it needs a spyreopt.Problem, use spyreopt.solve")
    try:
        return backend.load()
    except ImportError as exc:
        raise SolverError(f"backend {name!r} is unavailable: {exc}") from exc


def solve(problem: Any, name: str, *, time_limit: float, seed: int, **opts: Any) -> Solution:
    """Run backend ``name`` on the input its entry reads: the Spyre ``problem`` itself (a baseline) or its
    Formulation, through the reduction chain."""
    backend = entry(name)
    if backend.reads == "formulation":
        return solve_formulation(problem.formulation, name, time_limit=time_limit, seed=seed, **opts)
    sol = backend.load()(problem, time_limit=time_limit, seed=seed, **opts)
    sol.stats.setdefault("backend", name)
    return sol


CHAIN_OPTIONS = frozenset({"presolve"})  # ``solve_formulation``'s own options, for every formulation backend


def check_options(name: str, options: dict) -> None:
    """Reject, before any work, an option the backend does not take (its module's ``ACCEPTS``; a registered
    backend without one checks its own)."""
    backend = entry(name)
    known = _light_accepts(name)
    if known is None:
        try:
            module = importlib.import_module(backend.module)
        except ImportError as exc:
            raise SolverError(f"backend {name!r} is unavailable: {exc}") from exc
        known = getattr(module, "ACCEPTS", None)
    if known is not None and backend.reads == "formulation":
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
