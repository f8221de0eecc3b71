"""Import torch-spyre's cost-model sweep: each timed kernel as the spyreopt program it ran, its configuration fixed.

A row of the sweep (``docs/device-sweep.md`` lists the columns and, per kernel, the
program) becomes a ``SweepProgram``: the benchmark's graph, and the configurations
of it that match what the row fixed, as fit configurations (``SweepConfig``):

* ``cores``: every division over exactly that many cores that every op of the kernel
  can take (the ops of one fused kernel share one division of the output's dims);
  which one the compiler took is not recorded, so the model prices the row at its
  cheapest (``sweep_eval``), the one a planner given that many cores would take;
* ``tiles`` >= 2: every op runs in one tiled loop over that many tiles of the
  benchmark's tiled dim (the rows; a matmul's k); 0 or 1: untiled (the harness runs
  ``tiles <= 1`` untiled);
* ``lx``: 0 puts every tensor in device memory; 1 keeps an intermediate on chip
  unless the bytes the device moved (``io_hbm_bytes``) say it went through device
  memory (the residency whose device-memory bytes are nearest the recorded ones);
* the shapes the file does not record (a matmul's N, a batched matmul's batch, the
  outer dim of ``transpose_outer``) follow from ``io_hbm_bytes``.

A row that cannot be mapped keeps its reason (``SweepProgram.unmapped``); a
``failed`` row is no timing (it did not compile), nor is a row timed at 0 µs.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from itertools import product
from math import isfinite, log2
from pathlib import Path

from spyreopt.calibrate.sampling import Config
from spyreopt.errors import FormatError, GraphError, PlanError
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec

REQUIRED = ("id", "op", "rows", "cols", "M", "K", "tiles", "lx", "cores", "kernel_us", "err_pct", "io_hbm_bytes")
FAMILY = {
    **dict.fromkeys(("add", "add3", "add4", "add5", "add6", "add_indep2", "gelu", "neg"), "pointwise"),
    **dict.fromkeys(("amax", "mean", "sumrow", "read"), "reduction"),
    **dict.fromkeys(("cat0", "cat1", "transpose", "transpose_outer"), "transport"),
    **dict.fromkeys(("bcast", "bcastcol", "mulbcast", "copy", "write"), "broadcast"),
    "ctsum": "coarse_reduction",
    "mm": "matmul",
    "mmwd": "matmul_split",
    "matmul_row_tiling": "matmul_row",
    "matmul_k_tiling": "matmul_k",
    "mm_nested_m_k": "matmul_nested",
    "bmm_k_tiling": "bmm",
    "bmm_3d2d_k_tiling": "bmm_3d2d",
    "bmm_wd": "bmm_split",
    "bmm_wd_3d2d": "bmm_split",
    "softmax_row_tiling": "softmax",
    "softmax_unrolled": "softmax",
    **dict.fromkeys(("bmm_layout", "add3_sep", "add4_sep", "add5_sep", "add6_sep"), "other"),
}
FAMILIES = tuple(dict.fromkeys(FAMILY.values()))
REREAD_LIMIT = 8.0  # device bytes over the program's one pass beyond which the device ran another loop
BATCHES = (8, 1, 2, 4, 16, 32, 64)  # the harness's batch (BENCH_B, default 8) first, then others io may imply
PE_RATE = 1140.0  # MACs per ns per core of torch-spyre's compute term (``compute_us``), to read its MAC count


@dataclass(frozen=True)
class SweepRow:
    id: str
    op: str
    rows: int
    cols: int
    tiles: int
    lx: int
    cores: int
    kernel_us: float | None  # None: no timing (failed, or timed at 0)
    err_pct: float | None  # torch-spyre's own error on the row
    io_bytes: int
    failed: bool
    macs: float | None = None  # a matmul's MACs, read from torch-spyre's compute term when it has one

    @property
    def family(self) -> str:
        return FAMILY.get(self.op, "other")

    @property
    def shape_group(self) -> tuple:
        """(op, rows, cols, M, K): every core count, tiling and LX setting of one shape (M, K = rows, cols)."""
        return (self.op, self.rows, self.cols)

    @property
    def configuration(self) -> tuple[int, int, int]:
        return (self.cores, self.tiles, self.lx)


@dataclass(frozen=True)
class SweepConfig(Config):
    """One configuration of a row's program (a fit configuration with its own graph)."""

    built: Graph | None = field(default=None, compare=False)

    def graph(self) -> Graph:
        return self.built

    def stage_masks(self) -> dict[str, int]:
        return {}


@dataclass
class SweepProgram:
    row: SweepRow
    configs: list[SweepConfig] = field(default_factory=list)
    unmapped: str | None = None
    what: str = ""  # the program, in words


# ---- reading ------------------------------------------------------------------------
def _num(row: dict, key: str, where: str) -> float | None:
    text = (row.get(key) or "").strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise FormatError(f"{where}: column {key!r} is not a number: {text!r}") from None


def read_sweep(path: str | Path) -> list[SweepRow]:
    """The rows of a sweep CSV (columns in the data's README); FormatError names the file, line and column."""
    p = Path(path)
    if not p.is_file():
        raise FormatError(f"sweep CSV {str(p)!r} does not exist")
    out = []
    with open(p, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
        if missing:
            raise FormatError(f"sweep CSV {p}: missing column(s) {missing}")
        for line, r in enumerate(reader, start=2):
            where = f"sweep CSV {p} line {line}"
            failed = (r.get("failed") or "").strip().lower() == "true"
            rows, cols = _num(r, "rows", where), _num(r, "cols", where)
            if rows is None or cols is None:
                raise FormatError(f"{where}: rows and cols are required")
            rows, cols = int(_num(r, "M", where) or rows), int(_num(r, "K", where) or cols)
            kernel = _num(r, "kernel_us", where)
            timed = not failed and kernel is not None and isfinite(kernel) and kernel > 0
            err = _num(r, "err_pct", where)
            out.append(
                SweepRow(
                    id=r["id"],
                    op=r["op"].strip(),
                    rows=rows,
                    cols=cols,
                    tiles=int(_num(r, "tiles", where) or 0),
                    lx=int(_num(r, "lx", where) or 0),
                    cores=int(_num(r, "cores", where) or 32),
                    kernel_us=kernel if timed else None,
                    err_pct=err if timed else None,
                    io_bytes=int(_num(r, "io_hbm_bytes", where) or 0),
                    failed=failed,
                    macs=_macs(r, where),
                )
            )
    return out


def _macs(r: dict, where: str) -> float | None:
    """MACs from torch-spyre's compute term: ``compute_us`` = MACs / (cores x ``PE_RATE`` x ``pt_eff``)."""
    compute, eff, cores = _num(r, "compute_us", where), _num(r, "pt_eff", where), _num(r, "cores", where)
    if not compute or not eff or not cores:
        return None
    return compute * 1e3 * cores * PE_RATE * eff


# ---- the programs ---------------------------------------------------------------------------
def _chain(g: Graph, fn: str, xs: list[str]) -> None:
    acc = xs[0]
    for n, x in enumerate(xs[1:]):
        acc = g.pointwise(fn, acc, x, name=f"{fn}{n}")
    g.output(acc)


def _graph(row: SweepRow, extra: int) -> tuple[Graph, str]:
    """The benchmark's graph (``extra``: the shape the file does not record, from ``_extra``) and its words."""
    op, r, c = row.op, row.rows, row.cols
    g = Graph(f"sweep_{op}")
    if op in ("add", "mulbcast", "bcast", "bcastcol"):
        y = {"bcast": (c,), "mulbcast": (c,), "bcastcol": (r, 1)}.get(op, (r, c))
        fn = "mul" if op == "mulbcast" else "add"
        g.output(g.pointwise(fn, g.input("x", (r, c)), g.input("y", y), name=fn))
        return g, f"{fn}(x[{r},{c}], y{list(y)})"
    if op.startswith("add") and op.removesuffix("_sep")[3:].isdigit():
        n = int(op.removesuffix("_sep")[3:])
        _chain(g, "add", [g.input(f"x{i}", (r, c)) for i in range(n)])
        sep = ", each add its own kernel (everything through device memory)" if op.endswith("_sep") else ""
        return g, f"a chain of {n - 1} adds over {n} inputs [{r},{c}]{sep}"
    if op == "add_indep2":
        for i in range(2):
            g.output(g.pointwise("add", g.input(f"a{i}", (r, c)), g.input(f"b{i}", (r, c)), name=f"add{i}"))
        return g, f"two independent adds over [{r},{c}]"
    if op in ("neg", "gelu", "copy"):
        g.output(g.pointwise(op, g.input("x", (r, c)), name=op))
        return g, f"{op}(x[{r},{c}])"
    if op in ("amax", "mean", "sumrow", "read"):
        fn = {"amax": "max", "mean": "mean"}.get(op, "sum")
        g.output(g.reduce(fn, g.input("x", (r, c)), -1, name=fn))
        return g, f"{fn} over the last dim of x[{r},{c}]"
    if op == "ctsum":
        g.output(g.reduce("sum", g.input("x", (r, c)), 0, name="sum"))
        return g, f"sum over the rows of x[{r},{c}]"
    if op == "write":
        g.output(g.pointwise("add", g.input("y", (r, 1)), g.input("z", (c,)), name="add"))
        return g, f"add(y[{r},1], z[{c}]): writes [{r},{c}] from a column and a row"
    if op == "transpose":
        g.output(g.pointwise("copy", g.transpose(g.input("x", (r, c)), 0, 1), name="copy"))
        return g, f"copy of x[{r},{c}] transposed (the stick dim moves)"
    if op == "transpose_outer":
        x = g.input("x", (r, extra, c))
        g.output(g.pointwise("copy", g.permute(x, (1, 0, 2)), name="copy"))
        return g, f"copy of x[{r},{extra},{c}] with its outer dims swapped (stick kept)"
    if op in ("cat0", "cat1"):
        shape, rep = ((1, r, c), (2, 1, 1)) if op == "cat0" else ((r, 1, c), (1, 2, 1))
        g.output(g.pointwise("add", g.input("x", shape), g.input("zero", rep), name="cat"))
        return g, f"x[{r},{c}] written twice along dim {op[-1]} (a broadcast of x over a dim of 2)"
    if op in ("mm", "mmwd", "matmul_row_tiling", "matmul_k_tiling"):
        g.output(g.matmul(g.input("a", (r, c)), g.input("b", (c, extra)), name="mm"))
        return g, f"a[{r},{c}] @ b[{c},{extra}]"
    if op in ("bmm_k_tiling", "bmm_wd", "bmm_layout", "bmm_3d2d_k_tiling", "bmm_wd_3d2d"):
        batch, n = extra
        b = (c, n) if "3d2d" in op else (batch, c, n)
        g.output(g.matmul(g.input("a", (batch, r, c)), g.input("b", b), name="mm"))
        return g, f"a[{batch},{r},{c}] @ b{list(b)}"
    if op == "softmax_row_tiling":
        g.output(g.softmax(g.input("x", (r, c)), -1, name="softmax"))
        return g, f"softmax over the last dim of x[{r},{c}]"
    raise GraphError(f"kernel {op!r}: no spyreopt program is known for it")


def _extra(row: SweepRow):
    """The dims the file does not record, from ``io_hbm_bytes`` (fp16): a matmul's N, a batched matmul's (B, N),
    ``transpose_outer``'s outer dim; None when not needed, PlanError when the bytes fit no shape."""
    op, m, k, elems = row.op, row.rows, row.cols, row.io_bytes // 2
    if row.tiles >= 2 and (op.startswith("bmm") or op.startswith("matmul")):
        raise PlanError("a tiled matmul's io_hbm_bytes counts its loop's traffic, so it gives no N")
    kp = -(-k // 64) * 64  # the left operand's stick is padded to 64 elements
    if op in ("mm", "mmwd", "matmul_row_tiling", "matmul_k_tiling"):
        n = (elems - m * kp) / (k + m)
        if n < 1 or n != int(n):
            raise PlanError(f"no N makes io_hbm_bytes {row.io_bytes} the bytes of a[{m},{k}] @ b[{k},N] + out")
        return int(n)
    if op.startswith("bmm"):
        fits = []
        for batch in BATCHES:
            per = elems / batch - m * kp
            n = per / (m + k) if "3d2d" not in op else (elems - batch * m * kp) / (k + batch * m)
            if n >= 64 and n == int(n) and int(n) % 64 == 0:
                fits.append((batch, int(n)))
        if not fits:
            raise PlanError(f"no batch and N make io_hbm_bytes {row.io_bytes} the bytes of the batched matmul")
        if row.macs and len(fits) > 1:  # several (B, N) fit the bytes: the one with the recorded MACs
            fits.sort(key=lambda bn: abs(log2(bn[0] * m * k * bn[1] / row.macs)))
        return fits[0]
    if op == "transpose_outer":
        outer = elems / (2 * m * k)
        if outer < 1 or outer != int(outer):
            raise PlanError(f"io_hbm_bytes {row.io_bytes} is no whole number of copies of x[{m},{k}]")
        return int(outer)
    return None


def _tiling(row: SweepRow, g: Graph) -> tuple[str, int] | None:
    if row.tiles < 2:
        return None
    if row.op == "matmul_k_tiling" or row.op.startswith("bmm"):
        return ("k", row.tiles)
    if row.op == "matmul_row_tiling":
        return ("m", row.tiles)
    return ("d0", row.tiles)


def _divisions(g: Graph, cores: int) -> list[tuple[int, ...]]:
    """Factor tuples (powers of two) over the output's iteration dims with product ``cores``; a dim a reduction
    reduces stays whole (a matmul's k may split)."""
    ops = list(g.ops.values())
    rank = max(len(g.tensors[o.inputs[0]].shape) if o.kind == "reduce" else len(g.tensors[o.output].shape) for o in ops)
    rank += 1 if any(o.kind == "matmul" for o in ops) else 0
    fixed = {d for o in ops if o.kind == "reduce" for d in o.attrs["dims"]}
    e = int(log2(cores))
    out = []
    for exps in product(range(e + 1), repeat=rank):
        if sum(exps) == e and all(exps[d] == 0 for d in fixed):
            out.append(tuple(1 << x for x in exps))
    return out


def _tensor_reads(g: Graph) -> dict[str, int]:
    return {t: sum(x == t for o in g.ops.values() for x in o.inputs) for t in g.tensors}


def _residencies(row: SweepRow, g: Graph, tiled: bool) -> dict[str, str]:
    """Each op's output residency: graph outputs hbm; with LX planning on, the intermediates on chip, unless the
    recorded bytes are nearer those of some of them through device memory (the fewest such)."""
    ops = g.compute_ops()
    inner = [o.name for o in ops if o.output not in g.outputs]
    res = {o.name: "hbm" for o in ops}
    if row.lx == 0 or row.op.endswith("_sep") or not inner:
        return res
    if tiled:
        return res | dict.fromkeys(inner, "lx")
    reads = _tensor_reads(g)

    def moved(spilled) -> int:
        base = sum(t.nbytes for t in g.tensors.values() if t.producer is None or t.name in g.outputs)
        return base + sum(g.tensors[g.ops[n].output].nbytes * (1 + reads[g.ops[n].output]) for n in spilled)

    choices = [tuple(n for n, keep in zip(inner, bits) if keep) for bits in product((0, 1), repeat=len(inner))]
    best = min(choices, key=lambda s: (abs(moved(s) - row.io_bytes), len(s)))
    return res | dict.fromkeys(inner, "lx") | dict.fromkeys(best, "hbm")


def program(row: SweepRow, hw: HardwareSpec | None = None, legal: dict | None = None) -> SweepProgram:
    """The row's program and its configurations (or why it has none); ``legal`` remembers, across the rows
    of one file, which configurations the model accepts (a repeated configuration is checked once)."""
    from spyreopt.model.problem import Problem  # the model is below calibrate; imported late to keep start-up light

    prog = SweepProgram(row)
    if row.kernel_us is None:
        prog.unmapped = "failed: did not compile or run (no timing)" if row.failed else "no timing (0 us)"
        return prog
    if row.op == "mm_nested_m_k":
        prog.unmapped = "nested tiling (M in 2 tiles around K in T tiles): a spyreopt loop tiles one dim"
        return prog
    try:
        g, prog.what = _graph(row, _extra(row))
    except (GraphError, PlanError) as exc:
        prog.unmapped = str(exc)
        return prog
    one_pass = sum(t.nbytes for t in g.tensors.values() if t.producer is None or t.name in g.outputs)
    if row.io_bytes > REREAD_LIMIT * one_pass:
        prog.unmapped = (
            f"the device moved {row.io_bytes / one_pass:.0f}x the program's bytes (io_hbm_bytes): its loop "
            "re-reads the operands many times per tile, a lowering spyreopt does not plan"
        )
        return prog
    hw, legal = hw or HardwareSpec(), {} if legal is None else legal
    tiling = _tiling(row, g)
    res = _residencies(row, g, tiling is not None)
    ops = g.compute_ops()
    why = ""
    for factors in _divisions(g, row.cores):
        decisions = []
        for o in ops:
            own = factors[: len(factors)] if o.kind == "matmul" else factors[: len(g.tensors[o.output].shape)]
            stick = len(g.tensors[o.output].shape) - 1
            decisions.append((o.name, (own, stick, res[o.name], tiling)))
        config = SweepConfig(row.family, "sweep", (), "fp16", False, tuple(decisions), "total", g)
        key = (g.to_json(), config.decisions)
        if key not in legal:
            try:
                Problem(g, hw, _reference(), fixed=config.decision_map(), stage_masks={})
                legal[key] = None
            except (PlanError, GraphError) as exc:
                legal[key] = str(exc)
        if legal[key] is not None:
            why = legal[key]
            continue
        prog.configs.append(config)
    if not prog.configs:
        prog.unmapped = f"no division over exactly {row.cores} cores is legal for every op of {prog.what} ({why})"
    return prog


def _reference():
    from spyreopt.calibrate.sampling import reference_coefficients

    return reference_coefficients()
