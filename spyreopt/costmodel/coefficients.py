"""Named cost-model coefficients, loaded from a data file (never literals in code)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from importlib import resources
from pathlib import Path

from spyreopt.errors import FormatError


@dataclass(frozen=True)
class Coefficients:
    hbm_bytes_per_ns: float  # one-way effective device-memory bandwidth
    hbm_mixed_ns_per_byte: float  # extra time per byte of min(read, write)
    hbm_request_ns: float  # controller time per DMA request (a short contiguous run costs a whole request)
    hbm_latency_ns: float  # latency before a device-memory stream's first request
    hbm_shared_bytes_per_ns: float  # one core's delivery rate of a read other cores share (served once)
    hbm_core_ns_per_byte: float  # a core's own DMA time per byte of its reads and write: a floor (0: none)
    macs_per_ns_per_core: float  # sustained matmul rate
    matmul_batch_ns_per_elem: float  # per left-operand element of each batch item after the first (0: none)
    pt_underfill_c: float  # PE-array efficiency 1 - c * rows^-p when a core gets few rows
    pt_underfill_p: float
    vector_elems_per_ns_per_core: float
    transcendental_weight: float  # exp, gelu, ... cost this many vector slots
    stick_reduce_penalty: float  # reducing along the stick dim is this much slower
    overlap_gamma: float  # op time = compute + mem - gamma * f * min(compute, mem)
    overlap_tile_bytes: float  # f = stream / (stream + this): a few-tile stream overlaps little (0: f = 1)
    relayout_run_ns: float  # relayout = runs * (a + b * log2(split)) + span / rate
    relayout_run_log_ns: float
    relayout_bytes_per_ns: float
    relayout_link_bytes_per_ns: float  # ring link rate: the busiest link's bytes bound a relayout
    relayout_hop_ns: float  # ring latency per hop of the farthest fragment
    restick_bytes_per_ns: float
    restick_run_ns: float  # per DMA request of the staging traffic
    restick_latency_ns: float  # fixed round trip of one restickify
    psum_bytes_per_ns: float  # partial-sum reduction of a k split over the ring
    op_overhead_ns: float  # launch and barrier per op

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> Coefficients:
        if not isinstance(data, dict):
            raise FormatError("coefficients: expected an object")
        names = {f.name for f in fields(cls)}
        missing, unknown = sorted(names - set(data)), sorted(set(data) - names)
        if missing or unknown:
            raise FormatError(f"coefficients: missing {missing}, unknown {unknown}")
        for k, v in data.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise FormatError(f"coefficients.{k}: expected a number, got {v!r}")
        return cls(**{k: float(v) for k, v in data.items()})

    @classmethod
    def load(cls, path: str | Path | None = None) -> Coefficients:
        """The shipped defaults, or a coefficient file written by ``spyreopt fit``."""
        if path is None:
            text = resources.files("spyreopt.costmodel").joinpath("spyre_default.json").read_text()
        else:
            text = Path(path).read_text()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise FormatError(f"coefficients file {path}: not valid JSON ({exc})") from exc
        return cls.from_dict(data.get("coefficients", data))


def default() -> Coefficients:
    return Coefficients.load()
