"""Hugging Face model families the adapter is tested on, built from their config classes
(random weights, nothing downloaded), and the Llama-3-8B configuration for whole-model planning.

``get(name)`` returns a ``Family``: a tiny model in eval mode, its inputs, and the output field
to compare with eager (besides the six families: grouped-query attention at head dims 128 and 256,
Mistral's sliding window, a Mixtral mixture of experts). ``decode_step(batch)`` is one decode step of
a tiny Llama over a static cache. ``llama(layers, device="meta")`` builds a Llama-3-8B-shaped
``LlamaForCausalLM`` whose parameters live on ``device`` (``meta``: no storage at all).
Needs ``transformers``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

NAMES = ("gpt2", "bert", "qwen2", "mistral", "t5", "vit", "gqa128", "gqa256", "swa", "moe")
VOCAB = 128
# Llama-3-8B (public configuration); num_hidden_layers is given per call.
LLAMA_3_8B = {
    "vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_attention_heads": 32,
    "num_key_value_heads": 8, "max_position_embeddings": 8192, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
}  # fmt: skip


@dataclass
class Family:
    name: str
    model: torch.nn.Module
    kwargs: dict[str, Any] = field(default_factory=dict)  # the forward's inputs
    output: str = "logits"  # the output field compared with eager


def get(name: str, batch: int = 2, seq: int = 16, seed: int = 0) -> Family:
    """A tiny model of family ``name`` (2 layers; attention heads of 16 or 32) with its inputs."""
    import transformers as tf

    torch.manual_seed(seed)
    ids = torch.randint(0, VOCAB, (batch, seq))
    decoder = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
    decoder |= {"intermediate_size": 128, "vocab_size": VOCAB, "max_position_embeddings": 64}
    if name == "gpt2":
        cfg = tf.GPT2Config(
            n_layer=2, n_embd=64, n_head=4, vocab_size=VOCAB, n_positions=64, bos_token_id=0, eos_token_id=0
        )
        fam = Family(name, tf.GPT2LMHeadModel(cfg), {"input_ids": ids})
    elif name == "bert":  # head dim 32: attention scale 1/sqrt(32) = 0.1768
        cfg = tf.BertConfig(
            hidden_size=128, num_hidden_layers=2, num_attention_heads=4, intermediate_size=256,
            vocab_size=VOCAB, max_position_embeddings=64,
        )  # fmt: skip
        fam = Family(name, tf.BertModel(cfg), {"input_ids": ids}, "last_hidden_state")
    elif name == "qwen2":
        fam = Family(name, tf.Qwen2ForCausalLM(tf.Qwen2Config(**decoder)), {"input_ids": ids})
    elif name == "mistral":
        fam = Family(name, tf.MistralForCausalLM(tf.MistralConfig(**decoder)), {"input_ids": ids})
    elif name in ("gqa128", "gqa256"):  # grouped-query attention at a real head dim: 2 query heads per kv head
        d = int(name[3:])
        cfg = tf.LlamaConfig(**(decoder | {"hidden_size": 256, "num_attention_heads": 2, "num_key_value_heads": 1,
                                           "head_dim": d}))  # fmt: skip
        fam = Family(name, tf.LlamaForCausalLM(cfg), {"input_ids": ids})
    elif name == "swa":  # sliding-window attention: a window of 8 over 16 tokens, an explicit mask
        fam = Family(name, tf.MistralForCausalLM(tf.MistralConfig(**decoder, sliding_window=8)), {"input_ids": ids})
    elif name == "moe":  # a mixture of experts: a router choosing 2 of 4 experts per token
        cfg = tf.MixtralConfig(**decoder, num_local_experts=4, num_experts_per_tok=2)
        fam = Family(name, tf.MixtralForCausalLM(cfg), {"input_ids": ids})
    elif name == "t5":
        cfg = tf.T5Config(d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4, vocab_size=VOCAB)
        fam = Family(
            name, tf.T5ForConditionalGeneration(cfg), {"input_ids": ids, "decoder_input_ids": ids[:, : seq // 2]}
        )
    elif name == "vit":  # 4x4 patches of 8x8 pixels; head dim 32
        cfg = tf.ViTConfig(
            image_size=32, patch_size=8, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=256,
        )  # fmt: skip
        fam = Family(name, tf.ViTModel(cfg), {"pixel_values": torch.randn(batch, 3, 32, 32)}, "last_hidden_state")
    else:
        raise ValueError(f"unknown family {name!r}; known: {list(NAMES)}")
    fam.model.eval()
    return fam


def decode_step(batch: int = 4, context: int = 32, seed: int = 0) -> tuple[torch.nn.Module, Callable[[], dict]]:
    """A tiny Llama and a maker of one decode step's inputs: ``batch`` new tokens, one per sequence, at the
    last of ``context`` positions of a fresh static key/value cache (each call: its own cache)."""
    import transformers as tf

    torch.manual_seed(seed)
    model = tf.LlamaForCausalLM(tf.LlamaConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                               num_key_value_heads=2, intermediate_size=128, vocab_size=VOCAB,
                                               max_position_embeddings=64)).eval()  # fmt: skip
    ids = torch.randint(0, VOCAB, (batch, 1))

    def inputs() -> dict:
        cache = static_cache(model, batch, context, torch.device("cpu"))
        return {"input_ids": ids, "past_key_values": cache, "use_cache": True,
                "cache_position": torch.tensor([context - 1])}  # fmt: skip

    return model, inputs


def static_cache(model: torch.nn.Module, batch: int, context: int, device: torch.device):
    """A static key/value cache of ``context`` positions, allocated before the step is compiled.

    Transformers allocates a ``StaticCache`` lazily, on its first update: left so, the first compiled
    step would create the whole cache (a fill of every position, twice per layer) inside the graph,
    which is no decode step. A decode step reads a cache that exists."""
    import transformers as tf

    cfg = model.config
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    cache = tf.StaticCache(config=cfg, max_cache_len=context)
    dtype = next(model.parameters()).dtype
    cache.early_initialization(batch, cfg.num_key_value_heads, head_dim, dtype, device)
    return cache


def llama(layers: int = 32, device: str = "meta", dtype: torch.dtype = torch.bfloat16, **overrides) -> torch.nn.Module:
    """A ``LlamaForCausalLM`` with the Llama-3-8B configuration and ``layers`` layers, built on ``device``."""
    import transformers as tf

    cfg = tf.LlamaConfig(**(LLAMA_3_8B | {"num_hidden_layers": layers} | overrides))
    with torch.device(device):
        model = tf.LlamaForCausalLM(cfg).to(dtype)
    return model.eval()
