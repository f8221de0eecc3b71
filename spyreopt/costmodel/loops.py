"""The cost of running an op inside a tiled loop, per op and per candidate.

A loop over ``T`` tiles runs each of its ops ``T`` times on a tile of the tiled
dim (``model.tiling``). Against the same op untiled it pays:

* compute per tile: ``T`` times the compute of one tile, so a matmul tiled over
  its rows gets fewer rows per core and a lower PE-array efficiency;
* per-iteration overhead: each further iteration relaunches the op (its launch
  and barrier) and restarts each of its device-memory streams (the first
  request's latency);
* re-read traffic: an operand without the tiled dim is read again every
  iteration (``model.candidates`` multiplies its bytes and requests by ``T``);
* accumulation: an op tiled over its reduction adds every further tile's
  partial result into the on-chip accumulator (one vector pass over its output
  slice per tile).

Every term grows with ``T``, so more tiles are never free; what tiling buys is
the smaller footprint (one tile of each intermediate live), which lets the
intermediates stay on chip instead of round-tripping through device memory.
"""

from __future__ import annotations

import numpy as np

from spyreopt.costmodel.analytic import compute_ns, vector_compute_ns
from spyreopt.costmodel.coefficients import Coefficients


def tiled_compute_ns(c: Coefficients, matmul, work, rows, transcendental, stick_reduce, tiles, rows_tiled):
    """``tiles`` times the compute of one tile: work per core divided by ``tiles``, and a matmul's rows
    per core too when the tiled dim is its m."""
    t = np.asarray(tiles, dtype=np.float64)
    tile_rows = np.where(rows_tiled, np.ceil(np.asarray(rows, dtype=np.float64) / t), rows)
    return t * compute_ns(c, matmul, np.asarray(work, dtype=np.float64) / t, tile_rows, transcendental, stick_reduce)


def iteration_ns(c: Coefficients, tiles, streams):
    """Every iteration after the first: the op's launch and barrier, and the latency of each stream restarting."""
    return (np.asarray(tiles) - 1) * (c.op_overhead_ns + np.asarray(streams) * c.hbm_latency_ns)


def accumulate_ns(c: Coefficients, out_elems_per_core, tiles):
    """Adding every tile's partial result after the first into the on-chip accumulator."""
    return (np.asarray(tiles) - 1) * vector_compute_ns(c, out_elems_per_core, False, False)
