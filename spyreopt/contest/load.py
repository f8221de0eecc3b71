"""Fast loading of an IOPDDL instance into flat numpy arrays (orjson, no per-element Python validation).

A 95 MB instance holds about four million numbers; building lists of Python
objects per node (as ``formats.iopddl.parse_problem`` does) costs tens of
seconds, so this loader flattens every nested list with ``np.fromiter`` and
checks the shapes with vectorised comparisons instead.
"""

from __future__ import annotations

import gzip
import itertools
import json
from dataclasses import dataclass
from importlib import resources
from os import PathLike
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from spyreopt.errors import FormatError


@dataclass(frozen=True)
class Instance:
    """One contest instance as flat arrays; strategy ``s`` of node ``i`` lives at ``off[i] + s``."""

    name: str
    k: np.ndarray  # int64 [n] strategy count
    off: np.ndarray  # int64 [n + 1] offsets into cost / usage
    cost: np.ndarray  # int64 [sum k]
    usage: np.ndarray  # int64 [sum k]
    lo: np.ndarray  # int64 [n] interval start (half-open)
    hi: np.ndarray  # int64 [n] interval end
    eu: np.ndarray  # int64 [m] first node of each edge
    ev: np.ndarray  # int64 [m] second node
    eoff: np.ndarray  # int64 [m + 1] offsets into ecost (row-major k[eu] x k[ev])
    ecost: np.ndarray  # int64 [sum k[eu] * k[ev]]
    usage_limit: int | None

    @property
    def n(self) -> int:
        return len(self.k)

    @property
    def m(self) -> int:
        return len(self.eu)


def read_document(path: str | PathLike) -> dict:
    """The parsed JSON document of a plain or gzipped file (detected by content)."""
    raw = Path(path).read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise FormatError(f"{path}: not valid JSON: {exc}") from exc


def _flat(rows: list, where: str, total: int | None = None) -> np.ndarray:
    try:
        flat = itertools.chain.from_iterable(rows)
        return np.fromiter(flat, np.int64, -1 if total is None else total)
    except (TypeError, ValueError, OverflowError) as exc:
        raise FormatError(f"{where}: expected lists of 64-bit integers ({exc})") from exc


def _lengths(rows: list, where: str) -> np.ndarray:
    try:
        return np.fromiter((len(r) for r in rows), np.int64, len(rows))
    except TypeError as exc:
        raise FormatError(f"{where}: expected a list of lists ({exc})") from exc


def _get(d: Any, key: str, where: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        raise FormatError(f"{where}.{key}: missing")
    return d[key]


def instance_from_document(doc: dict) -> Instance:
    """Validate shapes and build the arrays; FormatError names the first bad field."""
    p = doc["problem"] if isinstance(doc, dict) and "problem" in doc else doc
    nodes, edges = _get(p, "nodes", "problem"), _get(p, "edges", "problem")
    costs = _get(nodes, "costs", "problem.nodes")
    usages = _get(nodes, "usages", "problem.nodes")
    intervals = _get(nodes, "intervals", "problem.nodes")
    k = _lengths(costs, "problem.nodes.costs")
    n = len(k)
    if (k == 0).any():
        raise FormatError(f"problem.nodes.costs[{int(np.argmin(k))}]: a node needs at least one strategy")
    if len(usages) != n or len(intervals) != n:
        raise FormatError(f"problem.nodes: {n} costs, {len(usages)} usages, {len(intervals)} intervals")
    ku = _lengths(usages, "problem.nodes.usages")
    if (ku != k).any():
        i = int(np.flatnonzero(ku != k)[0])
        raise FormatError(f"problem.nodes.usages[{i}]: {ku[i]} entries, problem.nodes.costs[{i}] has {k[i]}")
    off = np.zeros(n + 1, np.int64)
    np.cumsum(k, out=off[1:])
    cost = _flat(costs, "problem.nodes.costs", int(off[-1]))
    usage = _flat(usages, "problem.nodes.usages", int(off[-1]))
    if (usage < 0).any():
        i = int(np.searchsorted(off, int(np.flatnonzero(usage < 0)[0]), side="right") - 1)
        raise FormatError(f"problem.nodes.usages[{i}]: negative usage")
    two = _lengths(intervals, "problem.nodes.intervals") != 2
    if two.any():
        raise FormatError(f"problem.nodes.intervals[{int(np.flatnonzero(two)[0])}]: expected [lower, upper]")
    iv = _flat(intervals, "problem.nodes.intervals", 2 * n).reshape(n, 2)
    bad = (iv[:, 0] < 0) | (iv[:, 1] < iv[:, 0])
    if bad.any():
        raise FormatError(f"problem.nodes.intervals[{int(np.flatnonzero(bad)[0])}]: need 0 <= lower <= upper")
    enodes = _get(edges, "nodes", "problem.edges")
    ecosts = _get(edges, "costs", "problem.edges")
    if len(ecosts) != len(enodes):
        raise FormatError(f"problem.edges.costs: {len(ecosts)} entries, problem.edges.nodes has {len(enodes)}")
    two = _lengths(enodes, "problem.edges.nodes") != 2
    if two.any():
        raise FormatError(
            f"problem.edges.nodes[{int(np.flatnonzero(two)[0])}]: only pairwise edges [u, v] are supported"
        )
    m = len(enodes)
    ends = _flat(enodes, "problem.edges.nodes", 2 * m).reshape(m, 2)
    bad = ((ends < 0) | (ends >= n)).any(axis=1)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        raise FormatError(f"problem.edges.nodes[{j}]: node index out of range 0..{n - 1}")
    eu, ev = ends[:, 0].copy(), ends[:, 1].copy()
    size = k[eu] * k[ev]
    ke = _lengths(ecosts, "problem.edges.costs")
    if (ke != size).any():
        j = int(np.flatnonzero(ke != size)[0])
        raise FormatError(f"problem.edges.costs[{j}]: {ke[j]} entries, the strategy counts need {size[j]}")
    eoff = np.zeros(m + 1, np.int64)
    np.cumsum(size, out=eoff[1:])
    ecost = _flat(ecosts, "problem.edges.costs", int(eoff[-1]))
    limit = p.get("usage_limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise FormatError(f"problem.usage_limit: expected a non-negative integer, got {limit!r}")
    name = p.get("name", "iopddl")
    if not isinstance(name, str):
        raise FormatError(f"problem.name: expected a string, got {type(name).__name__}")
    return Instance(name, k, off, cost, usage, iv[:, 0].copy(), iv[:, 1].copy(), eu, ev, eoff, ecost, limit)


def contest_table() -> dict[str, dict[str, int]]:
    """Time limit (s) and best contest cost of all 25 public instances, by problem name."""
    text = resources.files("spyreopt.contest").joinpath("instances.json").read_text()
    return json.loads(text)["instances"]
