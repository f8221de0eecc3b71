"""The graph under translation together with the lowered Inductor graph it comes from: how an
Inductor buffer, graph input or constant becomes a spyreopt tensor (``info``), how a kernel argument
becomes a whole tensor (``whole``, ``attn_arg``), and where a translated loop's output dims live in
its buffer's storage (``register``). The translation of each kind of node (``loops``, ``attention``,
``extern``, ``translate``) builds on this class; it knows none of them.
"""

from __future__ import annotations

from collections import Counter

from torch._inductor import ir

import spyreopt.integrations.inductor.access as acc
from spyreopt.integrations.inductor.access import Unsupported
from spyreopt.integrations.inductor.groups import Grouping, group_loop
from spyreopt.integrations.inductor.operands import Builder, TInfo, out_dims
from spyreopt.model.graph import Graph


class Lowered(Builder):
    """Translation state over one ``GraphLowering``: Inductor buffer -> ``TInfo`` and the leaves made so far."""

    def __init__(self, lowering, name: str, parameters: set[str] | frozenset[str] = frozenset()):
        super().__init__(Graph(name))
        self.lw = lowering
        self.parameters = parameters
        self.t: dict[str, TInfo] = {}
        self.opaque: dict[str, str] = {}
        # (kernel buffer, output index) -> (tensor, dtype, head split of a grouped-query attention output)
        self.multi: dict[tuple[str, int], tuple[str, str, tuple[int, int] | None]] = {}
        self.nodes: Counter = Counter()
        self.rows: set[str] = set()  # leaves holding gathered rows

    def info(self, name: str) -> TInfo:
        if name in self.t:
            return self.t[name]
        if name in self.lw.graph_inputs or name in self.lw.constants:
            return self._leaf(name)
        raise Unsupported(f"reads buffer {name!r}, which was not translated")

    def leaf_buffer(self, name: str, layout: ir.Layout, why: str) -> TInfo:
        """A buffer that lives in device memory as one leaf (a concatenation's, a gather's rows)."""
        size, stride = acc.ints(layout.size, "size"), acc.ints(layout.stride, "stride")
        dtype = acc.stand_in_dtype(layout.dtype)
        self.g.input(name, size or (1,), dtype)
        self.notes.append(f"{self.current}: {why}")
        self.t[self.current] = TInfo(name, out_dims(size, stride), True, self.current, dtype)
        return self.t[self.current]

    def _leaf(self, name: str) -> TInfo:
        if name in self.lw.constants:
            tensor = self.lw.constants[name]
            size, stride, dtype, make = tuple(tensor.shape), tuple(tensor.stride()), tensor.dtype, self.g.weight
        else:
            layout = self.lw.graph_inputs[name].get_layout()
            size, stride, dtype = acc.ints(layout.size, "size"), acc.ints(layout.stride, "stride"), layout.dtype
            make = self.g.weight if name in self.parameters else self.g.input
        sdtype = acc.stand_in_dtype(dtype)
        if acc.planned_dtype(dtype) is None:
            fit = "same size" if dtype.itemsize in acc.STAND_IN else f"not {dtype.itemsize} bytes"
            self.notes.append(f"input {name}: dtype {dtype} is planned as {sdtype} ({fit})")
        make(name, size or (1,), sdtype)
        self.t[name] = TInfo(name, out_dims(size, stride), True, name, sdtype)
        return self.t[name]

    def register(self, tensor: str, gp: Grouping, target: list[int], out_coeffs, reduced: set[int], dtype: str) -> None:
        """Record where the dims of the op's output (groups ``target``) live in the buffer's storage."""
        shape = self.g.tensors[tensor].shape
        want = tuple(1 if p in reduced else gp.size(g) for p, g in enumerate(target))
        d = len(shape) - len(want)  # right-aligned broadcasting adds or drops leading unit dims
        k = min(len(shape), len(want))
        extra = shape[:d] if d > 0 else want[:-d]
        if shape[len(shape) - k :] != want[len(want) - k :] or any(z != 1 for z in extra):
            raise Unsupported(f"translated to shape {shape}, but the loop has {want}")
        strides = []
        for q in range(len(shape)):
            p = q - d
            iv = gp.interval(target[p], out_coeffs) if p >= 0 and p not in reduced else None
            strides.append(iv[0] if iv else None)
        self.t[self.current] = TInfo(tensor, out_dims(shape, strides), False, self.current, dtype)

    def attn_arg(self, node: ir.IRNode, split: tuple[int, int] | None = None) -> str:
        """An attention argument as a (batch, heads, seq, dim) tensor (a logsumexp gets a unit dim).

        ``split`` = (group, kv heads) for grouped-query attention: an argument with all the query
        heads becomes (group, batch, kv heads, seq, dim), so that keys and values with the kv heads
        broadcast over the group (query head h uses kv head h // group).
        """
        v = acc.view_of(node)
        pad = 4 - len(v.size)
        if pad < 0:
            raise Unsupported(f"attention argument {v.buffer} of rank {len(v.size)}")
        size, stride = v.size + (1,) * pad, v.stride + (0,) * pad
        if split is not None and size[1] == split[0] * split[1] and split[0] > 1:
            g, h = split
            size = (g, size[0], h, size[2], size[3])
            stride = (stride[1], stride[0], g * stride[1], stride[2], stride[3])
        return self.whole(v.buffer, size, stride, v.offset)

    def whole(self, buffer: str, size: tuple[int, ...], stride: tuple[int, ...], offset: int = 0) -> str:
        """A kernel argument as a tensor with one dim per size (a view, a copy or a device-memory read)."""
        info = self.info(buffer)
        rd = info.read(tuple(s if z > 1 else 0 for z, s in zip(size, stride)), offset)
        kinds = tuple(str(i) for i in range(len(size)))  # one group per dim: never merged, never cut
        gp = group_loop(size, kinds, [rd], (0,) * len(size), atomic=frozenset(kinds), reduced=frozenset(kinds))
        return self.operand(info, rd, gp, 0, list(range(len(size))))
