"""spyreopt as a drop-in planner for torch-spyre's scratchpad co-optimiser problems.

``solve_graph`` compiles a capture graph into the Formulation (``formats.torch_spyre_model``), solves it
with any backend through the one presolve chain (the capture's own answer, when valid at this capacity,
is the incumbent, so ours is never worse), turns the plan back into torch-spyre's answers and has the
independent judge (``formats.torch_spyre_judge``) check them: an answer the judge rejects is a bug and
raises. ``status`` is "optimal" only when an exact backend proved it, and then over this capture's
division menus, at this capacity, with addresses included (the exact backends place buffers in the
model itself: CP-SAT in a NoOverlap2D, the MILP by proven placement cuts).

The default method (``backend=None``): the best of the checked starts (all off chip, the reference,
anneal's plan), then CP-SAT through the chain; beyond ``EXACT_CANDIDATES`` it only anneals.
``backend="exact"``: CP-SAT, then the MILP, until one proves (``_portfolio``).

``reference_capacity`` is the smallest capacity at which a graph's own answer is valid.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from spyreopt.errors import InfeasibleError, SolverError
from spyreopt.formats.torch_spyre import Answer, CaptureGraph
from spyreopt.formats.torch_spyre_judge import Verdict, judge
from spyreopt.formats.torch_spyre_model import answers as decode
from spyreopt.formats.torch_spyre_model import build, encode, spill_all
from spyreopt.model.formulation import Solution
from spyreopt.solvers.registry import solve_formulation

DEFAULT_BACKEND = "cpsat"
EXACT_PORTFOLIO = ("cpsat", "milp")  # backend "exact": each in turn until one proves
DEFAULT_TIME_LIMIT = 1.0  # seconds per graph
ANNEAL_SHARE = 0.45  # of the default method's time: annealing from scratch before the exact search
EXACT_SHARE = 0.5  # of the time left that the exact search is given (its presolve LP can overrun its share)
EXACT_CANDIDATES = 3000  # beyond this many candidates the default method only anneals (for most of the limit):
LARGE_ANNEAL_SHARE = 0.85  # the chain's LP alone takes ~0.3 s at 4,807 candidates (flash_big) on a loaded 2-core box


@dataclass(frozen=True)
class GraphResult:
    graph: CaptureGraph
    capacity: int
    answers: tuple[Answer, ...]
    verdict: Verdict  # the judge's, on our answers
    status: str  # optimal | feasible | timeout
    bound: int | None  # a proven lower bound on the objective (spill bytes, or the time objective)
    objective: int  # the backend's objective value (spill bytes for "spill")
    seconds: float
    backend: str
    source: str  # where the answer came from: the backend, or the reference when it was not beaten
    over: str  # what "optimal" is a statement about
    notes: tuple[str, ...] = ()  # a stage that failed and what answered instead


def reference_capacity(graph: CaptureGraph) -> int | None:
    """The smallest capacity at which the graph's reference answer is valid (None without one): its height,
    ``max(address + footprint)``; an answer breaking another rule is valid at no capacity (the judge says)."""
    if graph.reference is None:
        return None
    return judge(graph, graph.reference, None).height


def _checked(f, sol: Solution | None) -> Solution | None:
    """``sol`` when it is a valid plan of ``f`` (priced by ``f``), else None."""
    if sol is None or len(sol.assignment) != len(f.nodes) or f.violations(sol.assignment, sol.offsets):
        return None
    return Solution(tuple(sol.assignment), dict(sol.offsets), "feasible", f.evaluate(sol.assignment))


def _portfolio(f, hint: Solution, time_limit: float, seed: int) -> Solution:
    """``backend="exact"``: CP-SAT, then (unless it proved its answer) the MILP from the better plan, each
    with its share of the time left. Neither proves every capture fast: the MILP proves flash_big at the
    planning share in 13 s where CP-SAT does not in 60, CP-SAT proves it at 65,536 bytes in 22 s where the
    MILP does not in 30."""
    start, best, bound = time.perf_counter(), hint, None
    for k, name in enumerate(EXACT_PORTFOLIO):
        left = (time_limit - (time.perf_counter() - start)) / (len(EXACT_PORTFOLIO) - k)
        if left <= 0.05:
            break
        sol = solve_formulation(f, name, time_limit=left, seed=seed, hint=best)
        bound = sol.bound if bound is None or (sol.bound is not None and sol.bound > bound) else bound
        if len(sol.assignment) == len(f.nodes) and sol.objective <= best.objective:
            best = sol
        if bound is not None and bound >= best.objective:
            break
    status = "optimal" if bound is not None and bound >= best.objective else "feasible"
    return Solution(best.assignment, best.offsets, status, best.objective, bound, stats=dict(best.stats))


def _objective(sol: Solution | None) -> float:
    return float("inf") if sol is None else sol.objective


def solve_graph(
    graph: CaptureGraph,
    capacity: int,
    *,
    backend: str | None = None,
    time_limit: float = DEFAULT_TIME_LIMIT,
    seed: int = 0,
    objective: str = "spill",
    use_reference: bool = True,
) -> GraphResult:
    """Plan one graph at ``capacity`` bytes; the answers are judged before they are returned."""
    start = time.perf_counter()
    model = build(graph, capacity, objective)
    f = model.formulation
    starts = {"all off chip": spill_all(model)}  # always valid: nothing resident, so no gate, no address
    notes: list[str] = []
    if use_reference and graph.reference is not None:
        ref = _checked(f, encode(model, graph.reference))
        if ref is not None:
            starts["reference"] = ref
    name = backend or DEFAULT_BACKEND
    large = backend is None and sum(n.num_candidates for n in f.nodes) > EXACT_CANDIDATES
    if backend is None:  # the default method: anneal from scratch, then the exact search from the best start
        share = LARGE_ANNEAL_SHARE if large else ANNEAL_SHARE
        try:
            quick = solve_formulation(f, "anneal", time_limit=share * time_limit, seed=seed, presolve=False)
            starts["anneal"] = _checked(f, quick)
        except (InfeasibleError, SolverError) as exc:  # the other starts stand, and the result says so
            notes.append(f"anneal found no answer ({exc}); the exact search started from the best other start")
    origin, hint = min(((k, s) for k, s in starts.items() if s is not None), key=lambda kv: _objective(kv[1]))
    left = max(time_limit - (time.perf_counter() - start), 0.05)
    if backend is None:
        left *= EXACT_SHARE  # the chain's LP can overrun its share: keep the whole within the limit
    try:
        if large:  # the exact search's presolve alone would overrun the limit: the best start stands
            sol = Solution(hint.assignment, hint.offsets, "feasible", hint.objective, message="anneal only (large)")
        elif backend == "exact":
            sol = _portfolio(f, hint, left, seed)
        else:
            sol = solve_formulation(f, name, time_limit=left, seed=seed, hint=hint)
    except InfeasibleError as exc:  # a heuristic backend gave up: the checked start stands, and says so
        sol = Solution(hint.assignment, hint.offsets, "feasible", hint.objective, message=f"{name}: {exc}")
        notes.append(f"{name} found no answer ({exc}); the start from {origin} answered")
    ours = tuple(decode(model, sol))
    verdict = judge(graph, ours, model.capacity)
    if not verdict.valid:
        raise SolverError(f"{graph.label}: {name}'s answer breaks a rule (a bug): {verdict.message}")
    if objective == "spill" and verdict.spill != sol.objective:
        raise SolverError(
            f"{graph.label}: the judge prices the answer at {verdict.spill}, the model at {sol.objective}"
        )
    source = origin if tuple(sol.assignment) == hint.assignment else name
    over = f"the capture's division menus at {model.capacity} bytes, addresses included"
    status = sol.status if sol.status in ("optimal", "timeout") else "feasible"
    if model.restricted:  # proven only over a model without some shares: not a statement about the capture
        over += f"; optimal only without the in-place shares {', '.join(model.restricted)}"
        status = "feasible" if status == "optimal" else status
    return GraphResult(
        graph,
        model.capacity,
        ours,
        verdict,
        status,
        sol.bound,
        int(sol.objective),
        time.perf_counter() - start,
        name,
        source,
        over,
        tuple(notes),
    )
