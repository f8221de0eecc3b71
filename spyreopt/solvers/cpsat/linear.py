"""Linear expressions over CP-SAT literals with an exact constant, and the int64 range check."""

from __future__ import annotations

import numpy as np
from ortools.sat.python import cp_model

from spyreopt.solvers.presolve.limits import I64_MAX

INT64_SAFE = 2**62


class Lin:
    """A linear expression collected as (literal, coefficient) lists and a Python-int constant."""

    def __init__(self) -> None:
        self.vars: list = []
        self.coefs: list[int] = []
        self.const = 0

    def add(self, lit, coef: int) -> None:
        coef = int(coef)
        if coef == 0:
            return
        if isinstance(lit, int):
            self.const += coef * lit
        else:
            self.vars.append(lit)
            self.coefs.append(coef)

    def expr(self):
        return cp_model.LinearExpr.weighted_sum(self.vars, self.coefs)

    def bounds(self) -> tuple[int, int]:
        """Loose bounds for 0/1 literals."""
        lo = self.const + sum(c for c in self.coefs if c < 0)
        hi = self.const + sum(c for c in self.coefs if c > 0)
        return lo, hi


def check_range(lo: int, hi: int, what: str) -> None:
    if max(abs(lo), abs(hi)) >= INT64_SAFE:
        raise OverflowError(f"{what}: range [{lo}, {hi}] exceeds int64")


def reparam(table: np.ndarray, ok: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``table = r[:, None] + c[None, :] + res`` on allowed pairs, keeping whichever form has more zeros."""
    big = np.where(ok, table, I64_MAX)
    r = big.min(axis=1)
    r = np.where(r == I64_MAX, 0, r)
    rest = np.where(ok, table - r[:, None], I64_MAX)
    c = rest.min(axis=0)
    c = np.where(c == I64_MAX, 0, c)
    res = np.where(ok, table - r[:, None] - c[None, :], 0)
    if np.count_nonzero(res) <= np.count_nonzero(np.where(ok, table, 0)):
        return r, c, res
    return np.zeros(len(r), np.int64), np.zeros(len(c), np.int64), np.where(ok, table, 0)
