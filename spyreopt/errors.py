"""Typed errors: every message names the op, tensor or field and what is wrong."""


class SpyreoptError(Exception):
    """Base of every error spyreopt raises on purpose."""


class GraphError(SpyreoptError, ValueError):
    """A malformed graph: names the op and the reason."""


class PlanError(SpyreoptError, ValueError):
    """An illegal plan: names the constraint, op, buffer and numbers."""


class SolverError(SpyreoptError, RuntimeError):
    """A backend is unknown, unavailable, or failed."""


class InfeasibleError(SpyreoptError, RuntimeError):
    """No plan exists; the message is a diagnosis (time step, buffers, bytes over, minimum capacity)."""

    def __init__(self, message: str, diagnosis: dict | None = None):
        super().__init__(message)
        self.diagnosis = diagnosis or {}


class FormatError(SpyreoptError, ValueError):
    """Malformed input file (graph, plan, IOPDDL, CSV JSON): names the field."""
