"""An IOPDDL instance as the engine's flat numpy arrays, checked by the format's one validator.

A 95 MB instance holds about four million numbers; ``formats.iopddl.validate``
flattens and checks them vectorised (orjson, no Python object per node), and
this module only names the arrays the way the engine uses them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources

import numpy as np

from spyreopt.errors import FormatError
from spyreopt.formats.iopddl import validate


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


def instance_from_document(doc: dict) -> Instance:
    """The format's checks (``formats.iopddl.validate``), then the engine's: pairwise edges only."""
    a = validate(doc)
    arity = np.diff(a.endoff)
    if (arity != 2).any():
        j = int(np.flatnonzero(arity != 2)[0])
        raise FormatError(f"problem.edges.nodes[{j}]: only pairwise edges [u, v] are supported")
    ends = a.ends.reshape(-1, 2)
    lo, hi = a.intervals[:, 0].copy(), a.intervals[:, 1].copy()
    eu, ev = ends[:, 0].copy(), ends[:, 1].copy()
    return Instance(a.name, a.k, a.off, a.cost, a.usage, lo, hi, eu, ev, a.eoff, a.ecost, a.usage_limit)


def contest_table() -> dict[str, dict[str, int]]:
    """Time limit (s) and best contest cost of all 25 public instances, by problem name."""
    text = resources.files("spyreopt.contest").joinpath("instances.json").read_text()
    return json.loads(text)["instances"]
