"""A process-wide, bounded memo of what the Problem build derives from name-free keys.

Why: planning a whole model builds several Problems over the same ops (each
distinct segment, the stitched whole graph, the plan check, the cut windows),
and each used to enumerate the same layouts and compute the same layout and
edge quantities again: most of a whole-model solve. Every value kept here is a
pure function of its key (an op's ``candidates.op_signature``, the hardware and
the coefficients; a layout's content; a list of layouts), so a hit returns what
a rebuild would compute, bit for bit; arrays are returned read-only.

Layouts are frozen dataclasses holding dicts, so they are not hashable: each
layout the memo builds gets a *token* (a small integer, never reused), and a
list of layouts is keyed by its tokens. A layout built elsewhere (say a
``dataclasses.replace`` of one) has no token, and whatever reads it is simply
computed, not memoised.

Bounded: at most ``OP_ENTRIES`` op keys (least recently used first out, with
their layouts' tokens) and ``DERIVED_BYTES`` of derived arrays.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import fields, is_dataclass
from typing import Any

import numpy as np

OP_ENTRIES = 256  # op keys (signature, hardware, coefficients) kept; a Llama layer has about 30
DERIVED_BYTES = 256 << 20  # array bytes of layout and edge quantities kept

_lock = threading.RLock()
_tokens: dict[int, tuple[Any, int]] = {}  # id(layout) -> (the layout, kept alive so the id stays its own; token)
_next_token = itertools.count(1)
stats = {"op_hits": 0, "op_misses": 0, "derived_hits": 0, "derived_misses": 0}
_enabled = True  # ``disabled()``: every op gets its own entry and nothing derived is kept (the reference build)


class OpMemo:
    """What one op key derives: its layouts by content, its enumerations, its read sizes, its tiled layouts."""

    __slots__ = ("derived", "enumerated", "ids", "layouts", "sizes")

    def __init__(self) -> None:
        self.layouts: dict[Hashable, Any] = {}  # (factors, chunks, stick) -> Layout | None
        self.enumerated: dict[int, tuple] = {}  # max_layouts -> the enumeration's layouts
        self.sizes: dict[Hashable, tuple[int, int, int]] = {}  # ``OpCandidates._sizes``
        self.derived: dict[Hashable, Any] = {}  # tiled layouts and tiled extensions of a layout list
        self.ids: list[int] = []  # ids of the layouts registered by this entry (dropped with it)

    def layout(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The layout of ``key`` (built once and given a token; None when illegal)."""
        if key not in self.layouts:
            self.layouts[key] = self.register(build())
        return self.layouts[key]

    def register(self, lay: Any) -> Any:
        """Give a layout built for this entry a token (None passes through)."""
        if lay is not None and _enabled:
            with _lock:
                _tokens[id(lay)] = (lay, next(_next_token))
                self.ids.append(id(lay))
        return lay


_ops: OrderedDict[Hashable, OpMemo] = OrderedDict()
_derived: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
_derived_bytes = 0


def op_memo(key: Hashable) -> OpMemo:
    """The entry of an op key, created on first use; the least recently used beyond ``OP_ENTRIES`` go."""
    if not _enabled:
        return OpMemo()
    with _lock:
        entry = _ops.get(key)
        if entry is not None:
            _ops.move_to_end(key)
            stats["op_hits"] += 1
            return entry
        stats["op_misses"] += 1
        entry = _ops[key] = OpMemo()
        while len(_ops) > OP_ENTRIES:
            _, old = _ops.popitem(last=False)
            for x in old.ids:
                _tokens.pop(x, None)
        return entry


def token(lay: Any) -> int | None:
    """The token of a layout the memo built, None for any other."""
    held = _tokens.get(id(lay))
    return held[1] if held is not None and held[0] is lay else None


def tokens(layouts: list) -> tuple[int, ...] | None:
    """A key for a list of layouts: their tokens, or None when one has none."""
    out = []
    for lay in layouts:
        t = token(lay)
        if t is None:
            return None
        out.append(t)
    return tuple(out)


def derived(key: Hashable | None, build: Callable[[], Any]) -> Any:
    """``build()``, memoised under ``key`` (None: not memoisable, built every time); arrays come back
    read-only, so no caller can change what another will read."""
    global _derived_bytes
    if key is None or not _enabled:
        return build()
    with _lock:
        held = _derived.get(key)
        if held is not None:
            _derived.move_to_end(key)
            stats["derived_hits"] += 1
            return held[0]
    value = build()
    size = _freeze(value)
    with _lock:
        stats["derived_misses"] += 1
        if key not in _derived:
            _derived[key] = (value, size)
            _derived_bytes += size
        while _derived_bytes > DERIVED_BYTES and len(_derived) > 1:
            _, (_, gone) = _derived.popitem(last=False)
            _derived_bytes -= gone
        return _derived[key][0] if key in _derived else value


def _freeze(value: Any) -> int:
    """Make the arrays of a dataclass read-only; their bytes."""
    arrays = [getattr(value, f.name) for f in fields(value)] if is_dataclass(value) else [value]
    size = 0
    for a in arrays:
        if isinstance(a, np.ndarray):
            a.setflags(write=False)
            size += a.nbytes
    return size


@contextmanager
def disabled() -> Iterator[None]:
    """Build without the memo inside the block (what it saves, and the reference its hits must equal)."""
    global _enabled
    was, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = was


def clear() -> None:
    """Forget everything (tests; or to return the memory)."""
    global _derived_bytes
    with _lock:
        _ops.clear()
        _tokens.clear()
        _derived.clear()
        _derived_bytes = 0
        for k in stats:
            stats[k] = 0
