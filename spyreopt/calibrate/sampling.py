"""Configurations to fit the cost model on: small graphs per op family, decisions drawn
from the planner's own candidates, measured on the simulator (or read from a CSV).

A ``Config`` is one measurable configuration: a family's small graph (rebuilt from
its kind, operand shapes and dtype) and a decision per op (division factors, output
stick dim, residency), plus what is measured. Families and their graphs (op names
in parentheses; ``pre`` = a ``neg`` op produces the first operand on chip, so it can
be resident):

========== ====================================== ===============================
family     graph                                  measured (``target``)
========== ====================================== ===============================
matmul     a[m,k] @ b[k,n] (``mm``)               op time of ``mm``
bmm        a[B..,m,k] @ b[B..,k,n] or b[k,n]      op time of ``mm``
pointwise  fn(x[, y]) with broadcasting (``pw``)  op time of ``pw``
reduction  fn(x) over one dim, keepdim (``red``)  op time of ``red``
softmax    the decomposed softmax (``sm.*``)      total time of the graph
relayout   exp(x) (``p``) -> neg (``c``)           the relayout phase of ``c``
restickify exp(x) (``p``) -> neg (``c``)           the restickify phase of ``c``
========== ====================================== ===============================

CSV columns (one configuration per row; ``read_csv``/``write_csv``):

* ``family``: one of the families above;
* ``kind``: the measured op's function: ``matmul``; a pointwise fn (``exp``,
  ``add``, ...); ``sum:1`` (a reduction fn and its dim); ``softmax``; for relayout
  and restickify the consumer's fn (``neg``);
* ``shapes``: the graph inputs' shapes in order, ``x``-separated dims, ``;`` between
  inputs (``256x1024;1024x512``);
* ``dtype``: ``fp16``, ``bf16``, ``fp32`` or ``fp8``;
* ``pre``: 1 if the first input goes through the on-chip ``pre`` op, else 0;
* ``decisions``: ``op=factors/stick/residency`` per op, ``;``-separated, factors in
  iteration-dim order ``x``-separated (``pre=4x8/1/lx;mm=2x4x1/1/hbm``);
* ``target``: ``op:NAME`` (that op's time), ``total`` (the whole graph),
  ``relayout:NAME`` or ``restickify:NAME`` (that phase of the op);
* ``measured_us``: the measured time in microseconds.

Plans are derived with the reference coefficients (the public figures,
``spyre_public.json``), never the shipped default, so a sample set and a fit are
reproducible whatever coefficients are installed: the candidates drawn from and
the edge modes that follow from the decisions (relayout or device-memory read of
an ``lx+hbm`` tensor) do not change when the default is refitted. A user with a
device runs these configurations, writes the times into ``measured_us`` and
refits with ``spyreopt fit --csv``.
"""

from __future__ import annotations

import csv
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.errors import FormatError, GraphError, InfeasibleError, PlanError
from spyreopt.model.graph import Graph
from spyreopt.model.graph_parts import DTYPE_BYTES, POINTWISE_FNS, REDUCE_FNS
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.problem import Problem

FAMILIES = ("matmul", "bmm", "pointwise", "reduction", "softmax", "relayout", "restickify")
RESIDENCIES = ("hbm", "lx", "lx+hbm")
TARGETS = ("op", "total", "relayout", "restickify")
COLUMNS = ("family", "kind", "shapes", "dtype", "pre", "decisions", "target", "measured_us")
BINARY = ("add", "sub", "mul", "div", "max", "min", "pow")  # pointwise fns of two operands
DRAWN_FNS = ("add", "sub", "mul", "div", "neg", "exp", "gelu", "relu", "silu")
DTYPES = ("fp16", "fp16", "fp16", "fp16", "bf16", "fp32", "fp8")  # drawn uniformly: mostly fp16, as the workloads

MAX_LAYOUTS = 24  # layouts per stick dim drawn from: the planner keeps 6, so this spreads wider
Decision = tuple[tuple[int, ...], int, str]  # division factors, output stick dim, residency


def reference_coefficients() -> Coefficients:
    """The public figures of the Spyre compiler (DESIGN section 5): plans of samples are derived with these."""
    return Coefficients.load(resources.files("spyreopt.costmodel").joinpath("spyre_public.json"))


@dataclass(frozen=True)
class Config:
    """One measurable configuration: a family's graph and a decision per op."""

    family: str
    kind: str
    shapes: tuple[tuple[int, ...], ...]
    dtype: str
    pre: bool
    decisions: tuple[tuple[str, Decision], ...]  # in op order
    target: str  # "op:NAME", "total", "relayout:NAME", "restickify:NAME"

    def graph(self) -> Graph:
        return build_graph(self.family, self.kind, self.shapes, self.dtype, self.pre)

    def decision_map(self) -> dict[str, Decision]:
        return dict(self.decisions)

    def stage_masks(self) -> dict[str, int] | None:
        """Ops' input-staging bits (``model.staging``); a sampled configuration stages nothing."""
        return None


@dataclass(frozen=True)
class Sample:
    config: Config
    measured_us: float


# ---- the families' graphs ---------------------------------------------------------
def build_graph(family: str, kind: str, shapes, dtype: str, pre: bool) -> Graph:
    """The small graph of a family (op names as in the module docstring)."""
    if family not in FAMILIES:
        raise FormatError(f"family {family!r}: expected one of {', '.join(FAMILIES)}")
    g = Graph(f"fit_{family}")
    names = ["a", "b"] if family in ("matmul", "bmm") else ["x", "y"]
    if len(shapes) > len(names):
        raise FormatError(f"family {family!r}: at most {len(names)} input shapes, got {len(shapes)}")
    xs = [g.input(n, s, dtype) for n, s in zip(names, shapes)]
    if not xs:
        raise FormatError(f"family {family!r}: no input shapes")
    if pre:
        xs[0] = g.pointwise("neg", xs[0], name="pre")
    if family in ("matmul", "bmm"):
        _arity(family, kind, xs, 2, "matmul")
        g.output(g.matmul(xs[0], xs[1], name="mm"))
    elif family == "pointwise":
        _arity(family, kind, xs, 2 if kind in BINARY else 1, kind if kind in POINTWISE_FNS else None)
        g.output(g.pointwise(kind, *xs, name="pw"))
    elif family == "reduction":
        fn, _, dim = kind.partition(":")
        _arity(family, kind, xs, 1, kind if fn in REDUCE_FNS and dim.lstrip("-").isdigit() else None)
        g.output(g.reduce(fn, xs[0], int(dim), name="red"))
    elif family == "softmax":
        _arity(family, kind, xs, 1, "softmax")
        g.output(g.softmax(xs[0], name="sm"))
    else:
        _arity(family, kind, xs, 1, kind if kind in POINTWISE_FNS else None)
        g.output(g.pointwise(kind, g.pointwise("exp", xs[0], name="p"), name="c"))
    return g


def _arity(family: str, kind: str, xs: list, n: int, expected_kind: str | None) -> None:
    if expected_kind != kind:
        raise FormatError(f"family {family!r}: kind {kind!r} is not valid here")
    if len(xs) != n:
        raise FormatError(f"family {family!r} kind {kind!r}: expected {n} input shape(s), got {len(xs)}")


def _pow2(r: random.Random, lo: int, hi: int) -> int:
    return 1 << r.randint(lo, hi)


def _random_graph_spec(family: str, r: random.Random) -> tuple[str, tuple, bool]:
    """(kind, shapes, pre) spread over sizes from a few sticks to megabytes."""
    pre = r.random() < 0.4
    if family == "matmul":
        m, k, n = _pow2(r, 3, 11), _pow2(r, 6, 13), _pow2(r, 6, 13)
        return "matmul", ((m, k), (k, n)), pre
    if family == "bmm":
        batch = tuple(_pow2(r, 0, 3) for _ in range(r.randint(1, 2)))
        m, k, n = _pow2(r, 4, 9), _pow2(r, 6, 9), _pow2(r, 6, 9)
        b = batch + (k, n) if r.random() < 0.6 else (k, n)
        return "matmul", (batch + (m, k), b), pre
    rows, cols = _pow2(r, 4, 11), _pow2(r, 6, 12)
    if family == "pointwise":
        fn = r.choice(DRAWN_FNS)
        if fn not in BINARY:
            return fn, ((rows, cols),), pre
        return fn, ((rows, cols), (rows, cols) if r.random() < 0.5 else (cols,)), pre
    if family == "reduction":
        return f"{r.choice(sorted(REDUCE_FNS))}:{r.choice([1, 1, 0])}", ((rows, cols),), pre
    if family == "softmax":
        return "softmax", ((min(rows, 1024), cols),), False
    return "neg", ((_pow2(r, 5, 11), _pow2(r, 7, 12)),), False


# ---- drawing decisions from the planner's candidates --------------------------------
def _edge_mode_wanted(family: str) -> str | None:
    return family if family in ("relayout", "restickify") else None


def _draw_assignment(problem: Problem, family: str, r: random.Random) -> list[int] | None:
    """A random candidate per op with every edge allowed (and the family's edge mode), or None."""
    want = _edge_mode_wanted(family)
    if want is not None:  # two ops, one edge: draw among the pairs with that mode
        pairs = [
            (su, sv)
            for su in range(len(problem.candidates[0]))
            for sv in range(len(problem.candidates[1]))
            if (info := problem.pair(0, su, sv)) is not None and info.mode == want
        ]
        return list(r.choice(pairs)) if pairs else None
    for _ in range(50):
        a = [r.randrange(len(c)) for c in problem.candidates]
        if all(problem.pair(k, a[e.producer], a[e.consumer]) is not None for k, e in enumerate(problem.edges)):
            return a
    return None


def _target(family: str) -> str:
    return {"matmul": "op:mm", "bmm": "op:mm", "pointwise": "op:pw", "reduction": "op:red", "softmax": "total"}.get(
        family, f"{family}:c"
    )


def random_config(family: str, r: random.Random, hw: HardwareSpec, dtype: str | None = None) -> Config:
    """A random legal configuration of a family whose buffers fit the scratchpad (``dtype`` None: drawn)."""
    from spyreopt.solvers.addresses import place_assignment  # the solvers build on the model: import late

    ref = reference_coefficients()
    for _ in range(200):
        kind, shapes, pre = _random_graph_spec(family, r)
        dt = dtype or r.choice(DTYPES)
        try:
            graph = build_graph(family, kind, shapes, dt, pre)
            problem = Problem(graph, hw, ref, max_layouts=MAX_LAYOUTS, tiling=False)  # a Config records no loop
        except GraphError:
            continue
        a = _draw_assignment(problem, family, r)
        if a is None:
            continue
        decisions = tuple(
            (
                o.name,
                (problem.layout(i, s).division.factors, problem.layout(i, s).stick, problem.candidates[i][s].residency),
            )
            for (i, o), s in zip(enumerate(problem.ops), a)
        )
        fixed = Problem(graph, hw, ref, fixed=dict(decisions))
        if place_assignment(fixed.formulation, fixed.normalize([0] * len(fixed.ops))) is None:
            continue
        return Config(family, kind, shapes, dt, pre, decisions, _target(family))
    raise RuntimeError(f"no legal configuration of family {family!r} found in 200 draws")


def random_configs(
    per_family: int, seed: int, hw: HardwareSpec | None = None, families: Iterable[str] = FAMILIES
) -> list[Config]:
    """``per_family`` configurations of each family, reproducible from ``seed``."""
    hw = hw or HardwareSpec()
    out = []
    for family in families:
        r = random.Random(f"{seed}:{family}")
        out.extend(random_config(family, r, hw) for _ in range(per_family))
    return out


# ---- measuring on the simulator ---------------------------------------------------
def measure(config: Config, hw: HardwareSpec | None = None) -> float:
    """The simulator's time of the configuration's target, in microseconds."""
    from spyreopt.hw.simulator import simulate
    from spyreopt.solving.fixed import plan_for

    plan = plan_for(config.graph(), config.decision_map(), hw, reference_coefficients())
    result = simulate(plan)
    quantity, _, op = config.target.partition(":")
    if quantity == "total":
        return result.time_us
    if quantity == "op":
        return result.op_us[op]
    return result.breakdown[op][quantity]


def simulate_samples(
    configs: Iterable[Config], hw: HardwareSpec | None = None, progress: Callable[[int], None] | None = None
) -> tuple[list[Sample], list[tuple[Config, str]]]:
    """Measure every configuration; those the simulator rejects come back with the reason (never silently)."""
    samples, rejected = [], []
    for n, config in enumerate(configs):
        try:
            samples.append(Sample(config, measure(config, hw)))
        except (PlanError, InfeasibleError) as exc:
            rejected.append((config, str(exc)))
        if progress is not None:
            progress(n + 1)
    return samples, rejected


# ---- CSV --------------------------------------------------------------------------
def _dims(text: str) -> tuple[int, ...]:
    return tuple(int(d) for d in text.split("x"))


def _format_decisions(decisions) -> str:
    return ";".join(f"{op}={'x'.join(map(str, f))}/{stick}/{res}" for op, (f, stick, res) in decisions)


def _parse_decisions(text: str) -> tuple[tuple[str, Decision], ...]:
    out = []
    for part in text.split(";"):
        op, _, rest = part.partition("=")
        factors, stick, residency = rest.split("/")
        if residency not in RESIDENCIES:
            raise ValueError(f"residency {residency!r} of op {op!r} is not one of {', '.join(RESIDENCIES)}")
        out.append((op.strip(), (_dims(factors), int(stick), residency)))
    return tuple(out)


def config_row(config: Config) -> dict[str, str]:
    return {
        "family": config.family,
        "kind": config.kind,
        "shapes": ";".join("x".join(map(str, s)) for s in config.shapes),
        "dtype": config.dtype,
        "pre": str(int(config.pre)),
        "decisions": _format_decisions(config.decisions),
        "target": config.target,
    }


def write_csv(samples: Iterable[Sample], path: str | Path) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        for s in samples:
            w.writerow({**config_row(s.config), "measured_us": repr(float(s.measured_us))})


def read_csv(path: str | Path) -> list[Sample]:
    """Samples from a CSV (columns in the module docstring); FormatError names the row and column."""
    p = Path(path)
    if not p.is_file():
        raise FormatError(f"samples CSV {str(p)!r} does not exist")
    with open(p, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise FormatError(f"samples CSV {p}: missing column(s) {missing}; expected {', '.join(COLUMNS)}")
        return [_row_sample(p, n, row) for n, row in enumerate(reader, start=2)]


def _row_sample(path: Path, line: int, row: dict[str, str]) -> Sample:
    column = "family"
    try:
        family = row["family"].strip()
        if family not in FAMILIES:
            raise ValueError(f"expected one of {', '.join(FAMILIES)}")
        column = "shapes"
        shapes = tuple(_dims(s) for s in row["shapes"].split(";"))
        column = "dtype"
        if row["dtype"] not in DTYPE_BYTES:
            raise ValueError(f"expected one of {', '.join(DTYPE_BYTES)}")
        column = "pre"
        if row["pre"] not in ("0", "1"):
            raise ValueError("expected 0 or 1")
        column = "decisions"
        decisions = _parse_decisions(row["decisions"])
        column = "target"
        quantity, _, op = row["target"].partition(":")
        if quantity not in TARGETS or (quantity == "total") != (op == ""):
            raise ValueError("expected op:NAME, total, relayout:NAME or restickify:NAME")
        column = "measured_us"
        measured = float(row["measured_us"])
        if not measured > 0:
            raise ValueError("expected a positive time")
        config = Config(family, row["kind"].strip(), shapes, row["dtype"], row["pre"] == "1", decisions, row["target"])
        column = "kind"
        names = {o.name for o in config.graph().compute_ops()}
    except (ValueError, FormatError, GraphError) as exc:
        raise FormatError(f"samples CSV {path} line {line}, column {column!r}: {exc}") from exc
    ops = {op for op, _ in decisions}
    if ops != names or (op and op not in names):
        raise FormatError(
            f"samples CSV {path} line {line}: decisions name ops {sorted(ops)} and target {row['target']!r}; "
            f"the {family} graph has ops {sorted(names)}"
        )
    return Sample(config, measured)
