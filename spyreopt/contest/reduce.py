"""Exact reductions of a contest instance into the search's arrays, and the map back.

Every reduction keeps at least one optimal solution and never changes a cost:

* a strategy whose node cost is "infinite" (>= 1e17, the contest's 1e18 marks
  a forbidden choice) goes, unless every strategy of the node is such;
* arc consistency: a strategy with an infinite entry against every remaining
  strategy of some neighbour goes (same proviso);
* a node left with one strategy is fixed: its edges become unary costs of the
  neighbour, and self-loops become unary costs;
* parallel edges between the same two nodes are summed into one table.

The search then works in float64 (exact below 2**53; infinities are capped at
``INF`` so sums of them cannot overflow); the judge re-evaluates exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from spyreopt.contest.merge import FINITE, follower_groups, segments
from spyreopt.formats.iopddl import Instance

BIG = 10**17  # contest entries at or above this are forbidden choices
INF = 1e15  # their value in the search: above any real total, far below float64 overflow


@dataclass(frozen=True)
class Reduced:
    """The problem the search solves: groups of merged nodes, group ``g`` with ``k[g]`` strategies.

    Group ``g``'s memory is its segments ``segptr[g]:segptr[g+1]``: segment ``j``
    is live on ``[seglo[j], seghi[j])`` with usage ``segu[segoff[j] + s]``.
    """

    k: np.ndarray
    off: np.ndarray
    cost: np.ndarray  # float64 unary cost (member costs + folded edges)
    segptr: np.ndarray
    seglo: np.ndarray
    seghi: np.ndarray
    segoff: np.ndarray
    segu: np.ndarray  # int64
    ea: np.ndarray  # merged edges between groups, ea < eb
    eb: np.ndarray
    eoff: np.ndarray
    ecost: np.ndarray  # float64 row-major k[ea] x k[eb]
    usage_limit: int
    horizon: int
    group: np.ndarray  # int64 [original nodes] group of each node
    wmap_off: np.ndarray  # int64 [original nodes + 1]
    wmap: np.ndarray  # int64: original strategy of node w when its group takes s: wmap[wmap_off[w] + s]
    stats: dict

    @property
    def n(self) -> int:
        return len(self.k)

    def expand(self, x: np.ndarray) -> list[int]:
        """The solution in the file's numbering."""
        return self.wmap[self.wmap_off[:-1] + x[self.group]].tolist()


@njit(cache=True)
def _prune(k, off, cost, eu, ev, eoff, ecost, big):  # pragma: no cover - compiled
    alive = cost < big
    n = len(k)
    for i in range(n):  # a node whose every strategy is forbidden keeps them all
        anyalive = False
        for s in range(k[i]):
            anyalive |= alive[off[i] + s]
        if not anyalive:
            for s in range(k[i]):
                alive[off[i] + s] = True
    changed = True
    passes = 0
    while changed and passes < 20:
        changed = False
        passes += 1
        for e in range(len(eu)):
            a, b = eu[e], ev[e]
            kb = k[b]
            for side in range(2):
                x, y = (a, b) if side == 0 else (b, a)
                dead = np.zeros(k[x], np.bool_)
                ndead = 0
                nalive = 0
                for sx in range(k[x]):
                    if not alive[off[x] + sx]:
                        continue
                    nalive += 1
                    ok = False
                    for sy in range(k[y]):
                        if alive[off[y] + sy]:
                            idx = eoff[e] + (sx * kb + sy if side == 0 else sy * kb + sx)
                            if ecost[idx] < big:
                                ok = True
                                break
                    if not ok:
                        dead[sx] = True
                        ndead += 1
                if 0 < ndead < nalive:
                    for sx in range(k[x]):
                        if dead[sx]:
                            alive[off[x] + sx] = False
                    changed = True
    return alive


@njit(cache=True)
def _gather(
    k_old, off_old, pos, k, eu, ev, eoff_old, ecost_old, order, ea, eb, group, eoff, out, inf
):  # pragma: no cover
    """Sum each kept edge's alive sub-table into its merged slot (transposed when reversed)."""
    for j in range(len(order)):
        e = order[j]
        g = group[j]
        a, b = eu[e], ev[e]
        flip = a != ea[g]
        kbo = k_old[b]
        for sa in range(k_old[a]):
            ra = pos[off_old[a] + sa]
            if ra < 0:
                continue
            for sb in range(kbo):
                rb = pos[off_old[b] + sb]
                if rb < 0:
                    continue
                v = min(float(ecost_old[eoff_old[e] + sa * kbo + sb]), inf)
                if flip:
                    out[eoff[g] + rb * k[a] + ra] += v
                else:
                    out[eoff[g] + ra * k[b] + rb] += v


def reduce_instance(inst: Instance) -> Reduced:
    """Apply the exact reductions of the module docstring and the follower merges of ``merge``."""
    alive = _prune(inst.k, inst.off, inst.cost, inst.eu, inst.ev, inst.eoff, inst.ecost, BIG)
    node_of = np.repeat(np.arange(inst.n), inst.k)
    k = np.bincount(node_of[alive], minlength=inst.n).astype(np.int64)
    off = np.zeros(inst.n + 1, np.int64)
    np.cumsum(k, out=off[1:])
    orig = (np.arange(len(alive)) - inst.off[node_of])[alive].astype(np.int64)
    pos = np.full(len(alive), -1, np.int64)
    pos[alive] = np.arange(int(alive.sum())) - off[node_of[alive]]
    cost = np.minimum(inst.cost[alive].astype(np.float64), INF)
    usage = inst.usage[alive]
    m = inst.m
    order = np.arange(m, dtype=np.int64)
    eoff_all = np.zeros(m + 1, np.int64)
    np.cumsum(k[inst.eu] * k[inst.ev], out=eoff_all[1:])
    flat = np.zeros(int(eoff_all[-1]), np.float64)
    _gather(
        inst.k,
        inst.off,
        pos,
        k,
        inst.eu,
        inst.ev,
        inst.eoff,
        inst.ecost,
        order,
        inst.eu,
        inst.ev,
        order,
        eoff_all,
        flat,
        INF,
    )
    tabs = [flat[eoff_all[e] : eoff_all[e + 1]].reshape(k[inst.eu[e]], k[inst.ev[e]]) for e in range(m)]
    rep, fmap, members = follower_groups(k, inst.eu, inst.ev, tabs)
    reps = np.flatnonzero(rep == np.arange(inst.n))
    gid = np.full(inst.n, -1, np.int64)
    gid[reps] = np.arange(len(reps))

    def sel(w: int) -> np.ndarray:
        f = fmap[w]
        return np.arange(k[w]) if f is None else f

    # group unary costs (members + edges inside the group), then drop infinite group strategies
    maps = {w: sel(w) for w in range(inst.n)}
    unary = [np.zeros(k[r]) for r in reps]
    for r in reps:
        u = unary[gid[r]]
        for w in members[r]:
            u += cost[off[w] + maps[w]]
    inside = rep[inst.eu] == rep[inst.ev]
    for e in np.flatnonzero(inside):
        a, b = inst.eu[e], inst.ev[e]
        unary[gid[rep[a]]] += tabs[e][maps[a], maps[b]]
    keep = []
    for g, u in enumerate(unary):
        ok = u < FINITE
        keep.append(np.flatnonzero(ok) if ok.any() else np.arange(len(u)))
        unary[g] = u[keep[g]]
    for w in range(inst.n):
        maps[w] = maps[w][keep[gid[rep[w]]]]
    kg = np.array([len(u) for u in unary], np.int64)
    goff = np.zeros(len(kg) + 1, np.int64)
    np.cumsum(kg, out=goff[1:])
    # edges between groups: folded into unary when one side is fixed, parallel ones summed
    pair: dict[tuple[int, int], np.ndarray] = {}
    for e in np.flatnonzero(~inside):
        a, b = inst.eu[e], inst.ev[e]
        ga, gb = int(gid[rep[a]]), int(gid[rep[b]])
        t = tabs[e][maps[a][:, None], maps[b]]
        if kg[gb] == 1:
            unary[ga] += t[:, 0]
        elif kg[ga] == 1:
            unary[gb] += t[0]
        elif ga < gb:
            pair[(ga, gb)] = pair[(ga, gb)] + t if (ga, gb) in pair else t
        else:
            pair[(gb, ga)] = pair[(gb, ga)] + t.T if (gb, ga) in pair else t.T.copy()
    keys = sorted(pair)
    ea = np.array([a for a, _ in keys], np.int64)
    eb = np.array([b for _, b in keys], np.int64)
    eoff = np.zeros(len(keys) + 1, np.int64)
    np.cumsum(kg[ea] * kg[eb], out=eoff[1:])
    ecost = np.concatenate([pair[key].ravel() for key in keys]) if keys else np.zeros(0)
    # memory: each group's members as non-overlapping segments
    seg_lists = []
    for g, r in enumerate(reps):
        mem = np.asarray(members[r], np.int64)
        use = np.stack([usage[off[w] + maps[w]] for w in mem]) if len(mem) else np.zeros((0, kg[g]), np.int64)
        seg_lists.append(segments(inst.lo[mem], inst.hi[mem], use))
    segptr = np.zeros(len(reps) + 1, np.int64)
    np.cumsum([len(sl[0]) for sl in seg_lists], out=segptr[1:])
    seglo = np.concatenate([sl[0] for sl in seg_lists]).astype(np.int64)
    seghi = np.concatenate([sl[1] for sl in seg_lists]).astype(np.int64)
    seglen = np.repeat(kg, np.diff(segptr))
    segoff = np.zeros(len(seglo) + 1, np.int64)
    np.cumsum(seglen, out=segoff[1:])
    segu = np.concatenate([sl[2].ravel() for sl in seg_lists]).astype(np.int64)
    wk = kg[gid[rep]]
    wmap_off = np.zeros(inst.n + 1, np.int64)
    np.cumsum(wk, out=wmap_off[1:])
    wmap = np.concatenate([orig[off[w] + maps[w]] for w in range(inst.n)]) if inst.n else np.zeros(0, np.int64)
    limit = inst.usage_limit if inst.usage_limit is not None else int(np.iinfo(np.int64).max // 4)
    horizon = int(inst.hi.max()) if inst.n else 0
    stats = {
        "strategies_removed": int((~alive).sum()),
        "groups": len(reps),
        "edges": len(keys),
        "free_groups": int((kg > 1).sum()),
    }
    return Reduced(
        np.asarray(kg),
        goff,
        np.concatenate(unary) if unary else np.zeros(0),
        segptr,
        seglo,
        seghi,
        segoff,
        segu,
        ea,
        eb,
        eoff,
        ecost.astype(np.float64),
        limit,
        horizon,
        gid[rep],
        wmap_off,
        wmap.astype(np.int64),
        stats,
    )
