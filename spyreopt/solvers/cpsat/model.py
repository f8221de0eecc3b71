"""The CP-SAT model of a Formulation over its domains (``presolve.domains``).

Model (``build_model``):

* one Boolean per remaining candidate, ``ExactlyOne`` per node (a node with one
  candidate left is the constant 1);
* per edge, the cost tables (edge cost and max-term parts) are reparametrised
  ``t[a, b] = r[a] + c[b] + res[a, b]`` (row then column minima, over allowed
  pairs), ``r``/``c`` go onto the endpoint literals; a pair literal ``y[a, b]``
  is needed only for allowed pairs with a non-zero residual or a usage. Two
  encodings, chosen per edge:

  - dense (the auto-sharding form), when the edge has at most ``DENSE_FACTOR``
    times as many allowed pairs as needed ones (or as endpoint candidates): a
    literal for every allowed pair, ``sum_b y[a, b] == x_u[a]`` per row and
    ``sum_a y[a, b] == x_v[b]`` per column. Its LP relaxation is the local
    marginal polytope, far tighter than the sparse one: on IOPDDL B the sparse
    form's root bound is about 31k, the dense form's proves the optimum 532,843;
  - sparse, otherwise: literals only for needed pairs, linked per row by
    ``sum_b y[a, b] <= x_u[a]`` and ``sum_b y[a, b] >= x_u[a] + sum_b x_v[b] - 1``
    (over the row's needed pairs) and likewise per column, which makes
    ``y[a, b] == x_u[a] and x_v[b]`` exact; forbidden pairs are excluded by
    ``x_u[a] + sum_{b forbidden} x_v[b] <= 1`` (or the support form
    ``sum_{b allowed} x_v[b] >= x_u[a]``, whichever is shorter).

  With one end fixed the pair literal is the other end's literal;
* a max term is an integer epigraph ``z >= alternative`` (minimised);
* capacity: one linear constraint per maximal set of simultaneously live
  buffers (where a buffer starts and the next event is an end), skipped when
  it cannot bind;
* placement: every buffer that may exist gets optional intervals (time x
  address), one per distinct size, present when a candidate (pair) of that
  size is chosen, sharing one offset ``alignment * q`` per buffer key, all in
  one ``AddNoOverlap2D``.

The model's objective plus ``Built.offset`` equals ``Formulation.evaluate``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model

from spyreopt.model.formulation import BufferKey, Formulation, affine_value
from spyreopt.solvers.cpsat.edges import edge_terms
from spyreopt.solvers.cpsat.linear import Lin, check_range
from spyreopt.solvers.cpsat.memory import capacity, placement
from spyreopt.solvers.presolve import Domains, memory_limit


def estimate_size(f: Formulation, red: Domains) -> int:
    """Variables plus constraints of the whole model, without building it (dense links assumed)."""
    size = sum(int(m.sum()) for m in red.masks) + len(f.nodes)
    for k, e in enumerate(f.edges):
        du, dv = int(red.masks[e.u].sum()), int(red.masks[e.v].sum())
        if e.u != e.v and du > 1 and dv > 1:
            size += int(red.effective(f, k).sum()) + du + dv
    return size


@dataclass
class Built:
    """A CP-SAT model of a reduced Formulation and the maps back to the Formulation."""

    model: cp_model.CpModel
    x: list[dict[int, object]]  # node -> candidate -> literal (or the constant 1)
    pairs: list[dict[tuple[int, int], object]]  # edge -> pair -> new literal (only pairs with their own variable)
    groups: list[tuple[object, str, int, frozenset]]  # new presence literal, "node"/"edge", index, members
    epigraphs: list[tuple[object, int]]  # (z, max-term index)
    addresses: dict[BufferKey, object]  # buffer key -> q (offset = alignment * q)
    offset: int  # the Formulation objective = model objective + offset
    capped: bool = False  # cost excess capped to fit int64: the model objective is a surrogate
    counts: dict[str, int] = field(default_factory=dict)

    def hint(self, f: Formulation, assignment, offsets: dict[BufferKey, int] | None) -> None:
        """A complete hint: every variable, auxiliary ones included, at the assignment's value."""
        m = self.model
        m.clear_hints()
        for i, lits in enumerate(self.x):
            for s, lit in lits.items():
                if not isinstance(lit, int):
                    m.add_hint(lit, int(assignment[i] == s))
        for k, lits in enumerate(self.pairs):
            e = f.edges[k]
            chosen = (assignment[e.u], assignment[e.v])
            for pair, lit in lits.items():
                m.add_hint(lit, int(pair == chosen))
        for lit, kind, idx, members in self.groups:
            if kind == "node":
                m.add_hint(lit, int(assignment[idx] in members))
            else:
                e = f.edges[idx]
                m.add_hint(lit, int((assignment[e.u], assignment[e.v]) in members))
        for z, t in self.epigraphs:
            term = f.max_terms[t]
            m.add_hint(z, max(affine_value(a, term.node, f.edges, assignment) for a in term.alternatives))
        align = f.placement.alignment if f.placement else 1
        for key, q in self.addresses.items():
            if offsets and key in offsets:
                m.add_hint(q, offsets[key] // align)

    def decode(self, f: Formulation, solver: cp_model.CpSolver, fixed: dict[BufferKey, int] | None = None):
        """(assignment, offsets) of the solver's solution."""
        assignment = []
        for lits in self.x:
            chosen = [s for s, lit in lits.items() if isinstance(lit, int) or solver.boolean_value(lit)]
            assignment.append(chosen[0])
        offsets: dict[BufferKey, int] = {}
        if f.placement is not None:
            align = f.placement.alignment
            for b in f.buffers(assignment):
                if b.key in self.addresses:
                    offsets[b.key] = align * int(solver.value(self.addresses[b.key]))
                elif fixed and b.key in fixed:
                    offsets[b.key] = fixed[b.key]
        return tuple(assignment), offsets


def build_model(
    f: Formulation,
    red: Domains,
    *,
    fixed_offsets: dict[BufferKey, int] | None = None,
    cap: int | None = None,
) -> Built:
    """The CP-SAT model of the reduced Formulation (module docstring).

    ``fixed_offsets``: buffers whose address is kept (an LNS window): they stay
    in the address model as fixed boxes where they are live with a free buffer
    and are left out elsewhere; ``decode`` copies their offsets. ``cap``:
    clip every node and edge cost excess at ``cap`` (a surrogate objective that
    fits int64; solutions are still evaluated exactly).
    """
    m = cp_model.CpModel()
    n_nodes = len(f.nodes)
    objective = Lin()
    x: list[dict[int, object]] = []
    node_w: list[dict[int, int]] = []  # unary objective coefficient per candidate (before per-node shift)
    for i, n in enumerate(f.nodes):
        dom = red.domain(i)
        if len(dom) == 1:
            x.append({int(dom[0]): 1})
        else:
            lits = {int(s): m.new_bool_var(f"x{i}_{s}") for s in dom}
            m.add_exactly_one(lits.values())
            x.append(lits)
        base = int(n.costs[dom].min())
        objective.const += base
        ex = n.costs - base
        if cap is not None:
            ex = np.minimum(ex, cap)
        node_w.append({int(s): int(ex[s]) for s in dom})

    # max-term parts grouped by edge, so their residuals decide which pair literals exist
    parts: dict[int, list[tuple[int, int, np.ndarray]]] = {}
    for t, term in enumerate(f.max_terms):
        for a, alt in enumerate(term.alternatives):
            for k, table in alt.edge_parts:
                parts.setdefault(k, []).append((t, a, table))
    alt_lin = [[Lin() for _ in term.alternatives] for term in f.max_terms]
    for t, term in enumerate(f.max_terms):
        for a, alt in enumerate(term.alternatives):
            for s, lit in x[term.node].items():
                alt_lin[t][a].add(lit, alt.unary[s])

    memory = memory_limit(f) is not None
    pairs: list[dict[tuple[int, int], object]] = []
    pair_lit: list[dict[tuple[int, int], object]] = []  # every pair literal of the edge, new or endpoint
    edge_use: list[dict[tuple[int, int], int]] = []
    n_links = 0
    for k in range(len(f.edges)):
        lits, all_lits, use, links = edge_terms(
            m, f, red, k, x, node_w, objective, alt_lin, parts.get(k, []), memory, cap
        )
        pairs.append(lits)
        pair_lit.append(all_lits)
        edge_use.append(use)
        n_links += links

    for i in range(n_nodes):  # per-node shift keeps coefficients small and non-negative
        shift = min(node_w[i].values())
        objective.const += shift
        for s, lit in x[i].items():
            objective.add(lit, node_w[i][s] - shift)

    epigraphs = []
    z_range = [0, 0]  # the epigraph variables' contribution to the objective's range
    for t, lins in enumerate(alt_lin):
        if len(lins) == 1 or all(not lin.vars for lin in lins):
            best = lins[0] if len(lins) == 1 else max(lins, key=lambda lin: lin.const)
            objective.vars.extend(best.vars)
            objective.coefs.extend(best.coefs)
            objective.const += best.const
            continue
        bounds = [lin.bounds() for lin in lins]
        lo, hi = max(b[0] for b in bounds), max(b[1] for b in bounds)
        check_range(lo, hi, f"max term {t}")
        z = m.new_int_var(lo, hi, f"z{t}")
        for lin in lins:
            m.add(z >= lin.expr() + lin.const)
        objective.add(z, 1)
        z_range[0] += lo
        z_range[1] += hi
        epigraphs.append((z, t))

    counts = {"pair_literals": sum(len(p) for p in pairs), "links": n_links}
    groups: list[tuple[object, str, int, frozenset]] = []
    addresses: dict[BufferKey, object] = {}
    if memory:
        counts["capacity_constraints"] = capacity(m, f, red, x, pair_lit, edge_use)
    if f.placement is not None:
        groups, addresses = placement(m, f, red, x, pair_lit, edge_use, fixed_offsets or {})
        counts["buffers_modelled"] = len(addresses)

    z_vars = {id(z) for z, _ in epigraphs}
    lo = sum(c for v, c in zip(objective.vars, objective.coefs) if c < 0 and id(v) not in z_vars) + z_range[0]
    hi = sum(c for v, c in zip(objective.vars, objective.coefs) if c > 0 and id(v) not in z_vars) + z_range[1]
    check_range(lo, hi, "objective")
    m.minimize(objective.expr())
    return Built(m, x, pairs, groups, epigraphs, addresses, objective.const, cap is not None, counts)
