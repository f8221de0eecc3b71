"""Memory in the CP-SAT model: capacity constraints at maximal live sets, and addresses in a NoOverlap2D.

In-place reuse (``Formulation`` tail edges) adds address equalities: a present tail sits at the address of
the buffer it continues, and an aliased output (``Edge.alias``) at the address of the buffer it writes over."""

from __future__ import annotations

import numpy as np

from spyreopt.model.formulation import BufferKey
from spyreopt.solvers.cpsat.linear import Lin
from spyreopt.solvers.presolve import memory_limit
from spyreopt.solvers.presolve.limits import live


def _buffer_items(f, red, x, pair_lit, edge_use):
    """Every buffer that may exist: (key, lower, upper, {size: [(candidate or pair, literal)]})."""
    items = []
    for i, n in enumerate(f.nodes):
        if not live(n.interval):
            continue
        sizes: dict[int, list] = {}
        for s, lit in x[i].items():
            if n.usages[s] > 0:
                sizes.setdefault(int(n.usages[s]), []).append((s, lit))
        if sizes:
            items.append((("node", i), n.interval[0], n.interval[1], sizes))
    for k, e in enumerate(f.edges):
        if not edge_use[k]:
            continue
        sizes = {}
        for pair, size in edge_use[k].items():
            sizes.setdefault(size, []).append((pair, pair_lit[k][pair]))
        items.append((("edge", k), e.interval[0], e.interval[1], sizes))
    return items


def _usage_lin(sizes: dict[int, list], exactly_one: bool) -> Lin:
    """The buffer's live bytes; when one option is always chosen, the smallest size is a constant."""
    lin = Lin()
    options = [(lit, size) for size, group in sizes.items() for _, lit in group]
    base = min(size for _, size in options) if exactly_one else 0
    lin.const += base
    for lit, size in options:
        lin.add(lit, size - base)
    return lin


def capacity(m, f, red, x, pair_lit, edge_use) -> int:
    """Linear capacity constraints at the maximal sets of simultaneously live buffers."""
    limit = memory_limit(f)
    items = _buffer_items(f, red, x, pair_lit, edge_use)
    lins = []
    for key, _, _, sizes in items:
        covers = key[0] == "node" and sum(len(g) for g in sizes.values()) == len(x[key[1]])
        lins.append(_usage_lin(sizes, covers))
    starts: dict[int, list[int]] = {}
    ends: dict[int, list[int]] = {}
    for j, (_, lo, hi, _) in enumerate(items):
        starts.setdefault(lo, []).append(j)
        ends.setdefault(hi, []).append(j)
    points = sorted(set(starts) | set(ends))
    live: set[int] = set()
    count = 0
    for p_idx, p in enumerate(points):
        live -= set(ends.get(p, []))
        live |= set(starts.get(p, []))
        nxt = points[p_idx + 1] if p_idx + 1 < len(points) else None
        if not starts.get(p) or nxt is None or not ends.get(nxt):
            continue  # not a maximal live set: the next segment holds a superset
        total = Lin()
        for j in sorted(live):
            total.vars.extend(lins[j].vars)
            total.coefs.extend(lins[j].coefs)
            total.const += lins[j].const
        if total.bounds()[1] <= limit:
            continue
        m.add(total.expr() <= limit - total.const)
        count += 1
    return count


def placement(m, f, red, x, pair_lit, edge_use, fixed):
    """Optional time x address intervals of every buffer that may exist, in one NoOverlap2D."""
    cap, align = f.placement.capacity, f.placement.alignment
    groups: list[tuple[object, str, int, frozenset]] = []
    addresses: dict[BufferKey, object] = {}
    xs, ys = [], []
    items = _buffer_items(f, red, x, pair_lit, edge_use)
    presence: dict[BufferKey, list] = {}
    free = [(lo, hi) for key, lo, hi, _ in items if key not in fixed]
    for key, lo, hi, sizes in items:
        if key in fixed:
            if not any(flo < hi and lo < fhi for flo, fhi in free):
                continue
            q = m.new_constant(fixed[key] // align)
        else:
            q = m.new_int_var(0, (cap - min(sizes)) // align, f"q_{key[0]}{key[1]}")
            addresses[key] = q
        smallest = min(sizes)
        for size, group in sorted(sizes.items()):
            lits = [lit for _, lit in group]
            members = frozenset(member for member, _ in group)
            if len(lits) == 1:
                present = lits[0]
            else:
                present = m.new_bool_var(f"p_{key[0]}{key[1]}_{size}")
                m.add(present == sum(lits))
                groups.append((present, key[0], key[1], members))
            presence.setdefault(key, []).append(present)
            if size > smallest:
                if isinstance(present, int):
                    m.add(align * q + size <= cap)
                else:
                    m.add(align * q + size <= cap).only_enforce_if(present)
            if isinstance(present, int):
                xs.append(m.new_fixed_size_interval_var(lo, hi - lo, f"t_{key[0]}{key[1]}_{size}"))
                ys.append(m.new_fixed_size_interval_var(align * q, size, f"a_{key[0]}{key[1]}_{size}"))
            else:
                xs.append(m.new_optional_fixed_size_interval_var(lo, hi - lo, present, f"t_{key[0]}{key[1]}_{size}"))
                ys.append(
                    m.new_optional_fixed_size_interval_var(align * q, size, present, f"a_{key[0]}{key[1]}_{size}")
                )
    if len(xs) > 1:
        m.add_no_overlap_2d(xs, ys)
    _shared_addresses(m, f, red, x, addresses, fixed, presence)
    return groups, addresses


def _shared_addresses(m, f, red, x, addresses, fixed, presence) -> None:
    """Tails at the address of the buffer they continue; aliased outputs at the address they write over."""
    align = f.placement.alignment

    def addr(key):
        if key in addresses:
            return addresses[key]
        return fixed[key] // align if key in fixed else None

    def same(a, b, lits) -> None:
        if isinstance(a, int) and isinstance(b, int):
            return  # both kept (an LNS window): a valid incumbent already shares the address
        lits = [lit for lit in lits if not isinstance(lit, int)]
        constraint = m.add(a == b)
        if lits:
            constraint.only_enforce_if(lits)

    for k, e in enumerate(f.edges):
        if e.tail is None or addr(e.tail) is None:
            continue
        donor = addr(e.tail)
        tail = addr(("edge", k))
        if tail is not None:
            # a tail kept at its address in an LNS window has both nodes kept, so it is present; its donor
            # may still move (live during the window): the equality holds unconditionally
            kept = [1] if ("edge", k) in fixed and ("edge", k) not in presence else []
            for present in presence.get(("edge", k), kept):
                same(tail, donor, [present])
        out = addr(("node", e.v))
        if e.alias is None or out is None:
            continue
        du, dv = red.domain(e.u), red.domain(e.v)
        grid = np.ix_(du, dv)
        pairs = e.alias[grid] & red.allowed[k][grid] & (f.nodes[e.v].usages[dv] > 0)[None, :]
        for a, b in zip(*np.nonzero(pairs)):
            same(out, donor, [x[e.u][int(du[a])], x[e.v][int(dv[b])]])
