"""The one-op changes ``model.explain`` reports, evaluated exactly on the plan's Formulation.

Changing op i's candidate touches only its node cost, its incident edges, its max term and those of its
consumers (whose cheaper balance twin may change): the change in those terms is the change in the whole
objective. Memory changes only over the intervals of i's buffer and of its incident edges, so the capacity
check adds that difference to the plan's usage profile.
"""

from __future__ import annotations

from dataclasses import replace

from spyreopt.costmodel.analytic import COST_UNIT_US
from spyreopt.errors import PlanError
from spyreopt.model.division import label
from spyreopt.model.explain_problem import build_problem, choice_of, locate, plan_decisions, term_value
from spyreopt.model.explanation import Alternative, EdgeExplanation, OpExplanation, choice_text
from spyreopt.model.plan_data import EdgePlan, PlanData

US = COST_UNIT_US
FORBIDDABLE_MODES = ("relayout", "restickify")


def us(units: int | float) -> str:
    return f"{units * US:,.3f} µs"


def signed(units: int) -> str:
    return ("+" if units >= 0 else "-") + us(abs(units))


class Search:
    """The plan's assignment in its rebuilt Problem, and every one-op change of it evaluated on demand."""

    def __init__(self, plan: PlanData):
        self.plan = plan
        self.notes: list[str] = []
        restriction = plan.stats.get("restriction") or {}
        self.pinned = dict(restriction.get("pin", {}))
        self.forbid = set(restriction.get("forbid", []))
        problem = build_problem(plan)
        a, missing = locate(problem, plan)
        if missing:  # pinned outside the enumerated layouts, or planned by a segment's own search: kept fixed
            decisions = plan_decisions(plan)
            problem = build_problem(plan, {n: decisions[n] for n in missing})
            a, still = locate(problem, plan)
            if still:
                raise PlanError(f"explain: op {still[0]!r}: the plan's decision is not a candidate of its problem")
            shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
            self.notes.append(
                f"{len(missing)} op(s) have a decision outside the candidates the planner enumerates "
                f"(pinned, or from a segment's own search); their alternatives are not searched: {shown}"
            )
        self.outside = set(missing)
        self.problem = problem
        self.f = f = problem.formulation
        self.a = list(problem.normalize(a))
        self.base = f.evaluate(self.a)
        if abs(self.base * US - plan.cost_us) > 1e-6 * max(1.0, plan.cost_us):
            self.notes.append(f"the plan states {plan.cost_us:,.3f} µs; its decisions evaluate to {us(self.base)}")
        self.profile = f.usage_profile(self.a)
        self.n_data = len(problem.edges)
        self.edge_of = {
            (e.tensor, problem.ops[e.producer].name, problem.ops[e.consumer].name, e.operand): k
            for k, e in enumerate(problem.edges)
        }
        self._index: dict[int, dict] = {}
        self._groups: dict[int, dict] = {}
        self._touched: dict[int, tuple] = {}
        self._before: dict[int, int] = {}  # the plan's local objective around each op

    # ---- one change, exactly ------------------------------------------------
    def _affected(self, i: int) -> tuple[list[int], list[int], list[int]]:
        """(incident edges, max terms, consumers) that a change of op i touches."""
        if i not in self._touched:
            self._touched[i] = self._touches(i)
        return self._touched[i]

    def _touches(self, i: int) -> tuple[list[int], list[int], list[int]]:
        f = self.f
        edges = f.incident_edges(i)
        consumers = sorted({f.edges[k].v for k in edges if k < self.n_data and f.edges[k].v != i})
        terms = sorted({t for j in [i, *consumers] for t in f.max_terms_of(j)})
        return edges, terms, consumers

    def _local(self, i: int, a: list[int]) -> int:
        edges, terms, consumers = self._affected(i)
        f = self.f
        total = sum(int(f.nodes[j].costs[a[j]]) for j in [i, *consumers])
        total += sum(int(f.edges[k].costs[a[f.edges[k].u], a[f.edges[k].v]]) for k in edges)
        return total + sum(term_value(self.problem, t, a) for t in terms)

    def _twin(self, j: int, s: int) -> int | None:
        c = self.problem.candidates[j][s]
        if c.branch == "-":
            return None
        if j not in self._index:
            self._index[j] = {x: n for n, x in enumerate(self.problem.candidates[j])}
        return self._index[j].get(replace(c, branch="w" if c.branch == "r" else "r"))

    def _retwin(self, j: int, a: list[int]) -> None:
        """Op j on its cheaper balance twin (``Problem.normalize``: only a strictly lower term moves it)."""
        twin = self._twin(j, a[j])
        if twin is None:
            return
        here = sum(term_value(self.problem, t, a) for t in self.f.max_terms_of(j))
        cur, a[j] = a[j], twin
        if sum(term_value(self.problem, t, a) for t in self.f.max_terms_of(j)) >= here:
            a[j] = cur

    def blocked(self, i: int, s: int) -> list[int]:
        """Incident edges whose pair the tables forbid when op i takes candidate s."""
        f, a = self.f, self.a
        out = []
        for k in f.incident_edges(i):
            e = f.edges[k]
            su, sv = (s if e.u == i else a[e.u]), (s if e.v == i else a[e.v])
            if not e.is_allowed(su, sv):
                out.append(k)
        return out

    def change(self, i: int, s: int) -> tuple[int, dict[int, int]]:
        """(objective, new candidates by op) of the plan with op i on candidate s: the exact objective."""
        a = self.a
        _, _, consumers = self._affected(i)
        if i not in self._before:
            self._before[i] = self._local(i, a)
        before = self._before[i]
        saved = {j: a[j] for j in [i, *consumers]}
        a[i] = s
        for j in consumers:
            self._retwin(j, a)
        after = self._local(i, a)
        new = {j: a[j] for j in saved}
        for j, x in saved.items():
            a[j] = x
        return self.base + after - before, new

    def overflow(self, new: dict[int, int]) -> tuple[int, int] | None:
        """The most loaded step over capacity under the change (step, usage), or None when it fits."""
        f, a = self.f, self.a
        delta: dict[int, int] = {}

        def add(lo: int, hi: int, d: int) -> None:
            if d:
                for t in range(lo, hi):
                    delta[t] = delta.get(t, 0) + d

        after = list(a)
        for j, x in new.items():
            after[j] = x
        for j in new:
            n = f.nodes[j]
            add(*n.interval, int(n.usages[after[j]]) - int(n.usages[a[j]]))
        for k in sorted({k for j in new for k in f.incident_edges(j)}):
            e = f.edges[k]
            if e.usages is not None:
                add(*e.interval, int(e.usages[after[e.u], after[e.v]]) - int(e.usages[a[e.u], a[e.v]]))
        worst = None
        for t, d in delta.items():
            used = self.profile[t] + d
            if used > f.usage_limit and (worst is None or used > worst[1]):
                worst = (t, used)
        return worst

    # ---- names of things ---------------------------------------------------
    def buffer_name(self, key: tuple[str, int]) -> str:
        p, f = self.problem, self.f
        if key[0] == "node":
            return p.ops[key[1]].output
        k = key[1]
        if k < self.n_data:
            e = p.edges[k]
            return f"copy of {e.tensor} for {p.ops[e.consumer].name}"
        e = f.edges[k]
        if e.tail is not None:
            return f"{self.buffer_name(e.tail)} (until {p.ops[e.v].name} reuses it)"
        return f"input kept on chip by {p.ops[e.u].name}"

    def capacity_reason(self, new: dict[int, int], step: int, used: int) -> str:
        a = list(self.a)
        for j, x in new.items():
            a[j] = x
        live = [b for b in self.f.buffers(a) if b.lower <= step < b.upper]
        live.sort(key=lambda b: (-b.size, b.key))
        shown = ", ".join(f"{self.buffer_name(b.key)} {b.size:,} B" for b in live[:5])
        more = f" and {len(live) - 5} more" if len(live) > 5 else ""
        limit = self.f.usage_limit
        return (
            f"scratchpad over capacity at step {step} ({self.problem.ops[step].name}): {used:,} of {limit:,} B "
            f"per core ({used - limit:,} over); live there: {shown}{more}"
        )

    def blocked_reason(self, k: int, i: int, s: int) -> str:
        p, f = self.problem, self.f
        e = f.edges[k]
        if k < self.n_data:
            ref = p.edges[k]
            lay_u = p.layout(ref.producer, s if ref.producer == i else self.a[ref.producer])
            lay_v = p.layout(ref.consumer, s if ref.consumer == i else self.a[ref.consumer])
            why = (
                "a loop's rule: a tensor crossing a loop's boundary goes through device memory, "
                "no restickify touches a loop, and a loop's device-memory output ends it"
                if lay_u.tile is not None or lay_v.tile is not None
                else "no legal edge mode (relayout fan-in or slicing)"
            )
            return f"edge {ref.tensor} ({p.ops[ref.producer].name} -> {p.ops[ref.consumer].name}): {why}"
        if e.tail is not None:
            return f"in-place reuse of {self.buffer_name(e.tail)} by {p.ops[e.v].name} needs matching slices"
        if e.usages is None:
            return (
                f"a loop's rule between {p.ops[e.u].name} and {p.ops[e.v].name}: ops while a tiled on-chip "
                f"tensor lives share its tile count, and a loop stages a tensor for all its readers or none"
            )
        return f"the kept slices of a graph input loaded by {p.ops[e.u].name} cannot be read by {p.ops[e.v].name}"

    def forbidden(self, i: int, s: int, new: dict[int, int]) -> list[str]:
        """Capabilities the plan's ``forbid`` excludes that the change would use."""
        if not self.forbid:
            return []
        p = self.problem
        out = []
        cand, lay = p.candidates[i][s], p.layout(i, s)
        if "inplace" in self.forbid and cand.residency != "hbm":
            out.append("keeps a tensor on chip, and the plan forbids inplace")
        if "tiling" in self.forbid and lay.tile is not None:
            out.append("runs in a tiled loop, and the plan forbids tiling")
        a = list(self.a)
        for j, x in new.items():
            a[j] = x
        for k in p.in_edges[i] + p.out_edges[i]:
            e = p.edges[k]
            info = p.pair(k, a[e.producer], a[e.consumer])
            if info is not None and info.mode in FORBIDDABLE_MODES and info.mode in self.forbid:
                out.append(f"{e.tensor} would need a {info.mode}, and the plan forbids {info.mode}")
        return out

    # ---- alternatives of one op -------------------------------------------
    def alone(self, i: int, s: int) -> int:
        """Op i's own time on candidate s: its node cost and max terms without its producers' edges."""
        f = self.f
        return int(f.nodes[i].costs[s]) + sum(
            max(int(x.unary[s]) for x in f.max_terms[t].alternatives) for t in f.max_terms_of(i)
        )

    def groups(self, i: int) -> dict[tuple[int, str], dict]:
        """Per (layout, residency) of op i: its best twin's objective, changes and why it is impossible."""
        if i in self._groups:
            return self._groups[i]
        out: dict[tuple[int, str], dict] = {}
        for s, c in enumerate(self.problem.candidates[i]):
            key = (c.layout, c.residency)
            blocked = self.blocked(i, s)
            if blocked:
                why = [self.blocked_reason(k, i, s) for k in blocked[:2]]
                res = {"s": s, "cost": None, "new": {i: s}, "why": why, "forbidden": []}
            else:
                cost, new = self.change(i, s)
                res = {"s": s, "cost": cost, "new": new, "why": [], "forbidden": self.forbidden(i, s, new)}
                over = self.overflow(new)
                if over is not None:
                    res.update(cost=None, why=[self.capacity_reason(new, *over)])
            res["alone"] = self.alone(i, s)
            held = out.get(key)
            if held is None or _better(res, held):
                out[key] = res
        self._groups[i] = out
        return out

    def alternative(self, i: int, kind: str, res: dict) -> Alternative:
        s = res["s"]
        choice = choice_of(self.problem, i, s)
        reasons = list(res["why"])
        name = self.problem.ops[i].name
        if res["cost"] is not None:
            reasons = self.price(i, res["new"]) + [f"plan total {signed(res['cost'] - self.base)}"]
            reasons += res["forbidden"]
            if res["cost"] < self.base and name not in self.pinned and not res["forbidden"]:
                reasons.append(f"cheaper than the plan: the search ({self.plan.backend}, {self.plan.status}) missed it")
        if name in self.pinned:
            reasons.insert(0, f"{name} is pinned ({self.pinned[name]})")
        cost = None if res["cost"] is None else res["cost"] * US
        return Alternative(kind, choice, res["alone"] * US, cost, reasons)

    def price(self, i: int, new: dict[int, int]) -> list[str]:
        """The change's price, part by part: the op's own time (with its reads), then each neighbour's edges."""
        p, f, a = self.problem, self.f, self.a
        after = list(a)
        for j, x in new.items():
            after[j] = x

        def part(asg: list[int], j: int, edges: list[int]) -> int:
            total = int(f.nodes[j].costs[asg[j]]) + sum(term_value(p, t, asg) for t in f.max_terms_of(j))
            return total + sum(int(f.edges[k].costs[asg[f.edges[k].u], asg[f.edges[k].v]]) for k in edges)

        out = [f"its own time {signed(part(after, i, []) - part(a, i, []))}"]
        by_consumer: dict[int, list[int]] = {}
        for k in p.out_edges[i]:
            by_consumer.setdefault(p.edges[k].consumer, []).append(k)
        priced = [(k, None) for k in p.in_edges[i]] + [(ks[0], ks) for ks in by_consumer.values()]
        for k, group in priced:
            e = p.edges[k]
            if group is None:  # into op i: the edge's additive part (its read is in op i's own time)
                cost = int(f.edges[k].costs[after[e.producer], after[e.consumer]]) - int(
                    f.edges[k].costs[a[e.producer], a[e.consumer]]
                )
            else:  # out of op i: the consumer's time with these edges
                cost = part(after, e.consumer, group) - part(a, e.consumer, group)
            old, now = p.pair(k, a[e.producer], a[e.consumer]), p.pair(k, after[e.producer], after[e.consumer])
            if old.mode != now.mode or cost:
                way, other = ("to", e.consumer) if group is not None else ("from", e.producer)
                out.append(f"{e.tensor} {way} {p.ops[other].name}: {old.mode} -> {now.mode} {signed(cost)}")
        return out

    def explain_op(self, i: int) -> OpExplanation:
        p = self.problem
        o = self.plan.op(p.ops[i].name)
        s0 = self.a[i]
        chosen = choice_of(p, i, s0)
        note = ""
        if o.name in self.pinned:
            note = f"pinned: {self.pinned[o.name]}"
        elif o.name in self.outside:
            note = "decided outside the enumerated candidates: alternatives not searched"
        alts: list[Alternative] = []
        groups = self.groups(i)
        home = (p.candidates[i][s0].layout, p.candidates[i][s0].residency)
        others = {k: r for k, r in groups.items() if k != home}
        if others:
            feasible = {k: r for k, r in others.items() if r["cost"] is not None}
            allowed = {k: r for k, r in feasible.items() if not r["forbidden"]}
            pool = allowed or feasible or others
            best = min(pool, key=lambda k: (pool[k]["cost"] or 0, pool[k]["alone"], k))
            alts.append(self.alternative(i, "best", others[best]))
            alone = min(groups, key=lambda k: (groups[k]["alone"], k))
            if alone not in (home, best):
                alts.append(self.alternative(i, "alone", groups[alone]))
            res = _other_residency(home, groups)
            if res is not None and res not in (best, alone):
                alts.append(self.alternative(i, "residency", groups[res]))
        return OpExplanation(
            o.name, o.kind, chosen, o.cores, o.predicted_us, dict(o.breakdown), self.alone(i, s0) * US, alts, note
        )

    # ---- edges ------------------------------------------------------------
    def explain_edge(self, e: EdgePlan) -> EdgeExplanation:
        p = self.problem
        k = self.edge_of.get((e.tensor, e.producer, e.consumer, e.operand))
        if k is None:  # an on-chip read of a staged graph input (``model.staging``)
            why = (
                f"{e.consumer} reads the slices of graph input {e.tensor} that {e.producer} kept on chip; "
                f"they are sliced differently, so they are relaid out (fan-in {e.fan_in})"
            )
            return EdgeExplanation(e.tensor, e.producer, e.consumer, e.operand, e.mode, None, [why])
        u, v = p.edges[k].producer, p.edges[k].consumer
        info = p.pair(k, self.a[u], self.a[v])
        ou, ov = self.plan.op(e.producer), self.plan.op(e.consumer)
        lead = {
            "hbm": f"{e.producer} writes {e.tensor} to device memory only ({ou.residency}); {e.consumer} reads it there",
            "spill": f"{e.producer} keeps {e.tensor} on chip and writes it back; {e.consumer}'s slices "
            f"({label(ov.division)}) differ from {e.producer}'s ({label(ou.division)}), so it reads the written copy",
            "relayout": f"{e.consumer} ({label(ov.division)}) reads slices other than {e.producer} wrote "
            f"({label(ou.division)}): an on-chip relayout, fan-in {info.fan_in}",
            "restickify": f"{e.consumer} reads {e.tensor} in another stick dim than {e.producer} wrote "
            f"(stick {ou.stick}): a restickify",
        }[e.mode]
        reasons = [lead]
        if e.mode == "spill":
            reasons.append(
                "for these two slicings the cost tables take the written copy: a relayout between them costs more "
                f"or is not legal (fan-in above {p.hw.relayout_fan_in})"
                + ("; the plan forbids relayout" if "relayout" in self.forbid else "")
            )
        if "inplace" in self.forbid:
            reasons.append("the plan forbids inplace: every tensor goes through device memory")
        if e.mode == "hbm":
            reasons.append(self._kept_on_chip(u, e.tensor))
        reasons.extend(self._inplace_options(k, u, v))
        cost = (info.extra_ps + info.read_ps) * US
        return EdgeExplanation(e.tensor, e.producer, e.consumer, e.operand, e.mode, cost, reasons)

    def _kept_on_chip(self, u: int, tensor: str) -> str:
        """What keeping the producer's output on chip (same division) would cost, or why it cannot."""
        p = self.problem
        lay = p.candidates[u][self.a[u]].layout
        groups = self.groups(u)
        key = next(((lay, r) for r in ("lx", "lx+hbm") if (lay, r) in groups), None)
        if key is None:
            return f"{p.ops[u].name} has no on-chip candidate with this division (a graph output, or its loop's rule)"
        res = groups[key]
        if res["cost"] is None:
            return f"keeping {tensor} on chip ({key[1]}) is impossible: {res['why'][0]}"
        if res["forbidden"]:
            return f"keeping {tensor} on chip ({key[1]}): {'; '.join(res['forbidden'])}"
        return f"keeping {tensor} on chip ({key[1]}): plan total {signed(res['cost'] - self.base)}"

    def _inplace_options(self, k: int, u: int, v: int) -> list[str]:
        """The cheapest single change of either end that puts edge k in place, or why none can."""
        p = self.problem
        best, refused = None, None
        for end in (u, v):
            for res in self.groups(end).values():
                s = res["s"]
                su, sv = (s, self.a[v]) if end == u else (self.a[u], s)
                info = p.pair(k, su, sv)
                if info is None or info.mode != "inplace":
                    continue
                if res["cost"] is None:
                    if refused is None or res["alone"] < refused[1]["alone"]:
                        refused = (end, res)
                elif best is None or (res["cost"], end, s) < (best[1]["cost"], best[0], best[1]["s"]):
                    best = (end, res)
        out = []
        if best is not None:
            end, res = best
            c = choice_of(p, end, res["s"])
            out.append(
                f"in place needs {p.ops[end].name} at {choice_text(c)}: plan total {signed(res['cost'] - self.base)}"
            )
        if refused is not None and (best is None or refused[1]["alone"] < best[1]["alone"]):
            end, res = refused
            c = choice_of(p, end, res["s"])
            out.append(f"in place with {p.ops[end].name} at {choice_text(c)} is impossible: {res['why'][0]}")
        if not out:
            out.append(f"no single change of {p.ops[u].name} or {p.ops[v].name} puts it in place")
        return out


def _better(a: dict, b: dict) -> bool:
    """Of two twins of one (layout, residency): the feasible one, then the cheaper."""
    if (a["cost"] is None) != (b["cost"] is None):
        return a["cost"] is not None
    return (a["cost"] or 0, a["alone"]) < (b["cost"] or 0, b["alone"])


def _other_residency(home: tuple[int, str], groups: dict) -> tuple[int, str] | None:
    layout, res = home
    order = ("hbm",) if res != "hbm" else ("lx", "lx+hbm")
    return next(((layout, r) for r in order if (layout, r) in groups), None)
