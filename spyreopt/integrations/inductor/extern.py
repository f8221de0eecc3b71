"""Kernels that are not loops: a convolution (a matmul over patches) and a concatenation
(a buffer whose pieces other kernels write).

* ``convolution`` (2-d, no padding, one group, no dilation) -> ``matmul`` of the patch matrix
  (batch, out rows, out cols, in channels x kernel) by the filters (in channels x kernel, out
  channels), plus a pointwise ``add`` of the bias. The patch matrix is a device-memory read of
  the input (im2col: each patch once per output position that uses it), as is the filter matrix.
* ``cumsum`` (a scan) -> the two passes of a parallel scan: a ``reduce`` along the scanned dim
  (the carries between chunks) and a pointwise ``add`` of the carries to the input.
* ``ConcatKernel`` -> no op: its pieces are computed by their own ops and written to device
  memory (``translate.Translator._into_other``), and the concatenation is read back from there as one leaf.
"""

from __future__ import annotations

import math

from torch._inductor import ir

import spyreopt.integrations.inductor.access as acc
from spyreopt.integrations.inductor.access import Unsupported
from spyreopt.integrations.inductor.lowered import Lowered
from spyreopt.integrations.inductor.operands import MatmulInfo, TInfo, out_dims

CONVOLUTION = "extern_kernels.convolution"
SCANS = ("aten.cumsum.default",)


def _dram(tr: Lowered, info: TInfo, name: str, shape: tuple[int, ...], what: str) -> str:
    """A leaf holding ``shape`` read from ``info``'s buffer in device memory (the buffer goes there first)."""
    if not info.leaf:
        tr.forced.add(info.name)
    role = tr.g.tensors[info.name].role
    make = tr.g.weight if role == "weight" else tr.g.input
    make(name, shape, info.dtype)
    tr.notes.append(f"{tr.current}: reads {what} of {info.buffer} {shape} from device memory")
    return name


def convolution(tr: Lowered, node: ir.ExternKernel) -> None:
    """A 2-d convolution as a matmul over patches (see the module docstring)."""
    kw = dict(node.kwargs)
    stride, padding, dilation = (tuple(int(v) for v in kw.get(k, ())) for k in ("stride", "padding", "dilation"))
    if kw.get("transposed") or int(kw.get("groups", 1)) != 1:
        raise Unsupported("transposed or grouped convolution is not modelled")
    if any(padding) or any(d != 1 for d in dilation):
        raise Unsupported(f"convolution with padding {padding} or dilation {dilation} is not modelled")
    layout = node.get_layout()
    dtype = acc.planned_dtype(layout.dtype)
    if dtype is None:
        raise Unsupported(f"convolution with output dtype {layout.dtype}")
    x, w = (acc.view_of(a) for a in node.inputs[:2])
    if len(x.size) != 4 or len(stride) != 2:
        raise Unsupported(f"convolution of a rank-{len(x.size)} input is not modelled (2-d only)")
    out = acc.ints(layout.size, "size")
    batch, cout, oh, ow = out
    k = math.prod(w.size[1:])  # in channels x kernel rows x kernel cols
    name = node.get_name()
    patches = _dram(tr, tr.info(x.buffer), f"{name}.patches", (batch, oh, ow, k), "the patches")
    filters = _dram(tr, tr.info(w.buffer), f"{name}.filters", (cout, k), "the filters")
    mm_name = f"{name}.mm" if len(node.inputs) > 2 else name
    y = tr.op(mm_name, "matmul", patches, tr.op(f"{name}.filters_t", "transpose", filters, 0, 1), dtype=dtype)
    tr.matmuls.append(MatmulInfo(name, mm_name, CONVOLUTION, batch * oh, ow, cout, k))
    if len(node.inputs) > 2:
        y = tr.op(name, "pointwise", "add", y, tr.info(acc.view_of(node.inputs[2]).buffer).name, dtype=dtype)
    st = acc.ints(layout.stride, "stride")
    tr.t[name] = TInfo(y, out_dims((batch, oh, ow, cout), (st[0], st[2], st[3], st[1])), False, name, dtype)


def concat(tr: Lowered, node: ir.ConcatKernel) -> None:
    """The concatenated buffer, whose pieces were written to device memory, read back as one leaf."""
    pieces = ", ".join(p.get_name() for p in node.inputs)
    tr.leaf_buffer(node.get_name(), node.get_layout(), f"concatenation of {pieces}, read from device memory")


def scan(tr: Lowered, node: ir.FallbackKernel) -> tuple[str, str, None]:
    """A cumulative sum along one dim; returns the multi-output entry (tensor, dtype, None)."""
    arg = acc.arguments(node)
    x = acc.view_of(arg["self"])
    if x.dtype.itemsize not in acc.STAND_IN:
        raise Unsupported(f"cumsum over dtype {x.dtype}")
    dtype = acc.stand_in_dtype(arg.get("dtype") or x.dtype)
    xt = tr.whole(x.buffer, x.size or (1,), x.stride or (0,), x.offset)
    name = node.get_name()
    rank = max(len(x.size), 1)
    dim = int(arg["dim"]) % rank - rank  # from the end: the operand may drop leading unit dims
    carry = tr.op(f"{name}.carry", "reduce", "sum", xt, dim, dtype=dtype)
    return tr.op(name, "pointwise", "add", xt, carry, dtype=dtype), dtype, None
