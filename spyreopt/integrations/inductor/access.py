"""Read Inductor's lowered IR: dtypes, sizes, layouts, and what a loop body loads and computes.

A loop body (``Pointwise.inner_fn`` / ``Reduction.inner_fn``) is run once under a
recording ops handler with fresh index symbols, the way Inductor itself extracts
dependencies; each load's index is then split into per-variable coefficients.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import sympy
import torch
from torch._inductor import ir
from torch._inductor.ops_handler import DefaultHandler
from torch._inductor.utils import sympy_index_symbol
from torch._inductor.virtualized import V

from spyreopt.integrations.inductor.groups import Read

DTYPES = {
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float32: "fp32",
    **{
        getattr(torch, n): "fp8"
        for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
        if hasattr(torch, n)
    },
}
# Stand-ins for dtypes spyreopt does not plan as floats (indices, masks), by element size: bytes stay exact.
STAND_IN = {1: "fp8", 2: "fp16", 4: "fp32", 8: "int64"}


class Unsupported(Exception):
    """A node the translation does not model; it becomes an opaque op with this reason."""


def planned_dtype(dtype: torch.dtype) -> str | None:
    return DTYPES.get(dtype)


def stand_in_dtype(dtype: torch.dtype) -> str:
    return DTYPES.get(dtype) or STAND_IN.get(dtype.itemsize, "fp32")


def as_int(x: Any, what: str) -> int:
    try:
        return int(x)
    except TypeError as exc:
        raise Unsupported(
            f"{what} {x} is symbolic (dynamic shapes are not planned; compile with dynamic=False)"
        ) from exc


def ints(xs: Any, what: str) -> tuple[int, ...]:
    return tuple(as_int(x, what) for x in xs)


@dataclass(frozen=True)
class View:
    """A tensor argument as a strided view of a storage buffer."""

    buffer: str
    size: tuple[int, ...]
    stride: tuple[int, ...]
    offset: int
    dtype: torch.dtype


def view_of(node: ir.IRNode) -> View:
    layout = node.get_layout()
    if not isinstance(layout, ir.Layout) or isinstance(layout, ir.NonOwningLayout):
        raise Unsupported(f"argument {node.get_name()} has layout {type(layout).__name__}")
    return View(
        node.get_name(),
        ints(layout.size, "size"),
        ints(layout.stride, "stride"),
        as_int(layout.offset, "offset"),
        layout.dtype,
    )


def arguments(op: ir.FallbackKernel) -> dict[str, Any]:
    """A fallback kernel's arguments by schema name, defaults filled in: Inductor keeps only the
    non-tensor arguments that were given, so their position alone says nothing about which they are."""
    args, kwargs = op.unflatten_args(op.inputs, op.constant_args)
    schema = op.op_overload._schema.arguments
    bound = {a.name: a.default_value for a in schema if a.has_default_value()}
    bound.update(zip((a.name for a in schema), args))
    bound.update(kwargs)
    return bound


def affine(expr: sympy.Expr, syms: list[sympy.Symbol]) -> tuple[tuple[int, ...], int] | None:
    """(coefficient per symbol, offset) if ``expr`` is affine in ``syms`` with integer coefficients.

    Read off the expanded sum's terms (a translation reads thousands of indices; differentiating
    each was most of its time): every term must be an integer times one of ``syms``, or an integer."""
    terms = sympy.expand(sympy.sympify(expr)).as_coefficients_dict()
    position = {s: i for i, s in enumerate(syms)}
    coeffs, rest = [0] * len(syms), 0
    for term, c in terms.items():
        if not c.is_Integer:
            return None
        if term == 1:
            rest += int(c)
        elif term in position:
            coeffs[position[term]] += int(c)
        else:  # another symbol, a product of symbols, floor/mod...
            return None
    return tuple(coeffs), rest


def read_of(index: sympy.Expr, syms: list[sympy.Symbol], template: Read) -> Read:
    """``template`` (the tensor's dims) read at ``index``."""
    af = affine(index, syms)
    if af is None:
        return replace(template, coeffs=tuple(0 for _ in syms), offset=0, affine=False)
    return replace(template, coeffs=af[0], offset=af[1])


class _Value:
    """Stands for any value inside a recorded loop body: only the index symbols it depends on matter
    (they tell which loop variables an indirect index, hence a gathered read, follows)."""

    def __init__(self, deps: frozenset = frozenset()):
        self.deps = deps


def _deps(xs: Any) -> frozenset:
    out: set = set()
    for x in xs:
        if isinstance(x, _Value):
            out |= x.deps
        elif isinstance(x, sympy.Basic):
            out |= x.free_symbols
        elif isinstance(x, (tuple, list)):
            out |= _deps(x)
    return frozenset(out)


@dataclass
class Body:
    loads: list[tuple[str, sympy.Expr]] = field(default_factory=list)
    ops: list[str] = field(default_factory=list)
    reduction: str | None = None
    indirect: dict[sympy.Symbol, frozenset] = field(default_factory=dict)  # indirect symbol -> index symbols
    masked: bool = False


class _Recorder(DefaultHandler):
    """Records loads, op names and what each indirect index depends on; values are placeholders."""

    def __init__(self, body: Body):
        self.body = body

    def _default(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.body.ops.append(name)
        return _Value(_deps(args) | _deps(kwargs.values()))

    def load(self, name: str, index: sympy.Expr) -> Any:
        self.body.loads.append((name, index))
        return _Value(_resolve(index, self.body.indirect))

    def indirect_indexing(self, x: Any, *args: Any, **kwargs: Any) -> sympy.Symbol:
        sym = sympy_index_symbol(f"indirect{len(self.body.indirect)}")
        self.body.indirect[sym] = _deps([x])
        return sym

    def masked(self, mask: Any, body: Any, other: Any) -> Any:
        self.body.masked = True
        self.body.ops.append("masked")
        return _Value(_deps([mask, body()]))

    def reduction(self, dtype: Any, src_dtype: Any, reduction_type: str, value: Any) -> Any:
        self.body.reduction = reduction_type
        return _Value(_deps([value]))

    def store(self, *args: Any, **kwargs: Any) -> None:
        return None

    def store_reduction(self, *args: Any, **kwargs: Any) -> None:
        return None


def _resolve(index: sympy.Expr, indirect: dict[sympy.Symbol, frozenset]) -> frozenset:
    """The loop symbols ``index`` depends on, through indirect symbols too."""
    out: set = set()
    for s in sympy.sympify(index).free_symbols:
        out |= indirect.get(s, {s})
    return frozenset(out)


def gathered(index: sympy.Expr, syms: list[sympy.Symbol], indirect: dict[sympy.Symbol, frozenset]) -> list[int] | None:
    """For a load through an indirect index: the loop variables the gathered element follows
    (directly or through the index), in storage order (indexed rows outermost); None if direct."""
    index = sympy.expand(sympy.sympify(index))
    through = [s for s in indirect if s in index.free_symbols]
    if not through:
        return None
    direct = affine(index.subs({s: 0 for s in through}), syms)
    if direct is None:
        raise Unsupported(f"gathered load with a non-affine index {index}")
    rows = set().union(*(indirect[s] for s in through))
    outer = [i for i, s in enumerate(syms) if s in rows and not direct[0][i]]
    inner = sorted((i for i, c in enumerate(direct[0]) if c), key=lambda i: -direct[0][i])
    return outer + inner


def record(fn: Any, *indices: list[sympy.Symbol]) -> Body:
    body = Body()
    with V.set_ops_handler(_Recorder(body)):
        fn(*indices)
    return body


def symbols(prefix: str, n: int) -> list[sympy.Symbol]:
    return [sympy_index_symbol(f"{prefix}{i}") for i in range(n)]
