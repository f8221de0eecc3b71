"""Follower merges: when an edge leaves exactly one finite partner per strategy, one node follows the other.

If every strategy of ``u`` has exactly one finite-cost strategy of ``v`` on an
edge, any finite solution sets ``v`` by a function of ``u``; ``v`` (and every
node already following it) is merged into ``u`` through that function. Merged
nodes keep their own live interval: a group's memory becomes a list of
non-overlapping time segments, each with a usage per group strategy. Most
edges of the production instances are of this kind (a layout must match its
producer), so the search sees far fewer nodes and no forbidden pairs.
"""

from __future__ import annotations

import numpy as np

FINITE = 1e14  # an entry below this is a real cost (infinite entries are capped at reduce.INF = 1e15)


def follower_groups(k: np.ndarray, eu: np.ndarray, ev: np.ndarray, tables: list[np.ndarray]):
    """Group every node under a representative: ``(rep, fmap, members)``.

    ``fmap[w]`` maps the representative's strategies to w's (None: identity).
    Internally a union-find whose links carry the map from parent to child
    strategies, composed on path compression, so chains of merges stay linear.
    """
    n = len(k)
    par = np.arange(n)
    link: list[np.ndarray | None] = [None] * n

    def find(w: int) -> int:
        path = []
        while par[w] != w:
            path.append(w)
            w = int(par[w])
        root = w
        for v in reversed(path):  # nearest the root first: its link is already relative to the root
            p = int(par[v])
            if p != root:
                link[v] = link[v][link[p]] if link[p] is not None else link[v]
                par[v] = root
        return root

    def view(w: int) -> np.ndarray | None:
        find(w)
        return link[w]

    todo = np.flatnonzero((eu != ev) & (k[eu] > 1) & (k[ev] > 1))
    while len(todo):
        touched = []
        for e in todo:
            a, b = int(eu[e]), int(ev[e])
            ra, rb = find(a), find(b)
            if ra == rb:
                continue
            t = tables[e]
            fa, fb = view(a), view(b)
            if fa is not None:
                t = t[fa]
            if fb is not None:
                t = t[:, fb]
            fin = t < FINITE
            if (fin.sum(1) == 1).all():
                lead, follow, g = ra, rb, fin.argmax(1)
            elif (fin.sum(0) == 1).all():
                lead, follow, g = rb, ra, fin.argmax(0)
            else:
                continue
            par[follow] = lead
            link[follow] = g
            touched.append(lead)
        if not touched:
            break
        roots = np.array([find(w) for w in range(n)])
        mark = np.zeros(n, bool)
        mark[roots[touched]] = True
        todo = todo[mark[roots[eu[todo]]] | mark[roots[ev[todo]]]]
        todo = todo[roots[eu[todo]] != roots[ev[todo]]]
    rep = np.array([find(w) for w in range(n)])
    members: list[list[int]] = [[] for _ in range(n)]
    for w in range(n):
        members[rep[w]].append(w)
    return rep, link, members


def segments(lo: np.ndarray, hi: np.ndarray, use: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Non-overlapping ``(lo, hi, usage rows)`` whose sum equals the members' usage (rows: one per segment).

    ``use`` is [members, strategies]; zero segments are dropped and equal neighbours joined.
    """
    if len(lo) == 1:  # the common case: a node alone
        keep = lo[0] < hi[0] and use[0].any()
        return (lo, hi, use) if keep else (lo[:0], hi[:0], use[:0])
    live = (lo < hi) & use.any(axis=1)
    lo, hi, use = lo[live], hi[live], use[live]
    if len(lo) <= 1:
        return lo, hi, use
    cuts = np.unique(np.concatenate([lo, hi]))
    d = np.zeros((len(cuts), use.shape[1]), np.int64)
    np.add.at(d, np.searchsorted(cuts, lo), use)
    np.add.at(d, np.searchsorted(cuts, hi), -use)
    rows = np.cumsum(d, axis=0)[:-1]
    starts, ends = cuts[:-1], cuts[1:]
    new = np.ones(len(rows), bool)  # a row starts a segment unless it continues an equal previous row
    new[1:] = (starts[1:] != ends[:-1]) | (rows[1:] != rows[:-1]).any(axis=1)
    nz = rows.any(axis=1)
    new &= nz
    first = np.flatnonzero(new)
    seg_id = np.cumsum(new) - 1
    last_end = np.zeros(len(first), np.int64)
    np.maximum.at(last_end, seg_id[nz], ends[nz])
    return starts[first], last_end, rows[first]
