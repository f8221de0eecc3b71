"""Presets: the shapes of public decoder configurations (their ``config.json``), for ``decoder``.

Only shapes matter to the planner, so a preset is the handful of numbers that
set them. Granite also scales each residual branch (``residual_multiplier``) and
the logits; those scalars are one pointwise multiply each and are left out, as
is Mistral's sliding window (4,096, not reached by the default lengths).
"""

from __future__ import annotations

from dataclasses import dataclass

from spyreopt.errors import GraphError
from spyreopt.model.graph import Graph
from spyreopt.presets.decoder import decoder


@dataclass(frozen=True)
class Preset:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    source: str  # where the numbers come from
    prefill_seq: int = 2048  # default prompt length of a prefill
    context: int = 4096  # default cached positions of a decode step


PRESETS: dict[str, Preset] = {
    "llama-3-8b": Preset(32, 4096, 32, 8, 14336, 128256, "meta-llama/Meta-Llama-3-8B config.json"),
    "granite-3.3-8b": Preset(40, 4096, 32, 8, 12800, 49159, "ibm-granite/granite-3.3-8b-instruct config.json"),
    "mistral-7b": Preset(32, 4096, 32, 8, 14336, 32000, "mistralai/Mistral-7B-v0.1 config.json"),
    "tiny": Preset(2, 256, 8, 2, 512, 1024, "a small Llama-shaped decoder for tests", prefill_seq=64, context=128),
}


def names() -> list[str]:
    """The preset names."""
    return list(PRESETS)


def get(
    name: str,
    phase: str = "prefill",
    seq: int | None = None,
    context: int | None = None,
    layers: int | None = None,
    dtype: str = "fp16",
) -> Graph:
    """The decoder of a preset: prefill over ``seq`` tokens (default 2,048; tiny: 64), or a decode step of
    ``seq`` tokens (default 1) over ``context`` positions (default 4,096; tiny: 128); ``layers`` overrides the depth."""
    if name not in PRESETS:
        raise GraphError(f"unknown model preset {name!r}; known: {', '.join(PRESETS)}")
    p = PRESETS[name]
    if seq is None:
        seq = p.prefill_seq if phase == "prefill" else 1
    if phase == "decode" and context is None:
        context = p.context
    shape = {k: getattr(p, k) for k in ("hidden", "heads", "kv_heads", "intermediate", "vocab")}
    shape["layers"] = p.layers if layers is None else layers
    label = f"{name}_{phase}_{shape['layers']}l_s{seq}" + (f"_c{context}" if phase == "decode" else "")
    return decoder(seq=seq, phase=phase, context=context, dtype=dtype, name=label, **shape)
