"""The machine description, where users look for it: ``HardwareSpec`` lives in ``model.hardware``
(the planner, the cost model and the simulator all read it, so it sits in the lowest layer)."""

from spyreopt.model.hardware import PRESETS, GiB, HardwareSpec, MiB, preset

__all__ = ["PRESETS", "GiB", "HardwareSpec", "MiB", "preset"]
