"""Whole models: a Llama-family decoder builder and presets of public configurations."""

from spyreopt.models.decoder import decoder
from spyreopt.models.presets import PRESETS, preset, presets

__all__ = ["PRESETS", "decoder", "preset", "presets"]
