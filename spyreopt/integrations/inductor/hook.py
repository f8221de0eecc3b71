"""The capture point: ``GraphLowering.codegen``, entered once lowering is complete and before
the ``Scheduler`` is built (Inductor 2.13). PyTorch has no public hook there, so the method is
wrapped while at least one ``install()`` is outstanding, and restored by the last ``uninstall()``.

The wrapper does nothing unless a ``Session`` is active in the current context; it never lets
an exception of its own escape (one would kill the user's compile): failures are recorded with
their reason. In analysis mode it stops the compile after capturing by raising ``AnalysisOnly``,
which the spyreopt backend turns into an eager run of the graph.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch
from torch._inductor import config as inductor_config
from torch._inductor.graph import GraphLowering

from spyreopt.errors import SolverError
from spyreopt.integrations.inductor.decisions import ATTRIBUTE, decisions
from spyreopt.integrations.inductor.names import buffer_origins
from spyreopt.integrations.inductor.records import CapturedGraph, Options, publish
from spyreopt.integrations.inductor.translate import translate
from spyreopt.solving.entry import solve


class AnalysisOnly(Exception):
    """Raised from the hook in analysis mode to skip code generation (never seen by users)."""


@dataclass
class Session:
    """Options for the graphs compiled while it is active, and where their records go."""

    options: Options
    sink: list[CapturedGraph] | None = None
    static_inputs: tuple[int, ...] = ()  # indices of the graph inputs that are the model's parameters
    _seen: set[int] = field(default_factory=set)

    def capture(self, lowering: GraphLowering) -> CapturedGraph:
        """Translate and plan one lowered graph; never raises (a failure is recorded with its reason)."""
        kind = _kind(lowering)
        record = CapturedGraph(f"{_compile_id()}:{kind}:{next(_counter)}", kind, self.options)
        start = time.perf_counter()
        try:
            names, static = lowering.graph_input_names, self.static_inputs or _static_from_context(kind)
            tr = translate(lowering, record.name, {names[i] for i in static if i < len(names)})
            record.graph, record.op_buffer, record.opaque = tr.graph, tr.op_buffer, tr.opaque
            record.notes, record.matmuls, record.counts = tr.notes, tr.matmuls, tr.counts()
            record.inductor_nodes, record.buffer_tensor = dict(tr.inductor_nodes), tr.buffer_tensor
            record.buffer_strides = tr.buffer_strides
            record.origins = buffer_origins(lowering)
        except Exception as exc:  # noqa: BLE001 - any failure is reported, never raised into the compile
            record.error = f"translation failed: {type(exc).__name__}: {exc} (at {_where(exc)})"
        record.capture_seconds = time.perf_counter() - start
        if record.error is None and self.options.solve:
            if not record.graph.ops:
                record.error = "nothing to plan: the graph has no ops"
            else:
                self._solve(record)
        self.report(record)
        return record

    def report(self, record: CapturedGraph) -> None:
        publish(record)
        if self.sink is not None:
            self.sink.append(record)

    def _solve(self, record: CapturedGraph) -> None:
        o = self.options
        start = time.perf_counter()
        try:
            record.plan = solve(
                record.graph, backend=o.backend, time_limit=o.time_limit, seed=o.seed, hardware=o.hardware,
                forbid=o.forbid,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001
            record.error = f"solve failed: {type(exc).__name__}: {exc}"
        record.solve_seconds = time.perf_counter() - start


_active: contextvars.ContextVar[Session | None] = contextvars.ContextVar("spyreopt_inductor_session", default=None)
_lock = threading.Lock()
_installs = 0
_original: Callable | None = None
_counter = itertools.count()


def _codegen_with_capture(self: GraphLowering, *args, **kwargs):
    session = _active.get()
    if session is not None and id(self) not in session._seen:
        session._seen.add(id(self))
        record = session.capture(self)
        if session.options.mode == "analysis":
            raise AnalysisOnly()
        try:  # where a downstream pass (the scheduler, codegen) reads them: ``V.graph.spyreopt_decisions``
            setattr(self, ATTRIBUTE, decisions(record))
        except Exception as exc:  # noqa: BLE001 - never raised into the compile
            record.error = f"attaching the decisions failed: {type(exc).__name__}: {exc}"
    return _original(self, *args, **kwargs)


def install() -> None:
    """Wrap ``GraphLowering.codegen`` (counted: each ``install`` needs one ``uninstall``)."""
    global _installs, _original
    with _lock:
        if _installs == 0:
            if GraphLowering.codegen is _codegen_with_capture:
                raise RuntimeError("spyreopt inductor hook is already in place without a matching install()")
            _original = GraphLowering.codegen
            GraphLowering.codegen = _codegen_with_capture
        _installs += 1


def uninstall() -> None:
    """Undo one ``install``; the last one restores the original method."""
    global _installs, _original
    with _lock:
        if _installs == 0:
            return
        _installs -= 1
        if _installs == 0:
            if GraphLowering.codegen is not _codegen_with_capture:
                raise RuntimeError(
                    "GraphLowering.codegen was replaced by someone else while the spyreopt hook was installed"
                )
            GraphLowering.codegen = _original
            _original = None


def installed() -> bool:
    return _installs > 0


def capture_settings() -> contextlib.ExitStack:
    """Config that keeps every compile reaching codegen: no FX graph or AOT autograd cache, no freezing."""
    stack = contextlib.ExitStack()
    stack.enter_context(inductor_config.patch(fx_graph_cache=False, fx_graph_remote_cache=False, freezing=False))
    stack.enter_context(torch._functorch.config.patch(enable_autograd_cache=False))
    return stack


@contextlib.contextmanager
def active(session: Session) -> Iterator[Session]:
    """Install the hook and make ``session`` receive the graphs compiled inside this block."""
    install()
    token = _active.set(session)
    try:
        with capture_settings():
            yield session
    finally:
        _active.reset(token)
        uninstall()


@contextlib.contextmanager
def capture(**options) -> Iterator[list[CapturedGraph]]:
    """Capture and plan every Inductor compile in this block, e.g. ``torch.compile(model)``.

    Yields the list that receives this block's records (they are also in ``plans()``).
    Only full mode applies here: the code Inductor generates runs as usual. A backward graph
    is compiled on the first ``backward()``: call it inside the block to capture it.
    """
    opts = Options.from_dict(options)
    if opts.mode != "full":
        raise SolverError("capture(): analysis mode needs the spyreopt torch.compile backend")
    records: list[CapturedGraph] = []
    with active(Session(opts, records)):
        yield records


def _static_from_context(kind: str) -> tuple[int, ...]:
    """The forward graph's parameter inputs as AOT autograd recorded them (the plain Inductor backend)."""
    if kind == "backward":
        return ()
    ctx = torch._guards.TracingContext.try_get()
    meta = getattr(ctx, "fw_metadata", None) if ctx is not None else None
    return tuple(getattr(meta, "static_input_indices", None) or ())


def _kind(lowering: GraphLowering) -> str:
    return graph_kind(getattr(lowering, "is_backward", False), getattr(lowering, "is_inference", False))


def graph_kind(is_backward: bool, is_inference: bool) -> str:
    return "backward" if is_backward else "inference" if is_inference else "forward"


def _compile_id() -> str:
    try:
        compile_id = torch._guards.CompileContext.current_compile_id()
    except Exception:  # noqa: BLE001 - only a label
        compile_id = None
    return "-" if compile_id is None else str(compile_id)


def _where(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    return f"{last.filename.rsplit('/', 1)[-1]}:{last.lineno}" if last else "?"
