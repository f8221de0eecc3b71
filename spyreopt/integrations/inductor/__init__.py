"""PyTorch Inductor adapter: plan every graph Inductor lowers, at the point the Spyre compiler
runs its co-optimiser (after lowering, before scheduling).

Two ways in:

* ``torch.compile(model, backend="spyreopt", options={"mode": "analysis"})`` (``backend``: any
  backend of ``so.solve``, ``"auto"`` by default; ``time_limit`` 30 s) -- Inductor with the
  capture point; ``mode="analysis"`` plans without generating code and runs the program eagerly;
* ``with capture(backend="greedy") as graphs: torch.compile(model)(x)`` -- capture the compiles
  of the plain Inductor backend inside the block (``install()`` / ``uninstall()`` are the
  underlying hook switch).

A model whose parameters are on the ``meta`` device is planned in analysis mode without
allocating its weights (``families.llama(32)`` is Llama-3-8B that way).

``plans()`` returns a ``CapturedGraph`` per graph: the spyreopt ``Graph``, the ``Plan``, the
mapping from plan ops to Inductor buffers, op counts by kind, opaque ops with their reasons,
solve time, and the hook failure (with its reason) if there was one; each op's module path and
source op (``origin``, ``label``, ``rollup``, ``table``). ``decisions(captured)`` gives per Inductor
buffer what the plan decided, ``pins`` feeds it back to ``so.solve``, and full mode attaches it to the
``GraphLowering`` before scheduling (``attached(V.graph)``). docs/inductor.md has the whole story. This package imports
torch; the rest of spyreopt does not.
"""

from spyreopt.integrations.inductor.backend import NAME, register, spyreopt_backend
from spyreopt.integrations.inductor.decisions import BufferDecision, attached, decisions, pins
from spyreopt.integrations.inductor.hook import capture, install, installed, uninstall
from spyreopt.integrations.inductor.records import CapturedGraph, Options, clear, plans
from spyreopt.integrations.inductor.translate import MatmulInfo, Translation

register()

__all__ = [
    "NAME", "BufferDecision", "CapturedGraph", "MatmulInfo", "Options", "Translation", "attached", "capture", "clear",
    "decisions", "install", "installed", "pins", "plans", "register", "spyreopt_backend", "uninstall",
]  # fmt: skip
