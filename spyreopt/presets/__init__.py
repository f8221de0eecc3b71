"""Whole models: a Llama-family decoder builder and presets of public configurations.

``so.presets.get("llama-3-8b", seq=1024)`` builds a preset's graph; ``so.presets.names()`` lists them;
``so.presets.decoder(...)`` builds any Llama-family decoder.
"""

from spyreopt.presets.catalog import PRESETS, get, names
from spyreopt.presets.decoder import decoder

__all__ = ["PRESETS", "decoder", "get", "names"]
