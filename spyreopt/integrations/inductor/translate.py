"""Translate Inductor's lowered IR (before scheduling) into a spyreopt ``Graph``: the driver over the
lowered operations, matmul kernels, multi-output kernels and opaque nodes; loops are in ``loops``,
attention in ``attention``, convolutions, concatenations and scans in ``extern``, the shared state
(tensors of the lowered graph) in ``lowered``.

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

import spyreopt.integrations.inductor.access as acc
import spyreopt.integrations.inductor.attention as attention
import spyreopt.integrations.inductor.extern as extern
import spyreopt.integrations.inductor.loops as loops
from spyreopt.errors import GraphError
from spyreopt.integrations.inductor.access import Unsupported
from spyreopt.integrations.inductor.groups import group_loop
from spyreopt.integrations.inductor.lowered import Lowered
from spyreopt.integrations.inductor.operands import MatmulInfo, TInfo, out_dims
from spyreopt.model.graph import Graph

MATMUL_KERNELS = {
    "extern_kernels.mm": (False, False),  # (batched, bias)
    "extern_kernels.bmm": (True, False),
    "extern_kernels.addmm": (False, True),
    "extern_kernels.baddbmm": (True, True),
}
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
    buffer_strides: dict[str, tuple[int | None, ...]] = field(default_factory=dict)  # per dim of that tensor:
    # its stride in the buffer's storage (None: a unit dim)

    def counts(self) -> dict[str, int]:
        c = Counter(o.kind for o in self.graph.ops.values())
        c["opaque"] = len(self.opaque)
        return dict(sorted(c.items()))


class Translator(Lowered):
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
        own = {k: v for k, v in self.t.items() if k == v.buffer and v.name in self.g.tensors}
        held = {k: v.name for k, v in own.items()}
        strides = {k: tuple(d.stride if d else None for d in v.dims) for k, v in own.items()}
        return Translation(self.g, self.op_buffer, self.opaque, self.notes, self.matmuls, self.nodes, held, strides)

    def _translate(self, node: ir.Operation) -> None:
        kernel = getattr(node, "python_kernel_name", None)
        if isinstance(node, ir.ComputedBuffer):
            loops.computed(self, node)
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
        self.register(out, gp, bm + gn, out_coeffs, set(), dtype)

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


def _buffer_name(node) -> str | None:
    try:
        return node.get_name()
    except (AttributeError, NotImplementedError):
        return None


def translate(lowering, name: str, parameters: set[str] | frozenset[str] = frozenset()) -> Translation:
    """The spyreopt graph of one lowered Inductor graph (``GraphLowering`` at codegen entry);
    ``parameters``: the graph inputs that are the model's parameters (planned as weights)."""
    return Translator(lowering, name, parameters).run()
