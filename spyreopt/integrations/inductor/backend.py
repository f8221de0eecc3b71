"""The ``spyreopt`` torch.compile backend: Inductor with the co-optimiser's capture point.

``torch.compile(model, backend="spyreopt", options={"backend": "cpsat", "time_limit": 10,
"mode": "analysis"})``. Options are ``records.Options``. Every graph Inductor compiles for
this model (forward, and backward when it is compiled lazily on the first ``backward()``)
is captured once lowering is complete, translated and planned; ``plans()`` returns them.

Full mode runs Inductor to the end. Analysis mode stops after the capture and runs each
graph (the post-autograd FX graph Inductor was given) eagerly, so a compile costs the
lowering and the solve only; if Inductor itself fails before the capture point, the
graph runs eagerly too and the failure is recorded.

A model on the ``meta`` device (weights without storage) is planned in analysis mode too:
Inductor would otherwise drop every computation whose result is a meta tensor, so the graph is
lowered as a CPU graph over fake tensors (shapes, strides and dtypes only; nothing is allocated)
and the original graph runs eagerly on ``meta``.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import torch
from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend
from torch._functorch.aot_autograd import make_boxed_func
from torch._inductor.compile_fx import compile_fx, compile_fx_inner
from torch._subclasses.fake_tensor import FakeTensorMode

from spyreopt.integrations.inductor.hook import AnalysisOnly, Session, active, graph_kind
from spyreopt.integrations.inductor.records import CapturedGraph, Options

NAME = "spyreopt"


def spyreopt_backend(
    gm: torch.fx.GraphModule, example_inputs: list, options: dict | None = None, mode: str | None = None
):
    """torch.compile backend: Inductor's ``compile_fx`` with a capturing inner compiler."""
    if mode not in (None, "default"):
        raise ValueError(f"backend {NAME!r} takes no torch.compile mode (got {mode!r}); pass options instead")
    session = Session(Options.from_dict(options))
    inner = functools.partial(_inner_compile, session=session)
    if session.options.mode == "analysis" and any(_on_meta(x) for x in example_inputs):
        return _plan_meta(gm, example_inputs, session, inner)
    with active(session):
        return compile_fx(gm, example_inputs, inner_compile=inner)


def _on_meta(x: Any) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == "meta"


def _plan_meta(gm: torch.fx.GraphModule, example_inputs: list, session: Session, inner):
    """Capture a ``meta``-device graph as a CPU graph over fake tensors; run it eagerly on ``meta``."""
    fake_mode = torch._guards.detect_fake_mode(example_inputs) or FakeTensorMode()
    with fake_mode:
        inputs = [
            torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device="cpu") if _on_meta(x) else x
            for x in example_inputs
        ]
    # Inductor is not told which inputs are parameters here: the inference graph keeps Dynamo's input order
    session.static_inputs = tuple(i for i, x in enumerate(example_inputs) if isinstance(x, torch.nn.Parameter))
    graph = _copy_graph(gm)
    for node in graph.nodes:
        node.args, node.kwargs = (torch.fx.node.map_aggregate(a, _meta_to_cpu) for a in (node.args, node.kwargs))
    start = time.perf_counter()
    try:
        with active(session):
            compile_fx(torch.fx.GraphModule(gm, graph), inputs, inner_compile=inner)
    except Exception as exc:  # noqa: BLE001 - analysis mode always runs the graph eagerly
        record = CapturedGraph("-:meta:failed", "inference", session.options)
        record.error = f"capture of the meta-device graph failed: {type(exc).__name__}: {exc}"
        record.capture_seconds = time.perf_counter() - start
        session.report(record)
    return gm.forward


def _meta_to_cpu(a: Any) -> Any:
    return torch.device("cpu") if isinstance(a, torch.device) and a.type == "meta" else a


def _inner_compile(gm: torch.fx.GraphModule, example_inputs: list, *, session: Session, **kwargs: Any):
    """Compile one graph with the session active (the backward graph comes here later, on its own)."""
    if kwargs.get("is_backward"):  # its fixed inputs are saved activations as well as parameters
        session.static_inputs = ()
    elif kwargs.get("static_input_idxs"):  # the parameters (and buffers), when Inductor was told which they are
        session.static_inputs = tuple(kwargs["static_input_idxs"])
    with active(session):
        if session.options.mode == "full":
            return compile_fx_inner(gm, example_inputs, **kwargs)
        eager = torch.fx.GraphModule(gm, _copy_graph(gm))
        start = time.perf_counter()
        try:
            return compile_fx_inner(gm, example_inputs, **kwargs)
        except Exception as exc:  # noqa: BLE001 - analysis mode always runs the graph eagerly
            if not _is_analysis_stop(exc):
                kind = graph_kind(kwargs.get("is_backward", False), kwargs.get("is_inference", False))
                record = CapturedGraph(f"-:{kind}:failed", kind, session.options)
                record.error = f"Inductor failed before the capture point: {type(exc).__name__}: {exc}"
                record.capture_seconds = time.perf_counter() - start
                session.report(record)
        return make_boxed_func(eager.forward)


def _copy_graph(gm: torch.fx.GraphModule) -> torch.fx.Graph:
    """Inductor's post-grad passes rewrite ``gm.graph`` in place; the eager run needs the original."""
    graph = torch.fx.Graph()
    out = graph.graph_copy(gm.graph, {})
    graph.output(out)
    return graph


def _is_analysis_stop(exc: BaseException | None) -> bool:
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, AnalysisOnly):
            return True
        seen.add(id(exc))
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return False


def register() -> None:
    """Register the backend under ``"spyreopt"`` (idempotent)."""
    if NAME not in _COMPILER_FNS:
        register_backend(spyreopt_backend, name=NAME)
