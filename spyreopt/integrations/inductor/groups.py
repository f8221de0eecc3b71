"""Index algebra: match a loop's iteration variables to the dims of the tensors it reads.

Inductor describes every access as a flat storage index, an affine function of
the loop variables; spyreopt describes operands as whole tensors whose dims
broadcast, permute (free views) or reshape (a copy). This module decides, with
integers only (no torch), how a loop's variables become spyreopt dims:

* a *stride interval* ``[lo, hi)`` is where a dim or a variable lives in a
  storage's index space (``lo`` = stride, ``hi`` = stride * size);
* a read is *clean* when its variables and the tensor's dims tile the same
  intervals (a permutation, split or merge of dims: no slice, offset, overlap
  or gather);
* variables are cut into *atoms* where a clean read's dims split them, and atoms
  are merged into *groups* where a read's dim spans several of them; a group is
  one spyreopt dim. A read that would force an illegal group (mixing variable
  kinds, breaking the output's contiguity, or splitting an atomic variable such
  as a matmul's k) is left out of the grouping and regrouped by a copy instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

Interval = tuple[int, int]


@dataclass(frozen=True)
class Dim:
    """One dim of a tensor in its storage: ``size`` elements ``stride`` apart."""

    size: int
    stride: int

    @property
    def interval(self) -> Interval:
        return (self.stride, self.stride * self.size)


@dataclass(frozen=True)
class Read:
    """One access: the flat index is ``offset + sum(coeffs[i] * var_i)`` into a tensor with ``dims``."""

    coeffs: tuple[int, ...]
    dims: tuple[Dim, ...]  # the tensor's dims of size > 1
    offset: int = 0
    affine: bool = True  # False: the index is not affine in the variables (gather, floor/mod)
    flexible: bool = False  # a device-memory leaf: any view of it is free, so it constrains nothing


@dataclass(frozen=True)
class Atom:
    var: int
    size: int
    inner: int  # the atom is (var // inner) % size


@dataclass
class Grouping:
    atoms: list[Atom]
    groups: list[list[int]]  # atom indices, in iteration order
    status: list[str]  # per read: "ok" | "regroup" | "unclean" | "leaf"
    reason: list[str] = field(default_factory=list)  # per read, why it is not "ok"

    def size(self, g: int) -> int:
        n = 1
        for a in self.groups[g]:
            n *= self.atoms[a].size
        return n

    def kind_var(self, g: int) -> int:
        return self.atoms[self.groups[g][0]].var

    def interval(self, g: int, coeffs: tuple[int, ...]) -> Interval | None:
        """The group's stride interval under ``coeffs``, or None if it is broadcast there.

        Only meaningful when the group is contiguous under ``coeffs`` (see ``contiguous``).
        """
        ivs = [atom_interval(self.atoms[a], coeffs) for a in self.groups[g]]
        if all(iv is None for iv in ivs):
            return None
        if any(iv is None for iv in ivs):
            raise ValueError("group is partly broadcast")
        return (ivs[-1][0], ivs[0][1])


def atom_interval(atom: Atom, coeffs: tuple[int, ...]) -> Interval | None:
    c = coeffs[atom.var]
    if c == 0 or atom.size == 1:
        return None
    return (c * atom.inner, c * atom.inner * atom.size)


def _cuts(iv: Interval, bounds: list[int]) -> list[Interval] | None:
    """Split ``iv`` at every bound inside it; None if a cut is not a mixed-radix split."""
    lo, hi = iv
    points = [lo] + [b for b in bounds if lo < b < hi] + [hi]
    for a, b in zip(points, points[1:]):
        if b % a:
            return None
    return list(zip(points, points[1:]))


def var_cuts(read: Read, ranges: tuple[int, ...]) -> dict[int, set[int]] | str:
    """Per variable, the inner products where the read's dims cut it; or why the read is not clean."""
    if not read.affine:
        return "index is not affine in the loop variables"
    if read.offset:
        return f"reads from storage offset {read.offset} (a slice)"
    var_ivs: dict[int, Interval] = {}
    for i, (c, r) in enumerate(zip(read.coeffs, ranges)):
        if c < 0:
            return "reads with a negative stride"
        if c and r > 1:
            var_ivs[i] = (c, c * r)
    dim_ivs = [d.interval for d in read.dims if d.size > 1]
    if any(d.stride <= 0 for d in read.dims if d.size > 1):
        return "tensor has a dim with stride 0"
    bounds = sorted({x for iv in list(var_ivs.values()) + dim_ivs for x in iv})
    var_pieces: list[Interval] = []
    out: dict[int, set[int]] = {}
    for i, iv in var_ivs.items():
        pieces = _cuts(iv, bounds)
        if pieces is None:
            return "a tensor dim cuts a loop variable at a non-dividing point"
        var_pieces += pieces
        out[i] = {lo // iv[0] for lo, _ in pieces}
    dim_pieces: list[Interval] = []
    for iv in dim_ivs:
        pieces = _cuts(iv, bounds)
        if pieces is None:
            return "a loop variable cuts a tensor dim at a non-dividing point"
        dim_pieces += pieces
    if len(set(var_pieces)) != len(var_pieces):
        return "loop variables overlap in the index (a windowed or diagonal read)"
    if sorted(var_pieces) != sorted(dim_pieces):
        return "the read covers part of the tensor (a slice) or repeats elements"
    return out


def _chain(points: set[int], r: int) -> bool:
    s = sorted(points)
    return all(b % a == 0 for a, b in zip(s, s[1:])) and r % s[-1] == 0


def _atoms(ranges: tuple[int, ...], cuts: dict[int, set[int]]) -> list[Atom]:
    atoms: list[Atom] = []
    for v, r in enumerate(ranges):
        pts = sorted(cuts.get(v, {1}) | {1}, reverse=True)
        hi = r
        for p in pts:
            atoms.append(Atom(v, hi // p, p))
            hi = p
    return atoms


class _UnionFind:
    def __init__(self, n: int):
        self.parent = list(range(n))

    def find(self, x: int) -> int:
        while self.parent[x] != x:
            self.parent[x] = self.parent[self.parent[x]]
            x = self.parent[x]
        return x

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)

    def groups(self) -> list[list[int]]:
        out: dict[int, list[int]] = {}
        for x in range(len(self.parent)):
            out.setdefault(self.find(x), []).append(x)
        return sorted(out.values())


def contiguous(atoms: list[Atom], group: list[int], coeffs: tuple[int, ...]) -> bool:
    """All broadcast, or each atom directly outside the next one in storage."""
    ivs = [atom_interval(atoms[a], coeffs) for a in group]
    if all(iv is None for iv in ivs):
        return True
    if any(iv is None for iv in ivs):
        return False
    return all(outer[0] == inner[1] for outer, inner in zip(ivs, ivs[1:]))


def _valid(
    atoms: list[Atom], groups: list[list[int]], kinds: tuple[str, ...], reads: list[Read], out_coeffs: tuple[int, ...],
    reduced: set[str],
) -> bool:  # fmt: skip
    for grp in groups:
        if grp != list(range(grp[0], grp[0] + len(grp))):
            return False
        if len({kinds[atoms[a].var] for a in grp}) > 1:
            return False
        if kinds[atoms[grp[0]].var] not in reduced and not contiguous(atoms, grp, out_coeffs):
            return False
        for rd in reads:
            if not contiguous(atoms, grp, rd.coeffs):
                return False
            ivs = [atom_interval(atoms[a], rd.coeffs) for a in grp]
            if ivs[0] is not None and not any(
                d.interval[0] <= ivs[-1][0] and ivs[0][1] <= d.interval[1] for d in rd.dims
            ):
                return False
    return True


def group_loop(
    ranges: tuple[int, ...],
    kinds: tuple[str, ...],
    reads: list[Read],
    out_coeffs: tuple[int, ...],
    *,
    atomic: frozenset[str] = frozenset(),
    reduced: frozenset[str] = frozenset(),
    flatten: frozenset[str] = frozenset(),
) -> Grouping:
    """Group a loop's variables into spyreopt dims; reads are taken in order, earlier ones win.

    ``kinds`` labels each variable (a group never mixes kinds); variables whose kind is in
    ``atomic`` are never cut; kinds in ``reduced`` are not written (no output contiguity).
    Groups of a kind in ``flatten`` are then merged with their neighbour wherever every read
    and the output allow it, except into the innermost variable's group: leading dims such as
    (batch, sequence) become one token dim, the way the matmuls around them see it.
    """
    status = ["ok"] * len(reads)
    reason = [""] * len(reads)
    cuts: dict[int, set[int]] = {}
    for j, rd in enumerate(reads):
        if rd.flexible:
            status[j] = "leaf"
            continue
        vc = var_cuts(rd, ranges)
        if isinstance(vc, str):
            status[j], reason[j] = "unclean", vc
            continue
        trial = {v: set(p) for v, p in cuts.items()}
        for v, pts in vc.items():
            trial.setdefault(v, {1}).update(pts)
        if any(kinds[v] in atomic and len(p) > 1 for v, p in trial.items()) or not all(
            _chain(p, ranges[v]) for v, p in trial.items()
        ):
            status[j], reason[j] = "regroup", "its dims cut the loop where another operand or the op cannot"
            continue
        cuts = trial
    atoms = _atoms(ranges, cuts)
    uf = _UnionFind(len(atoms))
    accepted: list[Read] = []
    for j, rd in enumerate(reads):
        if status[j] != "ok":
            continue
        trial_uf = _UnionFind(len(atoms))
        trial_uf.parent = list(uf.parent)
        for d in rd.dims:
            members = [
                a
                for a, at in enumerate(atoms)
                if (iv := atom_interval(at, rd.coeffs)) and d.interval[0] <= iv[0] and iv[1] <= d.interval[1]
            ]
            for a in members[1:]:
                trial_uf.union(members[0], a)
        if _valid(atoms, trial_uf.groups(), kinds, accepted + [rd], out_coeffs, set(reduced)):
            uf = trial_uf
            accepted.append(rd)
        else:
            status[j], reason[j] = (
                "regroup",
                "its dims would merge loop dims that other operands or the output keep apart",
            )
    groups = uf.groups()
    last = len(ranges) - 1
    k = 0
    while k + 1 < len(groups):
        a, b = groups[k], groups[k + 1]
        merged = groups[:k] + [a + b] + groups[k + 2 :]
        mergeable = kinds[atoms[a[0]].var] in flatten and all(atoms[x].var != last for x in b)
        if mergeable and _valid(atoms, merged, kinds, accepted, out_coeffs, set(reduced)):
            groups = merged
        else:
            k += 1
    return Grouping(atoms, groups, status, reason)


def dims_to_groups(grouping: Grouping, rd: Read) -> dict[int, int]:
    """For an ``ok`` read: tensor dim index (into ``rd.dims``) -> group index."""
    out = {}
    for g in range(len(grouping.groups)):
        iv = grouping.interval(g, rd.coeffs)
        if iv is None:
            continue
        for k, d in enumerate(rd.dims):
            if d.interval == iv:
                out[k] = g
    return out
