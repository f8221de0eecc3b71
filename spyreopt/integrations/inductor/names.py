"""Names from the model: the module path and source op of each Inductor buffer.

Inductor keeps, on every IR node, its *origins*: the FX nodes it was lowered from, each with
the module stack Dynamo recorded (``node.meta["nn_module_stack"]``: path -> (qualified path,
module type)). A buffer's module is that of its ``origin_node`` (the FX node whose value it
holds, when Inductor names one), else the deepest module among its origins (a fused kernel
spans the modules it fused: the innermost one is what it computes; views and casts count only
when the kernel has nothing else). Its source op is the
origin node's ATen target, else the first non-view target of an origin in that module.
An op of the model's own ``forward`` has the module path "" (shown as "(model)"). Buffers lowered
from no module at all (a plain function) get ``None``; they are counted and listed.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# ATen ops that only move or retype data: never the op a fused kernel is named after
_PLUMBING = {"view", "reshape", "permute", "expand", "slice", "unsqueeze", "squeeze", "convert_element_type",
             "clone", "transpose", "t", "select", "_to_copy", "alias", "getitem", "cat", "_unsafe_view"}  # fmt: skip
_ROOT = re.compile(r"^(L|G)\['[^']*'\](\[\d+\])*\.?")  # Dynamo's source prefix: L['self'], L['args'][0]
_INDEX = re.compile(r"\[(\d+)\]")


@dataclass(frozen=True)
class Origin:
    """Where an Inductor buffer comes from in the user's model."""

    module: str | None  # e.g. "model.layers.0.self_attn.q_proj"; "" the model's own forward; None: no module
    source: str | None  # the ATen op, e.g. "aten.mm"


def clean_path(path: str) -> str:
    """Dynamo's ``L['self'].model.layers[0]`` (or ``L['args'][0].model...``) as ``model.layers.0``."""
    return _INDEX.sub(r".\1", _ROOT.sub("", path)).strip(".")


def _module(fx_node, memo: dict | None = None) -> str | None:
    """The innermost module on the node's stack: "" for the model itself, None without a stack.

    ``memo`` (FX node -> path) serves a whole graph: a fused kernel lists every FX node it was
    lowered from, so a graph asks for the same nodes many times (parsing each stack again was
    most of the translation's time on a 32-layer model)."""
    if memo is not None and fx_node in memo:
        return memo[fx_node]
    stack = getattr(fx_node, "meta", {}).get("nn_module_stack") or {}
    paths = [v[0] if isinstance(v, tuple) else v for v in stack.values()]
    paths = [clean_path(p) for p in paths if isinstance(p, str) and p.startswith("L[")]
    found = paths[-1] if paths else None
    if memo is not None:
        memo[fx_node] = found
    return found


def _target(fx_node) -> str:
    target = getattr(fx_node, "target", fx_node)
    try:
        return _target_name(target)
    except TypeError:  # an unhashable target
        return _target_name.__wrapped__(target)


@functools.cache
def _target_name(target) -> str:
    """An FX target's name (``aten.mm``); memoised: targets are ATen's global op objects, and printing
    one is slow enough to matter over the ~30,000 origins of a 32-layer model."""
    name = target if isinstance(target, str) else str(getattr(target, "__name__", None) or target)
    if hasattr(target, "_schema"):  # an OpOverload: aten.mm.default
        name = str(target)
    return name.removesuffix(".default")


def _plumbing(target: str) -> bool:
    parts = target.split(".")
    return (parts[1] if len(parts) > 1 else parts[0]) in _PLUMBING


def _depth(module: str) -> int:
    return module.count(".") + 1 if module else 0


def origin_of(node, memo: dict | None = None) -> Origin:
    """The module and source op of one IR operation or buffer (``Origin(None, None)`` without origins)."""
    primary = getattr(node, "origin_node", None)
    if primary is not None and _module(primary, memo) is not None and not _plumbing(_target(primary)):
        return Origin(_module(primary, memo), _target(primary))
    nodes = sorted(getattr(node, "origins", None) or (), key=lambda n: n.name)
    work = [n for n in nodes if not _plumbing(_target(n))] or nodes  # a view carries its input's module (q_proj's)
    named = [(n, m) for n in work if (m := _module(n, memo)) is not None]
    if not named:
        return Origin(None, _target(work[0]) if work else None)
    deepest = max(_depth(m) for _, m in named)
    n, module = next((n, m) for n, m in named if _depth(m) == deepest)
    return Origin(module, _target(n))


def buffer_origins(lowering) -> dict[str, Origin]:
    """Every buffer of a lowered graph (``GraphLowering`` at codegen entry) -> its origin."""
    out: dict[str, Origin] = {}
    memo: dict = {}
    for op in lowering.operations:
        here = origin_of(op, memo)
        out[op.get_name()] = here
        for buf in op.get_outputs():
            found = origin_of(buf, memo)
            out[buf.get_name()] = found if found.module or found.source else here
    return out


def rollup_key(module: str | None, depth: int | None) -> str:
    """A module path cut to its first ``depth`` components ("model.layers.0" at 3); "-" for none,
    "(model)" for ops of the model's own forward."""
    if module is None:
        return "-"
    if not module:
        return "(model)"
    parts = module.split(".")
    return ".".join(parts if depth is None else parts[:depth])
