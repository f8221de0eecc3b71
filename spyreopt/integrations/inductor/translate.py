"""Translate Inductor's lowered IR (before scheduling) into a spyreopt ``Graph``.

* ``ExternKernelOut`` mm / bmm / addmm / baddbmm -> ``matmul`` (+ pointwise ``add`` of the bias);
* ``ComputedBuffer`` of a ``Pointwise`` -> one ``pointwise`` op (Inductor has already fused the
  elementwise chain into it); of a ``Reduction`` -> ``reduce`` (after a pointwise prologue when
  the body computes more than a load);
* scaled-dot-product attention fallbacks -> their matmuls, softmax and pointwise ops, with an
  explicit mask as one more operand and grouped-query attention broadcast over the group (``attention``);
* a convolution -> a matmul over patches; a concatenation -> its pieces written to device memory and
  read back as one buffer; a cumulative sum -> a reduce and an add (``extern``);
* a gathered load (an embedding lookup) -> a device-memory read of exactly the gathered rows;
* graph inputs -> ``input`` leaves, constants and the model's parameters -> ``weight`` leaves (a parameter
  a matmul reads transposed is laid out as read: its device layout is chosen at load); reads -> operands;
* an op nothing reads that is no output (inference attention's logsumexp) is dropped, with a note;
  integer and boolean buffers are planned at their own element size (int64, fp8 for 1 byte);
* everything else -> an *opaque* op: a pointwise ``copy`` of the right shape and dtype reading a
  stand-in leaf, its inputs forced to device memory; each one is listed with its reason.

Buffer dtypes are kept as Inductor chose them (fp32 intermediates of an fp16 softmax stay fp32).
A node that fails half-way is rolled back and becomes opaque: nothing is dropped silently.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

from torch._inductor import ir

from spyreopt.errors import GraphError
from spyreopt.integrations.inductor import access as acc
from spyreopt.integrations.inductor import attention, extern
from spyreopt.integrations.inductor.access import Unsupported
from spyreopt.integrations.inductor.groups import Grouping, Read, group_loop
from spyreopt.integrations.inductor.operands import Builder, MatmulInfo, TInfo, out_dims
from spyreopt.model.graph import Graph

MATMUL_KERNELS = {
    "extern_kernels.mm": (False, False),  # (batched, bias)
    "extern_kernels.bmm": (True, False),
    "extern_kernels.addmm": (False, True),
    "extern_kernels.baddbmm": (True, True),
}
# Inductor ops -> the spyreopt pointwise fn that stands for a fused body: the first
# transcendental one (it sets the cost), else the first arithmetic one, else a copy.
TRANSCENDENTAL_OPS = {
    "erf": "gelu", "sigmoid": "sigmoid", "tanh": "tanh", "exp": "exp", "exp2": "exp", "expm1": "exp",
    "log": "log", "log2": "log", "log1p": "log", "rsqrt": "rsqrt", "sqrt": "sqrt", "pow": "pow",
    "truediv": "div", "div": "div", "reciprocal": "recip",
}  # fmt: skip
ARITHMETIC_OPS = {
    "mul": "mul", "add": "add", "sub": "sub", "maximum": "max", "minimum": "min", "neg": "neg",
    "relu": "relu", "square": "square", "where": "max", "abs": "max",
}  # fmt: skip
REDUCTIONS = {"sum": "sum", "max": "max", "min": "min"}
# kernels whose work depends on the data (a mixture-of-experts router's choices): opaque, with the reason
DATA_DEPENDENT = {
    "topk": "is not modelled: the router's top-k selection depends on the data",
    "sort": "is not modelled: sorting tokens by expert depends on the router's choices",
    "histc": "is not modelled: counting tokens per expert depends on the router's choices",
    "grouped_mm": "is not modelled: expert matmuls over as many tokens as the router sent each expert (known at run time)",
}


@dataclass
class Translation:
    graph: Graph
    op_buffer: dict[str, str]  # spyreopt op -> Inductor buffer
    opaque: dict[str, str]  # Inductor buffer -> reason
    notes: list[str]  # copies and device-memory reads the translation added
    matmuls: list[MatmulInfo]
    inductor_nodes: Counter = field(default_factory=Counter)  # IR node type -> count
    buffer_tensor: dict[str, str] = field(default_factory=dict)  # Inductor buffer -> the tensor holding its data

    def counts(self) -> dict[str, int]:
        c = Counter(o.kind for o in self.graph.ops.values())
        c["opaque"] = len(self.opaque)
        return dict(sorted(c.items()))


class Translator(Builder):
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

    # ---- driver --------------------------------------------------------------
    def run(self) -> Translation:
        for node in self.lw.operations:
            self.nodes[type(node).__name__] += 1
            self.current = node.get_name()
            mark = self._snapshot()
            try:
                self._translate(node)
                self._into_other(node)
            except (Unsupported, GraphError) as exc:  # the node does not fit the model: it stays opaque
                self._rollback(mark)
                self._opaque(node, str(exc))
        for node in self.lw.graph_outputs:
            name = _buffer_name(node)
            if name in self.t and not self.t[name].leaf:
                self.forced.add(self.t[name].name)
        for x in sorted(self.forced):
            self._mark_output(x)
        self.drop_unread()
        read = {x for o in self.g.ops.values() for x in o.inputs}
        for name in (self.rows & self.g.tensors.keys()) - read:  # every reader took a regrouped alias
            del self.g.tensors[name]
        held = {k: v.name for k, v in self.t.items() if k == v.buffer and v.name in self.g.tensors}
        return Translation(self.g, self.op_buffer, self.opaque, self.notes, self.matmuls, self.nodes, held)

    def _translate(self, node: ir.Operation) -> None:
        kernel = getattr(node, "python_kernel_name", None)
        if isinstance(node, ir.ComputedBuffer):
            self._computed(node)
        elif isinstance(node, ir.ExternKernelOut) and kernel in MATMUL_KERNELS:
            self._matmul(node, *MATMUL_KERNELS[kernel])
        elif isinstance(node, ir.FallbackKernel) and str(getattr(node, "op_overload", "")) in (
            attention.FORWARD,
            attention.BACKWARD,
        ):
            for i, out in attention.translate_sdpa(self, node).items():
                self.multi[(node.get_name(), i)] = out
        elif isinstance(node, ir.ExternKernel) and kernel == extern.CONVOLUTION:
            extern.convolution(self, node)
        elif isinstance(node, ir.ConcatKernel):
            extern.concat(self, node)
        elif isinstance(node, ir.FallbackKernel) and str(getattr(node, "op_overload", "")) in extern.SCANS:
            self.multi[(node.get_name(), 0)] = extern.scan(self, node)
        elif isinstance(node, ir.MultiOutput):
            self._multi_output(node)
        else:
            what = kernel or getattr(node, "op_overload", None)
            why = next((r for k, r in DATA_DEPENDENT.items() if k in str(what)), "is not modelled")
            raise Unsupported(f"{type(node).__name__}" + (f" {what}" if what else "") + f" {why}")

    def _into_other(self, node: ir.Operation) -> None:
        """A node writing into another buffer (a concatenation's piece, an in-place update such as
        a cache write) writes to device memory, where that buffer is read from."""
        layout = getattr(node, "layout", None)
        if isinstance(layout, (ir.NonOwningLayout, ir.MutationLayoutSHOULDREMOVE)) and self.current in self.t:
            into = layout.view if isinstance(layout, ir.NonOwningLayout) else layout.get_buffer()
            target = into.get_name() if hasattr(into, "get_name") else "another buffer"
            self.forced.add(self.t[self.current].name)
            self.notes.append(f"{self.current}: written into {target} in device memory")

    def _snapshot(self) -> tuple:
        return (
            len(self.g.ops),
            len(self.g.tensors),
            len(self.notes),
            len(self.matmuls),
            set(self.forced),
            dict(self.op_buffer),
        )

    def _rollback(self, mark: tuple) -> None:
        """Undo a half-translated node, so a failure leaves no dangling views or copies."""
        n_ops, n_tensors, n_notes, n_mm, forced, op_buffer = mark
        for name in list(self.g.ops)[n_ops:]:
            del self.g.ops[name]
        for name in list(self.g.tensors)[n_tensors:]:
            del self.g.tensors[name]
        self.multi = {k: v for k, v in self.multi.items() if v[0] in self.g.tensors}
        self.t = {k: v for k, v in self.t.items() if v.name in self.g.tensors}
        del self.notes[n_notes:]
        del self.matmuls[n_mm:]
        self.forced, self.op_buffer = forced, op_buffer

    def _mark_output(self, tensor: str) -> None:
        """Mark the tensor holding ``tensor``'s data (through views) as written to device memory."""
        base = tensor
        while (producer := self.g.tensors[base].producer) is not None and self.g.ops[producer].kind == "view":
            base = self.g.ops[producer].inputs[0]
        if self.g.tensors[base].producer is not None:
            self.g.output(base)

    # ---- tensors -------------------------------------------------------------
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

    def _register(
        self, tensor: str, gp: Grouping, target: list[int], out_coeffs, reduced: set[int], dtype: str
    ) -> None:
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

    # ---- computed buffers ------------------------------------------------------
    def _computed(self, buf: ir.ComputedBuffer) -> None:
        layout = buf.layout
        if not isinstance(
            layout, (ir.FixedLayout, ir.FlexibleLayout, ir.NonOwningLayout, ir.MutationLayoutSHOULDREMOVE)
        ):
            raise Unsupported(f"writes through a {type(layout).__name__}")
        dtype = acc.planned_dtype(layout.dtype)
        if dtype is None:
            if layout.dtype.itemsize not in acc.STAND_IN:
                raise Unsupported(f"output dtype {layout.dtype} is not planned")
            dtype = acc.stand_in_dtype(layout.dtype)
            self.notes.append(f"{self.current}: dtype {layout.dtype} is planned as {dtype} (same size)")
        data = buf.data
        if type(data) in (ir.Pointwise, ir.Scatter):  # a scatter: the source's loop, stored at computed rows
            self._pointwise(buf, data, dtype)
        elif type(data) in (ir.Reduction, ir.WelfordReduction, ir.OnlineSoftmaxReduction):
            self._reduction(buf, data, dtype)
        else:
            raise Unsupported(f"{type(data).__name__} loops are not modelled")

    def _loads(self, body: acc.Body, syms, ranges: tuple[int, ...]) -> list[tuple[TInfo, Read]]:
        """Each distinct load as (tensor, read); a gathered load reads the gathered rows as a leaf."""
        if body.masked:
            raise Unsupported("masked loads (padding, concatenation or a slice of a slice)")
        out, seen = [], set()
        for name, index in body.loads:
            if (name, str(index)) not in seen:
                seen.add((name, str(index)))
                info = self.info(name)
                order = acc.gathered(index, syms, body.indirect)
                if order is None:
                    out.append((info, acc.read_of(index, syms, info.read((0,) * len(syms)))))
                else:
                    out.append(self._gather(info, order, ranges))
        return out

    def _gather(self, info: TInfo, order: list[int], ranges: tuple[int, ...]) -> tuple[TInfo, Read]:
        """A gathered load: a device-memory read of exactly the rows gathered, as a dense leaf over
        the loop variables it follows (indexed rows outermost)."""
        shape = tuple(ranges[v] for v in order) or (1,)
        strides, step = [], 1
        for z in reversed(shape):
            strides.append(step)
            step *= z
        strides.reverse()
        coeffs = [0] * len(ranges)
        for v, st in zip(order, strides):
            coeffs[v] = st if ranges[v] > 1 else 0
        name = self.fresh(f"{info.buffer}.rows@{self.current}.")  # each fused kernel gathers on its own
        make = self.g.weight if self.g.tensors[info.name].role == "weight" else self.g.input
        make(name, shape, info.dtype)
        self.rows.add(name)
        if not info.leaf:
            self.forced.add(info.name)
        self.notes.append(f"{self.current}: gathers {shape} from {info.buffer} (a device-memory read)")
        rows = TInfo(name, out_dims(shape, strides), True, name, info.dtype)
        return rows, rows.read(tuple(coeffs))

    def _pointwise(self, buf: ir.ComputedBuffer, data: ir.Pointwise, dtype: str) -> None:
        ranges = acc.ints(data.ranges, "range")
        syms = acc.symbols("i", len(ranges))
        body = acc.record(data.inner_fn, syms)
        loads = self._loads(body, syms, ranges)
        out_coeffs = acc.ints(buf.get_layout().stride, "stride")
        if not ranges:  # a scalar: one unit dim, since spyreopt tensors have rank >= 1
            ranges, out_coeffs = (1,), (0,)
            loads = [(info, Read((0,), rd.dims, rd.offset, rd.affine, rd.flexible)) for info, rd in loads]
        gp = group_loop(ranges, ("x",) * len(ranges), [rd for _, rd in loads], out_coeffs, flatten=frozenset("x"))
        target = _spanned_last(gp, [rd for _, rd in loads])
        xs = self._cover([self.operand(info, rd, gp, j, target) for j, (info, rd) in enumerate(loads)], gp, target)
        self._register(
            self.op(self.current, "pointwise", _pointwise_fn(body.ops), *xs, dtype=dtype),
            gp,
            target,
            out_coeffs,
            set(),
            dtype,
        )

    def _cover(self, xs: list[str], gp: Grouping, target: list[int]) -> list[str]:
        """Add an index operand (an iota leaf) over the dims no operand spans, e.g. a concatenation
        written as a ``where`` over an index: the op's output must still have the loop's shape."""
        want = tuple(gp.size(g) for g in target)
        have = [1] * len(want)
        for x in xs:
            shape = self.g.tensors[x].shape
            for p, z in enumerate(shape[::-1]):
                have[len(want) - 1 - p] = max(have[len(want) - 1 - p], z)
        if tuple(have) == want and xs:
            return xs
        iota = tuple(w if h != w else 1 for w, h in zip(want, have)) if xs else want
        name = f"{self.current}.iota"
        self.g.input(name, iota, "fp32")
        self.notes.append(f"{self.current}: no operand spans dims {iota}; an index operand {name} stands in for them")
        return xs + [name]

    def _reduction(self, buf: ir.ComputedBuffer, data: ir.Reduction, dtype: str) -> None:
        ranges = acc.ints(data.ranges, "range")
        rranges = acc.ints(data.reduction_ranges, "reduction range")
        xs, rs = acc.symbols("i", len(ranges)), acc.symbols("r", len(rranges))
        body = acc.record(data.inner_fn, xs, rs)
        fn, prologue = _reduce_kind(data)
        loads = self._loads(body, xs + rs, ranges + rranges)
        order = _reduction_order(ranges, rranges, next((rd for _, rd in loads if rd.affine), None))
        full = ranges + rranges
        kinds = tuple("r" if v >= len(xs) else "x" for v in order)
        reads = [
            Read(tuple(rd.coeffs[v] for v in order), rd.dims, rd.offset, rd.affine, rd.flexible) for _, rd in loads
        ]
        stride = acc.ints(buf.get_layout().stride, "stride")
        out_coeffs = tuple(0 if v >= len(xs) else stride[v] for v in order)
        gp = group_loop(
            tuple(full[v] for v in order), kinds, reads, out_coeffs, reduced=frozenset("r"), flatten=frozenset("x")
        )
        target = list(range(len(gp.groups)))
        ops = self._cover(
            [self.operand(info, rd, gp, j, target) for j, ((info, _), rd) in enumerate(zip(loads, reads))], gp, target
        )
        shape = tuple(gp.size(g) for g in target)
        if (
            prologue is None
            and len(ops) == 1
            and set(body.ops) <= {"to_dtype"}
            and self.g.tensors[ops[0]].shape == shape
        ):
            x = ops[0]
        else:
            src_dtype = acc.planned_dtype(data.src_dtype) or dtype
            x = self.op(f"{self.current}.pre", "pointwise", prologue or _pointwise_fn(body.ops), *ops, dtype=src_dtype)
        lead = len(target) - len(self.g.tensors[x].shape)
        dims = [p - lead for p, g in enumerate(target) if kinds[gp.kind_var(g)] == "r" and p >= lead]
        self._register(
            self.op(self.current, "reduce", fn, x, dims, dtype=dtype),
            gp,
            target,
            out_coeffs,
            {p + lead for p in dims},
            dtype,
        )

    # ---- matmuls -----------------------------------------------------------------
    def _matmul(self, node: ir.ExternKernelOut, batched: bool, has_bias: bool) -> None:
        layout = node.get_layout()
        dtype = acc.planned_dtype(layout.dtype)
        if dtype is None:
            raise Unsupported(f"matmul with output dtype {layout.dtype}")
        args = [acc.view_of(x) for x in node.inputs]
        bias, a, b = (args[0], args[1], args[2]) if has_bias else (None, args[0], args[1])
        nb = 1 if batched else 0
        tags = "b" * nb
        ranges = a.size[:nb] + (a.size[nb], b.size[nb + 1], a.size[nb + 1])  # (batch,) m, n, k
        kinds = tuple(tags + "mnk")

        def coeffs(size, stride, roles: str) -> tuple[int, ...]:
            c = [0] * len(ranges)
            for role, z, s in zip(roles, size, stride):
                if z > 1:
                    c[kinds.index(role)] = s
            return tuple(c)

        ia, ib = self.info(a.buffer), self.info(b.buffer)
        reads = [
            ia.read(coeffs(a.size, a.stride, tags + "mk"), a.offset),
            ib.read(coeffs(b.size, b.stride, tags + "kn"), b.offset),
        ]
        if bias is not None:
            ic = self.info(bias.buffer)
            reads.append(
                ic.read(coeffs(bias.size, bias.stride, (tags + "mn")[len(tags) + 2 - len(bias.size) :]), bias.offset)
            )
        out_coeffs = coeffs(acc.ints(layout.size, "size"), acc.ints(layout.stride, "stride"), tags + "mn")
        gp = group_loop(ranges, kinds, reads, out_coeffs, atomic=frozenset("kn"), reduced=frozenset("k"))
        bm = [g for g in range(len(gp.groups)) if kinds[gp.kind_var(g)] in "bm"]
        gk = [g for g in range(len(gp.groups)) if kinds[gp.kind_var(g)] == "k"]
        gn = [g for g in range(len(gp.groups)) if kinds[gp.kind_var(g)] == "n"]
        xa = self.operand(ia, reads[0], gp, 0, bm + gk)
        xb = self.operand(ib, reads[1], gp, 1, bm[:-1] + gk + gn)  # bm[-1] is A's row dim; B broadcasts over the rest
        xb = self.loaded_as_read(xb)
        if len(self.g.tensors[xa].shape) < 2:  # a single row (a decode step): the builder's matmul needs rank 2
            xa = self.op(self.fresh(f"{self.current}.row"), "reshape", xa, (1, self.g.tensors[xa].shape[-1]))
            self.notes.append(f"{self.current}: copies the single row {a.buffer} to a (1, K) matrix")
        mm = self.op(f"{self.current}.mm" if bias is not None else self.current, "matmul", xa, xb, dtype=dtype)
        kernel = node.python_kernel_name
        self.matmuls.append(
            MatmulInfo(self.current, mm, kernel, math.prod(a.size[:nb]), a.size[nb], b.size[nb + 1], a.size[nb + 1])
        )
        out = mm
        if bias is not None:
            out = self.op(self.current, "pointwise", "add", mm, self.operand(ic, reads[2], gp, 2, bm + gn), dtype=dtype)
        self._register(out, gp, bm + gn, out_coeffs, set(), dtype)

    # ---- multi-output kernels ----------------------------------------------------------
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

    def _multi_output(self, node: ir.MultiOutput) -> None:
        parent = node.inputs[0].get_name()
        index = node.indices[-1][1] if node.indices else 0
        if (parent, index) not in self.multi:
            raise Unsupported(f"output {index} of {parent}, which is not modelled")
        tensor, dtype, split = self.multi[(parent, index)]
        v = acc.view_of(node)
        shape = self.g.tensors[tensor].shape
        if split is not None:  # (group, batch, kv heads, seq, dim) over a (batch, heads, seq[, dim]) buffer
            st = v.stride + (0,) * (4 - len(v.stride))
            strides = [st[1], st[0], split[0] * st[1], st[2], st[3]]
            self.t[self.current] = TInfo(tensor, out_dims(shape, strides), False, self.current, dtype)
            return
        big = [(z, s) for z, s in zip(v.size, v.stride) if z > 1]  # the modelled tensor may add or drop unit dims
        if [z for z in shape if z > 1] != [z for z, _ in big]:
            raise Unsupported(f"output {index} of {parent} is {v.size}, modelled as {shape}")
        strides = iter(s for _, s in big)
        dims = out_dims(shape, [next(strides) if z > 1 else None for z in shape])
        self.t[self.current] = TInfo(tensor, dims, False, self.current, dtype)

    # ---- opaque --------------------------------------------------------------------
    def _opaque(self, node: ir.Operation, reason: str) -> None:
        """A copy of the right shape reading a stand-in leaf; the node's inputs go to device memory."""
        for dep in node.get_read_names():
            if dep in self.t and not self.t[dep].leaf:
                self.forced.add(self.t[dep].name)
        for buf in node.get_outputs():
            self.current = buf.get_name()
            self.opaque[self.current] = reason
            layout = getattr(buf, "layout", None)
            if not isinstance(layout, ir.Layout):
                continue  # no data of its own (a multi-output kernel or a side effect)
            try:
                size, stride = acc.ints(layout.size, "size"), acc.ints(layout.stride, "stride")
            except Unsupported as exc:
                self.opaque[self.current] = f"{reason}; no stand-in op: {exc}"
                continue
            dtype = acc.stand_in_dtype(layout.dtype)
            src = self.g.input(self.fresh(f"{self.current}.opaque_in"), size or (1,), dtype)
            self.op(self.current, "pointwise", "copy", src, dtype=dtype)
            self.t[self.current] = TInfo(self.current, out_dims(size, stride), False, self.current, dtype)


def _spanned_last(gp: Grouping, reads: list[Read]) -> list[int]:
    """Group order for an elementwise loop: groups that no read spans first, so that the
    operands broadcast into them (right-aligned) through views rather than copies."""

    def spanned(g: int) -> bool:
        return any(not rd.affine or any(rd.coeffs[gp.atoms[a].var] for a in gp.groups[g]) for rd in reads)

    groups = range(len(gp.groups))
    return [g for g in groups if not spanned(g)] + [g for g in groups if spanned(g)]


def _reduce_kind(data: ir.Reduction) -> tuple[str, str | None]:
    """(spyreopt reduction, pointwise prologue or None) of a reduction loop."""
    if isinstance(data, ir.WelfordReduction):
        index = getattr(data, "output_index", 0)
        if index == 2:
            raise Unsupported("the element count output of a Welford reduction is not modelled")
        return ("mean", None) if index == 0 else ("sum", "square")
    if isinstance(data, ir.OnlineSoftmaxReduction):
        return ("max", None) if getattr(data, "output_index", 0) == 0 else ("sum", "exp")
    if data.reduction_type not in REDUCTIONS:
        raise Unsupported(f"reduction type {data.reduction_type!r} is not modelled")
    return REDUCTIONS[data.reduction_type], None


def _reduction_order(ranges: tuple[int, ...], rranges: tuple[int, ...], primary: Read | None) -> list[int]:
    """Loop variable order for a reduction: each reduced variable (outermost first) takes the
    size-1 output dim (keepdim slot) that keeps the primary read's strides descending, so the
    reduce keeps Inductor's output shape and reads its operand without a transpose; a variable
    that fits no slot goes last."""
    nx = len(ranges)
    coeff = primary.coeffs if primary else (0,) * (nx + len(rranges))
    slots = [i for i, r in enumerate(ranges) if r == 1]
    placed: dict[int, int] = {}

    def disorder(pos: int, c: int) -> int:
        """Output variables on the wrong side of a reduced variable with stride ``c`` placed at ``pos``."""
        return sum(1 for i in range(nx) if ranges[i] > 1 and (coeff[i] > c) != (i < pos))

    for j in sorted(range(len(rranges)), key=lambda j: -coeff[nx + j]):
        c = coeff[nx + j]
        free = [i for i in slots if i not in placed]
        best = min(free, key=lambda i: (disorder(i, c), -i), default=None)
        if best is not None and disorder(best, c) <= disorder(nx, c):
            placed[best] = j
    order = [nx + placed[i] if i in placed else i for i in range(nx)]
    return order + [nx + j for j in range(len(rranges)) if j not in placed.values()]


def _pointwise_fn(ops: list[str]) -> str:
    for o in ops:
        if o in TRANSCENDENTAL_OPS:
            return TRANSCENDENTAL_OPS[o]
    for o in ops:
        if o in ARITHMETIC_OPS:
            return ARITHMETIC_OPS[o]
    return "copy"


def _buffer_name(node) -> str | None:
    try:
        return node.get_name()
    except (AttributeError, NotImplementedError):
        return None


def translate(lowering, name: str, parameters: set[str] | frozenset[str] = frozenset()) -> Translation:
    """The spyreopt graph of one lowered Inductor graph (``GraphLowering`` at codegen entry);
    ``parameters``: the graph inputs that are the model's parameters (planned as weights)."""
    return Translator(lowering, name, parameters).run()
