"""The second objective: a torch-spyre answer priced by spyreopt's fitted cost model instead of in bytes.

A spilled buffer costs its producer's write (none for the graph output) and each read residency would
have served, each one device-memory stream of ``size`` bytes at the fitted bandwidth plus the fitted
first-request latency (``costmodel.analytic.transfer_ns``); a resident buffer costs nothing. Ties go to
fewer cores: the objective is ``time_ps * W + cores`` with ``W`` larger than any sum of cores, so it is
lexicographic and exact in integers.

What the captures lack for a full time model: the ops themselves (kind, shape, work: no compute time, so
the cores a division uses cannot speed anything up, hence the tie-break toward fewer), which cores read
which bytes (no sharing or per-core balance), the stick layout and strides (no DMA request counts, no
restickify), relayout candidates and their prices, and the schedule's overlap of compute and memory.
"""

from __future__ import annotations

from spyreopt.costmodel.analytic import PS_PER_NS, transfer_ns
from spyreopt.costmodel.coefficients import Coefficients, default
from spyreopt.formats.torch_spyre import cores


def _weight(graph) -> int:
    return 32 * len(graph.buffers) + 1  # more than the cores of every buffer together


def spill_ps(b, c: Coefficients) -> int:
    """Predicted picoseconds of the device-memory traffic a buffer kept off chip causes."""
    if b.size < 0:
        return 0
    streams = max(0, len(b.uses) - 1) + (0 if b.boundary_cost else 1)
    return round(streams * transfer_ns(c, b.size, 0, 1) * PS_PER_NS)


def node_costs(graph, candidates, coefficients: Coefficients | None = None) -> list[list[int]]:
    """Per buffer, per candidate (division, resident, share): the lexicographic time-then-cores cost."""
    c = coefficients or default()
    w = _weight(graph)
    return [
        [(0 if r else spill_ps(b, c)) * w + cores(b, d) for d, r, _ in cands]
        for b, cands in zip(graph.buffers, candidates)
    ]


def predict(graph, answers, coefficients: Coefficients | None = None) -> tuple[float, int]:
    """(predicted spill time in µs, cores summed over the chosen divisions) of an answer."""

    c = coefficients or default()
    by = {a.name: a for a in answers}
    ps = sum(spill_ps(b, c) for b in graph.buffers if not by[b.name].resident)
    return ps / PS_PER_NS / 1000.0, sum(cores(b, by[b.name].division) for b in graph.buffers)
