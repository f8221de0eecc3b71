"""HardwareSpec: every machine constant the planner, cost model and simulator use.

Nothing Spyre-specific is a literal elsewhere: code reads these fields.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace

from spyreopt.errors import FormatError

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class HardwareSpec:
    name: str = "spyre"
    cores: int = 32
    lx_bytes: int = 2 * MiB
    program_reserve_bytes: int = 64 * 1024
    planner_fraction: float = 0.8
    stick_bytes: int = 128
    span_limit_bytes: int = 256 * MiB
    device_memory_bytes: int = 128 * GiB
    hbm_gbps_effective: float = 150.0  # one-way effective; 1 GB/s = 1 byte/ns
    hbm_gbps_balanced: float = 105.0
    hbm_gbps_peak: float = 204.8
    peak_macs_per_ns_per_core: float = 1536.0
    sustained_macs_per_ns_per_core: float = 1140.0
    corelets_per_core: int = 2
    pe_rows: int = 8
    pe_cols: int = 8
    vector_lanes_per_corelet: int = 64
    clock_ghz: float = 1.12
    ring_bytes_per_cycle: int = 128
    relayout_fan_in: int = 8
    dma_burst_sticks: int = 32
    dma_max_inflight: int = 8
    barrier_ns: float = 150.0

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name != "name" and (not isinstance(value, (int, float)) or value <= 0):
                raise FormatError(f"HardwareSpec.{f.name} must be a positive number, got {value!r}")
        if self.planner_fraction > 1:
            raise FormatError(f"HardwareSpec.planner_fraction must be <= 1, got {self.planner_fraction}")
        if self.program_reserve_bytes >= self.lx_bytes:
            raise FormatError("HardwareSpec.program_reserve_bytes must be smaller than lx_bytes")

    @property
    def planner_lx_bytes(self) -> int:
        """Scratchpad bytes per core the planner owns, a whole number of sticks."""
        raw = (self.lx_bytes - self.program_reserve_bytes) * self.planner_fraction
        return int(round(raw / self.stick_bytes)) * self.stick_bytes

    @property
    def ring_bytes_per_ns(self) -> float:
        return self.ring_bytes_per_cycle * self.clock_ghz

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> HardwareSpec:
        if not isinstance(data, dict):
            raise FormatError(f"hardware: expected an object, got {type(data).__name__}")
        known = {f.name: f for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise FormatError(f"hardware: unknown field(s) {unknown}")
        for key, value in data.items():
            if key != "name" and (isinstance(value, bool) or not isinstance(value, (int, float))):
                raise FormatError(f"hardware.{key}: expected a number, got {value!r}")
        return cls(**data)

    def with_(self, **changes) -> HardwareSpec:
        return replace(self, **changes)


PRESETS: dict[str, HardwareSpec] = {"spyre": HardwareSpec()}


def preset(name: str = "spyre") -> HardwareSpec:
    if name not in PRESETS:
        raise FormatError(f"unknown hardware preset {name!r}; known: {sorted(PRESETS)}")
    return PRESETS[name]
