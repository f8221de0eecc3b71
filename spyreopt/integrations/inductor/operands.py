"""Graph-building state shared by the translation, and how a grouped read becomes an operand.

A read of a grouped loop (see ``groups``) becomes, in order of preference:

* the producer's tensor itself, or a ``permute`` view of it (free);
* for a graph input or constant (a device-memory leaf): an alias leaf with the shape the op
  wants, in the storage's dim order so the stick layout stays honest (free: leaves are read
  from device memory anyway);
* a ``reshape`` of a computed tensor whose dims must be regrouped (a copy, priced by the planner);
* for a slice, offset or gather of a computed tensor: a device-memory read -- the producer is
  marked as a graph output (written to device memory) and the op reads a leaf aliasing the slice.

Every copy and device-memory read added here is listed in ``notes``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from spyreopt.integrations.inductor.access import Unsupported
from spyreopt.integrations.inductor.groups import Dim, Grouping, Read, atom_interval, contiguous, dims_to_groups
from spyreopt.model.graph import Graph


@dataclass
class TInfo:
    """The spyreopt tensor holding an Inductor buffer, and where each of its dims lives in the buffer's storage."""

    name: str
    dims: tuple[Dim | None, ...]  # per spyreopt dim; None for size-1 dims
    leaf: bool
    buffer: str
    dtype: str

    def read(self, coeffs: tuple[int, ...], offset: int = 0, affine: bool = True) -> Read:
        return Read(coeffs, tuple(d for d in self.dims if d is not None), offset, affine, flexible=self.leaf)

    def dim_index(self) -> list[int]:
        """Spyreopt dim index of each entry of ``read(...).dims``."""
        return [i for i, d in enumerate(self.dims) if d is not None]


@dataclass
class MatmulInfo:
    """A matmul as Inductor sized it (batch, M, N, K) and the plan op that computes it."""

    buffer: str
    op: str
    kernel: str
    batch: int
    m: int
    n: int
    k: int


def out_dims(sizes, strides) -> tuple[Dim | None, ...]:
    dims = tuple(Dim(s, st) if s > 1 and st is not None else None for s, st in zip(sizes, strides))
    return dims or (None,)


@dataclass
class Builder:
    """The graph under construction and the bookkeeping every translated node adds to."""

    g: Graph
    op_buffer: dict[str, str] = field(default_factory=dict)  # spyreopt op -> Inductor buffer
    notes: list[str] = field(default_factory=list)
    forced: set[str] = field(default_factory=set)  # tensors that must reach device memory
    matmuls: list[MatmulInfo] = field(default_factory=list)
    current: str = ""  # the Inductor buffer being translated

    def op(self, name: str, kind: str, *args, **kwargs) -> str:
        out = getattr(self.g, kind)(*args, name=name, **kwargs)
        self.op_buffer[name] = self.current
        return out

    def fresh(self, base: str) -> str:
        k = 0
        while f"{base}{k}" in self.g.tensors:
            k += 1
        return f"{base}{k}"

    def permute(self, x: str, perm: list[int]) -> str:
        if perm == list(range(len(perm))):
            return x
        return self.op(self.fresh(f"{self.current}.view"), "permute", x, perm)

    def loaded_as_read(self, x: str) -> str:
        """A parameter the matmul reads transposed (``nn.Linear`` keeps (out, in), the matmul reads (in, out))
        is given as a weight laid out as read: a parameter's device layout is chosen once, when the model
        is loaded onto the device, not per step (as the builder's weights are (in, out))."""
        t = self.g.tensors[x]
        op = self.g.ops.get(t.producer) if t.producer else None
        if op is None or op.kind != "view":
            return x
        src = self.g.tensors[op.inputs[0]]
        if src.producer is not None or src.role != "weight" or len(t.shape) != len(src.shape):
            return x
        name = f"{src.name}.loaded@{'x'.join(map(str, t.shape))}"
        if name not in self.g.tensors:
            self.g.weight(name, t.shape, t.dtype)
            self.notes.append(f"{self.current}: parameter {src.name} {src.shape} laid out as read, {t.shape}, at load")
        return name

    def drop_unread(self) -> None:
        """Ops whose result nothing reads and that are no output (an attention kernel's logsumexp in
        inference) are not planned: the device computes only what is used. Each one is noted."""
        readers = Counter(x for o in self.g.ops.values() for x in o.inputs)
        outputs = set(self.g.outputs)
        for o in reversed(list(self.g.ops.values())):  # consumers first: a chain of unread ops goes in one pass
            if readers[o.output] or o.output in outputs:
                continue
            buffer = self.op_buffer.pop(o.name, o.name)
            if o.kind != "view":  # a view left unread (a parameter now read as laid out) computes nothing
                self.notes.append(f"{buffer}: nothing reads {o.output}; not planned")
            del self.g.ops[o.name]
            del self.g.tensors[o.output]
            for x in o.inputs:
                readers[x] -= 1
                if not readers[x] and x in self.g.tensors and self.g.tensors[x].producer is None and x not in outputs:
                    del self.g.tensors[x]

    # ---- operands --------------------------------------------------------------
    def operand(self, info: TInfo, rd: Read, gp: Grouping, j: int, target: list[int]) -> str:
        """Read ``j`` of a grouped loop (``rd``, of ``info``) as an operand whose dims are the groups ``target``."""
        status = gp.status[j]
        if status == "leaf":
            return self._alias(info, rd, gp, target)
        if status == "ok":
            view = self._view(info, rd, gp, target)
            if view is not None:
                return view
        if status == "unclean" or not self._groups_contiguous(rd, gp, target):
            self.forced.add(info.name)
            why = gp.reason[j] or "its groups are not contiguous in the read"
            self.notes.append(f"{self.current}: reads {info.buffer} through device memory ({why})")
            return self._alias(info, rd, gp, target)
        return self._reshape(info, rd, gp, target)

    def _view(self, info: TInfo, rd: Read, gp: Grouping, target: list[int]) -> str | None:
        """The tensor or a permutation of it, if its dims right-align with ``target`` (unit dims
        of the tensor fill the positions it broadcasts over, and any extra leading positions)."""
        n, r = len(target), len(info.dims)
        pos = {g: p for p, g in enumerate(target)}
        idx = info.dim_index()
        want = {idx[k]: pos[g] for k, g in dims_to_groups(gp, rd).items()}
        if any(p < n - r for p in want.values()):
            return None
        free = [d for d in range(r) if d not in want]
        at = {p: d for d, p in want.items()}
        if any(info.dims[d] is not None for d in free):
            return None  # a dim of the tensor spans several groups (e.g. heads split for grouped-query attention)
        return self.permute(info.name, [at[p] if p in at else free.pop(0) for p in range(n - r, n)])

    @staticmethod
    def _groups_contiguous(rd: Read, gp: Grouping, target: list[int]) -> bool:
        return all(contiguous(gp.atoms, gp.groups[g], rd.coeffs) for g in target)

    @staticmethod
    def _strides(rd: Read, gp: Grouping, target: list[int]) -> dict[int, int]:
        """Target position -> the read's stride there (innermost atom), for positions it does not broadcast."""
        out = {}
        for p, g in enumerate(target):
            if not rd.affine:
                if gp.size(g) > 1:
                    out[p] = 0
                continue
            ivs = [iv for a in gp.groups[g] if (iv := atom_interval(gp.atoms[a], rd.coeffs)) is not None]
            if ivs:
                out[p] = min(lo for lo, _ in ivs)
        return out

    def _layout(self, rd: Read, gp: Grouping, target: list[int]) -> tuple[tuple[int, ...], list[int], dict[int, int]]:
        """(shape in storage order, permutation to the target's right-aligned window, strides)."""
        n = len(target)
        strides = self._strides(rd, gp, target)
        present = sorted(strides, key=lambda p: (-strides[p], p))
        lo = min(present) if present else n - 1
        window = list(range(lo, n))
        phys = [p for p in window if p not in strides] + present
        shape = tuple(gp.size(target[p]) if p in strides else 1 for p in phys)
        return shape, [phys.index(p) for p in window], strides

    def _alias(self, info: TInfo, rd: Read, gp: Grouping, target: list[int]) -> str:
        """A leaf aliasing what the read sees of ``info`` in device memory, viewed into the target's order."""
        shape, perm, strides = self._layout(rd, gp, target)
        own = [
            Dim(gp.size(target[p]), strides[p])
            for p in sorted(strides, key=lambda p: -strides[p])
            if gp.size(target[p]) > 1
        ]
        base = self.g.tensors[info.name]
        if info.leaf and base.shape == shape and rd.affine and [d for d in info.dims if d] == own:
            return self.permute(info.name, perm)
        name = f"{info.buffer}@{'x'.join(map(str, shape))}"
        if name not in self.g.tensors:
            make = self.g.weight if base.role == "weight" else self.g.input
            make(name, shape, info.dtype)
        return self.permute(name, perm)

    def _reshape(self, info: TInfo, rd: Read, gp: Grouping, target: list[int]) -> str:
        """Copy a computed tensor into the grouping the op needs (storage order kept)."""
        shape, perm, _ = self._layout(rd, gp, target)
        base = self.g.tensors[info.name]
        if base.numel != _prod(shape):
            raise Unsupported(f"cannot regroup {info.buffer} {base.shape} into {shape}")
        order = sorted(
            range(len(info.dims)),
            key=lambda d: (info.dims[d] is not None, -(info.dims[d].stride if info.dims[d] else 0), d),
        )
        src = self.permute(info.name, order)
        src = self.op(self.fresh(f"{self.current}.regroup"), "reshape", src, shape)
        self.notes.append(f"{self.current}: copies {info.buffer} {base.shape} to regroup its dims into {shape}")
        return self.permute(src, perm)


def _prod(xs) -> int:
    n = 1
    for x in xs:
        n *= x
    return n
