"""The one array form of an IOPDDL document, and the format's one shape check that builds it.

A production instance holds about four million numbers, so the checks are
vectorised: element types with one pass of ``type`` over the flattened lists,
values with array comparisons. ``validate`` also takes rows already flattened
(``sections``: the fast reader's, ``formats.iopddl_read``), so both readers run
exactly the same checks.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from spyreopt.errors import FormatError

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
FIELDS = (
    "problem.nodes.intervals",
    "problem.nodes.costs",
    "problem.nodes.usages",
    "problem.edges.nodes",
    "problem.edges.costs",
)
"""The document's list-of-rows members, by path."""


@dataclass(frozen=True)
class Instance:
    """A validated instance as flat int64 arrays: strategy ``s`` of node ``i`` at ``off[i] + s``.

    Edge ``j`` joins ``ends[endoff[j]:endoff[j+1]]`` (two nodes unless a hyperedge, which only the judge
    reads) and its row-major table (first node major) is ``ecost[eoff[j]:eoff[j+1]]``. Node ``i`` is live on
    the half-open ``[lo[i], hi[i])``.
    """

    name: str
    k: np.ndarray
    off: np.ndarray
    cost: np.ndarray
    usage: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    endoff: np.ndarray
    ends: np.ndarray
    eoff: np.ndarray
    ecost: np.ndarray
    usage_limit: int | None

    @classmethod
    def pairwise(cls, name, k, off, cost, usage, lo, hi, eu, ev, eoff, ecost, usage_limit) -> Instance:
        """An instance whose edges are the pairs ``(eu[j], ev[j])``."""
        ends = np.stack([np.asarray(eu, np.int64), np.asarray(ev, np.int64)], axis=1).reshape(-1)
        endoff = np.arange(0, 2 * len(eu) + 1, 2, dtype=np.int64)
        return cls(name, k, off, cost, usage, lo, hi, endoff, ends, eoff, ecost, usage_limit)

    @property
    def n(self) -> int:
        return len(self.k)

    @property
    def m(self) -> int:
        return len(self.endoff) - 1

    @cached_property
    def eu(self) -> np.ndarray:
        """First node of every edge (FormatError for a hyperedge: the engine and the Formulation are pairwise)."""
        arity = np.diff(self.endoff)
        if (arity != 2).any():
            j = int(np.flatnonzero(arity != 2)[0])
            raise FormatError(f"problem.edges.nodes[{j}]: {arity[j]} nodes; only pairwise edges [u, v] are solved")
        return self.ends[0::2].copy()

    @cached_property
    def ev(self) -> np.ndarray:
        """Second node of every edge."""
        self.eu  # noqa: B018 (the arity check)
        return self.ends[1::2].copy()


Rows = tuple[np.ndarray, np.ndarray]  # (flat int64 values, int64 length of every row)


def validate(data: Any, sections: dict[str, Rows] | None = None) -> Instance:
    """Check a contest document (or its ``problem`` member) and flatten it; FormatError names the bad field.

    ``sections`` maps members of ``FIELDS`` to rows already flattened (the document then holds any
    placeholder there)."""
    if isinstance(data, dict) and "problem" in data:
        data = data["problem"]
    p = _require_dict(data, "problem")
    nodes = _require_dict(_member(p, "nodes", "problem"), "problem.nodes")
    edges = _require_dict(_member(p, "edges", "problem"), "problem.edges")
    given = sections or {}

    def rows(where: str) -> Rows:
        parent, key = where.rsplit(".", 1)
        x = _member(nodes if parent == "problem.nodes" else edges, key, parent)
        if where in given:
            return given[where]
        _require_list(x, where)
        lengths = _lengths(x, where)
        return _ints(x, lengths, where), lengths

    iv, iv_len = rows("problem.nodes.intervals")
    cost, k = rows("problem.nodes.costs")
    usage, ku = rows("problem.nodes.usages")
    n = len(k)
    for field, count in (("intervals", len(iv_len)), ("usages", len(ku))):
        if count != n:
            raise FormatError(f"problem.nodes.{field}: {count} entries, problem.nodes.costs has {n}")
    if (iv_len != 2).any():
        i = int(np.flatnonzero(iv_len != 2)[0])
        raise FormatError(f"problem.nodes.intervals[{i}]: expected [lower, upper], got {iv_len[i]} numbers")
    iv = iv.reshape(n, 2)
    bad = (iv[:, 0] < 0) | (iv[:, 1] < iv[:, 0])
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise FormatError(
            f"problem.nodes.intervals[{i}]: {iv[i].tolist()} is not a half-open interval with 0 <= lower <= upper"
        )
    if (k == 0).any():
        raise FormatError(f"problem.nodes.costs[{int(np.argmin(k))}]: a node needs at least one strategy")
    if (ku != k).any():
        i = int(np.flatnonzero(ku != k)[0])
        raise FormatError(f"problem.nodes.usages[{i}]: {ku[i]} entries, problem.nodes.costs[{i}] has {k[i]}")
    off = offsets(k)
    _no_negative(cost, off, "problem.nodes.costs", "cost")
    _no_negative(usage, off, "problem.nodes.usages", "usage")
    ends, arity = rows("problem.edges.nodes")
    ecost, ke = rows("problem.edges.costs")
    if len(ke) != len(arity):
        raise FormatError(f"problem.edges.costs: {len(ke)} entries, problem.edges.nodes has {len(arity)}")
    if (arity == 0).any():
        raise FormatError(f"problem.edges.nodes[{int(np.argmin(arity))}]: an edge needs at least one node")
    endoff = offsets(arity)
    bad = (ends < 0) | (ends >= n)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        kk = int(np.searchsorted(endoff, j, side="right") - 1)
        raise FormatError(f"problem.edges.nodes[{kk}]: node {ends[j]} out of range 0..{n - 1}")
    size = np.multiply.reduceat(k[ends], endoff[:-1]) if len(ends) else np.zeros(0, np.int64)
    if (ke != size).any():
        j = int(np.flatnonzero(ke != size)[0])
        raise FormatError(
            f"problem.edges.costs[{j}]: {ke[j]} entries, the strategy counts of nodes "
            f"{ends[endoff[j] : endoff[j + 1]].tolist()} need {size[j]}"
        )
    eoff = offsets(ke)
    _no_negative(ecost, eoff, "problem.edges.costs", "cost")
    limit = p.get("usage_limit")
    if limit is not None:
        limit = check_int(limit, "problem.usage_limit")
        if limit < 0:
            raise FormatError(f"problem.usage_limit: negative limit {limit}")
    name = p.get("name", "iopddl")
    if not isinstance(name, str):
        raise FormatError(f"problem.name: expected a string, got {type(name).__name__}")
    lo, hi = iv[:, 0].copy(), iv[:, 1].copy()
    return Instance(name, k, off, cost, usage, lo, hi, endoff, ends, eoff, ecost, limit)


def _no_negative(values: np.ndarray, off: np.ndarray, where: str, what: str) -> None:
    if (values < 0).any():
        j = int(np.flatnonzero(values < 0)[0])
        i = int(np.searchsorted(off, j, side="right") - 1)
        raise FormatError(f"{where}[{i}][{j - off[i]}]: negative {what} {values[j]}")


def _member(d: dict, key: str, where: str) -> Any:
    if key not in d:
        raise FormatError(f"{where}.{key}: missing")
    return d[key]


def _require_dict(x: Any, where: str) -> dict:
    if not isinstance(x, dict):
        raise FormatError(f"{where}: expected an object, got {type(x).__name__}")
    return x


def _require_list(x: Any, where: str) -> list:
    if not isinstance(x, list):
        raise FormatError(f"{where}: expected a list, got {type(x).__name__}")
    return x


def check_int(x: Any, where: str) -> int:
    """``x`` if it is a signed 64-bit integer (bool is never a number in the format), else FormatError."""
    if isinstance(x, bool) or not isinstance(x, int):
        raise FormatError(f"{where}: expected an integer, got {x!r}")
    if not INT64_MIN <= x <= INT64_MAX:
        raise FormatError(f"{where}: {x} does not fit in a signed 64-bit integer")
    return x


def offsets(lengths: np.ndarray) -> np.ndarray:
    """Start of every row in the flat array, and the total at the end."""
    off = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=off[1:])
    return off


def _lengths(rows: list, where: str) -> np.ndarray:
    """Length of every row; every row must be a list."""
    if not set(map(type, rows)) <= {list}:
        i = next(i for i, r in enumerate(rows) if type(r) is not list)
        raise FormatError(f"{where}[{i}]: expected a list, got {type(rows[i]).__name__}")
    return np.fromiter(map(len, rows), np.int64, len(rows))


def _ints(rows: list, lengths: np.ndarray, where: str) -> np.ndarray:
    """The rows' entries flattened into int64, or FormatError at the first entry that is no 64-bit integer."""
    flat = list(itertools.chain.from_iterable(rows))
    ok = set(map(type, flat)) <= {int}
    if ok:
        try:
            return np.array(flat, dtype=np.int64).reshape(-1)
        except OverflowError:
            ok = False
    off = offsets(lengths)
    for j, v in enumerate(flat):  # the slow path only finds the culprit
        i = int(np.searchsorted(off, j, side="right") - 1)
        check_int(v, f"{where}[{i}][{j - off[i]}]")
    raise AssertionError("unreachable: a bad entry was detected above")
