"""What a capture produces: options, one record per captured graph, and the log of records."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field, fields
from typing import Any

from spyreopt.errors import SolverError
from spyreopt.hw.simulator import simulate as run_simulator
from spyreopt.integrations.inductor.names import Origin, rollup_key
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.plan import Plan
from spyreopt.model.restrict import CAPABILITIES
from spyreopt.solvers import registry

MODES = ("full", "analysis")
NO_ORIGIN = Origin(None, None)


@dataclass(frozen=True)
class Options:
    """How captured graphs are planned.

    ``backend``: any backend ``so.solve`` takes; ``"auto"`` (the default) chooses the method per graph,
    with repeated layers solved once. ``mode``: "full" lets Inductor generate and run code; "analysis" captures and plans,
    then runs the program eagerly (no code generation). ``solve=False`` only translates.
    ``forbid`` names capabilities the planner may not use, as ``so.solve(forbid=...)`` does
    (``("tiling",)`` plans every graph without tiled loops).
    """

    backend: str = "auto"
    time_limit: float = 30.0  # a whole model: at 10 s, auto's nominal build of a Llama-3-8B graph's three distinct
    # two-layer segments (147 ops, 0.05 s each) left each segment's search 0.2 s (592,094 us); at 30 s, idle, 303,623 us
    seed: int = 0
    mode: str = "full"
    solve: bool = True
    hardware: HardwareSpec | None = None
    forbid: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, options: dict[str, Any] | None) -> Options:
        options = dict(options or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(options) - known)
        if unknown:
            raise SolverError(f"spyreopt inductor options: unknown {unknown}; known: {sorted(known)}")
        if isinstance(options.get("forbid"), str):
            options["forbid"] = (options["forbid"],)
        opts = cls(**{**options, "forbid": tuple(options.get("forbid", ()))})
        if opts.mode not in MODES:
            raise SolverError(f"spyreopt inductor options: mode {opts.mode!r}; known: {list(MODES)}")
        known = ["auto", *registry.names()]  # exactly what ``so.solve`` takes
        if opts.backend not in known:
            raise SolverError(f"spyreopt inductor options: unknown backend {opts.backend!r}; known: {known}")
        if not opts.time_limit > 0:
            raise SolverError(f"spyreopt inductor options: time_limit must be > 0, got {opts.time_limit}")
        bad = sorted(set(opts.forbid) - set(CAPABILITIES))
        if bad:
            raise SolverError(f"spyreopt inductor options: cannot forbid {bad}; capabilities: {list(CAPABILITIES)}")
        return opts


@dataclass
class CapturedGraph:
    """One graph Inductor lowered: the spyreopt graph, its plan, and how they map back.

    ``error`` is set when the hook failed (translation or solve) and says why; the
    user's program compiled and ran regardless.
    """

    name: str
    kind: str  # forward | backward | inference
    options: Options
    graph: Graph | None = None
    plan: Plan | None = None
    op_buffer: dict[str, str] = field(default_factory=dict)  # plan op -> Inductor buffer
    counts: dict[str, int] = field(default_factory=dict)  # spyreopt ops by kind, plus "opaque"
    opaque: dict[str, str] = field(default_factory=dict)  # Inductor buffer -> reason
    notes: list[str] = field(default_factory=list)  # copies and device-memory reads added by the translation
    matmuls: list = field(default_factory=list)  # translate.MatmulInfo
    inductor_nodes: dict[str, int] = field(default_factory=dict)
    buffer_tensor: dict[str, str] = field(default_factory=dict)  # Inductor buffer -> the tensor holding its data
    buffer_strides: dict[str, tuple[int | None, ...]] = field(default_factory=dict)  # its dims' storage strides
    origins: dict[str, Origin] = field(default_factory=dict)  # Inductor buffer -> module path and source op
    capture_seconds: float = 0.0
    solve_seconds: float | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and (self.plan is not None or not self.options.solve)

    @property
    def loops(self) -> list[dict[str, Any]]:
        """The plan's tiled loops, each with the Inductor buffers its ops come from (empty without a plan)."""
        if self.plan is None:
            return []
        return [
            {"ops": list(lp.ops), "buffers": sorted({self.op_buffer.get(o, o) for o in lp.ops}), "dim": lp.dim,
             "op_dims": dict(lp.op_dims), "tiles": lp.tiles, "footprint_bytes": lp.footprint_bytes,
             "staged": list(lp.staged), "accumulate": lp.accumulate}
            for lp in self.plan.loops
        ]  # fmt: skip

    # ---- names from the model -------------------------------------------------------
    def origin(self, op: str) -> Origin:
        """Module path and source op of a plan op (through the Inductor buffer it was translated from)."""
        return self.origins.get(self.op_buffer.get(op, op), NO_ORIGIN)

    def label(self, op: str) -> str:
        """``model.layers.0.self_attn.q_proj (aten.mm)``, or the Inductor buffer when no module is known; the
        source op in parentheses when Inductor recorded one."""
        o = self.origin(op)
        where = self.op_buffer.get(op, op) if o.module is None else rollup_key(o.module, None)
        return f"{where} ({o.source})" if o.source else where

    @property
    def unnamed(self) -> list[str]:
        """Planned ops whose Inductor buffer has no module path (Inductor recorded none)."""
        return [o.name for o in self.graph.compute_ops() if self.origin(o.name).module is None] if (
            self.graph
        ) else []  # fmt: skip

    def rollup(self, depth: int | None = 3) -> dict[str, dict[str, float]]:
        """Predicted time and op count per module, paths cut to ``depth`` components (3: per layer,
        ``model.layers.0``; 4: per attention and MLP); "-" gathers the ops without a module."""
        out: dict[str, dict[str, float]] = {}
        for o in self.plan.ops if self.plan else ():
            row = out.setdefault(rollup_key(self.origin(o.name).module, depth), {"ops": 0, "predicted_us": 0.0})
            row["ops"] += 1
            row["predicted_us"] += o.predicted_us
        return out

    def report(self, simulate: bool = True) -> dict[str, Any]:
        """What the compile reports per graph: ops by kind, the method and its stages, solve seconds,
        predicted time and (``simulate``) the simulator's time, the ops without a module."""
        out: dict[str, Any] = {"graph": self.name, "kind": self.kind, "ops": dict(self.counts), "error": self.error}
        if self.plan is not None:
            auto = self.plan.stats.get("auto", {})
            out |= {
                "method": auto.get("method", self.plan.backend),
                "stages": [f"{st['backend']}({st.get('status', '?')})" for st in auto.get("stages", [])],
                "solve_s": self.solve_seconds, "predicted_us": self.plan.cost_us, "unnamed": len(self.unnamed),
            }  # fmt: skip
            if simulate:
                out["simulated_us"] = run_simulator(self.plan).time_us
        return out

    def table(self) -> str:
        """The plan table with each op's module path and source op."""
        if self.plan is None:
            return self.summary()
        return self.plan.table(labels={o.name: self.label(o.name) for o in self.plan.ops})

    def summary(self) -> str:
        head = f"{self.name} [{self.kind}]"
        if self.error:
            return f"{head}: FAILED: {self.error}"
        counts = ", ".join(f"{k} {v}" for k, v in self.counts.items())
        cost = f", predicted {self.plan.cost_us:.2f} us ({self.plan.status})" if self.plan else ""
        if self.plan is not None and self.plan.stats.get("auto"):
            cost += f", {self.plan.stats['auto']['method']}"
        if self.solve_seconds is not None:
            cost += f" in {self.solve_seconds:.1f} s"
        if self.plan is not None and self.origins:
            top = sorted(self.rollup(3).items(), key=lambda kv: -kv[1]["predicted_us"])[:3]
            cost += "; most time in " + ", ".join(f"{m} {r['predicted_us']:.1f} us" for m, r in top)
            unnamed = self.unnamed
            if unnamed:
                cost += f"; {len(unnamed)} op(s) without a module: {', '.join(unnamed[:5])}"
                cost += ", ..." if len(unnamed) > 5 else ""
        loops = "".join(
            f"; loop {i}: {len(lp['ops'])} ops {self.label(lp['ops'][0])}..{self.label(lp['ops'][-1])} "
            f"over {lp['dim']} in {lp['tiles']} "
            f"tiles, {lp['footprint_bytes']} B/core{', accumulating' if lp['accumulate'] else ''}"
            f"{', staged ' + ', '.join(lp['staged']) if lp['staged'] else ''}"
            for i, lp in enumerate(self.loops)
        )
        return f"{head}: {counts}{cost}{loops}"


_LOG: list[CapturedGraph] = []
_LOCK = threading.Lock()


def publish(record: CapturedGraph) -> None:
    with _LOCK:
        _LOG.append(record)


def plans() -> list[CapturedGraph]:
    """Every graph captured since the last ``clear()``, in capture order."""
    with _LOCK:
        return list(_LOG)


def clear() -> None:
    with _LOCK:
        _LOG.clear()
