"""Hypothesis strategies for testing planners: graphs, hardware specs, problems, formulations.

Public and documented, so users can test their own planners with the same tools::

    from hypothesis import given
    from spyreopt.testing import strategies as sst

    @given(sst.problems(max_ops=5))
    def test_my_planner(problem):
        plan = my_planner(problem)
        plan.validate()

Sizes are bounded by arguments (``max_ops``, ``max_dim``...), so a property
suite can run quickly in CI and longer under a profile of the user's choosing.
"""

from __future__ import annotations

from hypothesis import strategies as st

from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.problem import Problem
from spyreopt.testing.formulations import random_formulation

UNARY = ("exp", "gelu", "silu", "relu", "neg", "square")
BINARY = ("add", "sub", "mul", "max")
KINDS = ("matmul", "unary", "binary", "bias", "reduce", "softmax", "transpose", "rmsnorm")


def dims(aligned: bool | None = None, max_dim: int = 256) -> st.SearchStrategy[int]:
    """A tensor extent: stick-aligned (multiples of 64), unaligned, or either."""
    aligned_dims = st.sampled_from([d for d in (64, 128, 192, 256, 512, 1024) if d <= max(max_dim, 64)])
    odd_dims = st.integers(min_value=1, max_value=max_dim)
    if aligned is True:
        return aligned_dims
    if aligned is False:
        return odd_dims
    return st.one_of(aligned_dims, odd_dims)


@st.composite
def graphs(
    draw,
    max_ops: int = 6,
    kinds: tuple[str, ...] = KINDS,
    dtypes: tuple[str, ...] = ("fp16", "bf16", "fp32", "fp8"),
    aligned: bool | None = None,
    max_dim: int = 256,
) -> Graph:
    """Graphs mixing matmuls, pointwise ops, reductions and views, with chains, fan-out and diamonds.

    Each new op reads tensors drawn from everything built so far, so a tensor
    may feed several ops (fan-out) that later meet again (diamonds).
    """
    dtype = draw(st.sampled_from(dtypes))
    g = Graph("generated")
    rows, cols = draw(dims(aligned, max_dim)), draw(dims(aligned, max_dim))
    pool = [g.input("x", (rows, cols), dtype)]
    n_ops = draw(st.integers(min_value=1, max_value=max_ops))
    for i in range(n_ops):
        kind = draw(st.sampled_from(kinds))
        x = draw(st.sampled_from(pool[-3:]))  # mostly recent tensors: chains, with some fan-out
        shape = g.tensors[x].shape
        if kind == "matmul":
            n = draw(dims(aligned, max_dim))
            y = g.matmul(x, g.weight(f"w{i}", (shape[-1], n), dtype), name=f"mm{i}")
        elif kind == "unary":
            y = g.pointwise(draw(st.sampled_from(UNARY)), x, name=f"u{i}")
        elif kind == "binary":
            same = [t for t in pool if g.tensors[t].shape == shape]
            other = draw(st.sampled_from(same))
            y = g.pointwise(draw(st.sampled_from(BINARY)), x, other, name=f"b{i}")
        elif kind == "bias":
            y = g.pointwise("add", x, g.weight(f"bias{i}", (shape[-1],), dtype), name=f"bias_add{i}")
        elif kind == "reduce":
            y = g.reduce(draw(st.sampled_from(("sum", "max", "mean"))), x, -1, name=f"r{i}")
        elif kind == "softmax":
            y = g.softmax(x, name=f"sm{i}")
        elif kind == "rmsnorm":
            y = g.rmsnorm(x, name=f"rms{i}")
        else:
            t = g.transpose(x, name=f"t{i}")
            y = g.pointwise("neg", t, name=f"tn{i}")
        pool.append(y)
    g.output(pool[-1])
    extra = [t for t in pool[1:-1] if draw(st.booleans()) and draw(st.booleans())]
    for t in extra:
        if g.tensors[t].producer is not None:
            g.output(t)
    return g


@st.composite
def hardware_specs(draw, min_cores: int = 1, max_cores: int = 32) -> HardwareSpec:
    """Spyre-like machines with varied core counts and scratchpad sizes."""
    cores = draw(st.sampled_from([c for c in (1, 2, 4, 8, 16, 32) if min_cores <= c <= max_cores]))
    lx = draw(st.sampled_from([256 << 10, 512 << 10, 1 << 20, 2 << 20]))
    fraction = draw(st.sampled_from([0.5, 0.8, 1.0]))
    return HardwareSpec(name="generated", cores=cores, lx_bytes=lx, program_reserve_bytes=min(64 << 10, lx // 4), planner_fraction=fraction)


@st.composite
def problems(draw, max_ops: int = 5, **graph_kwargs) -> Problem:
    """A whole planning problem: a generated graph on a generated machine."""
    return Problem(draw(graphs(max_ops=max_ops, **graph_kwargs)), draw(hardware_specs()))


@st.composite
def formulations(draw, max_nodes: int = 6, max_candidates: int = 4, placement: bool | None = None):
    """Random standard-form instances (IOPDDL-like, with max terms, forbidden pairs and copies)."""
    return random_formulation(
        draw(st.integers(min_value=0, max_value=2**31 - 1)),
        num_nodes=draw(st.integers(min_value=1, max_value=max_nodes)),
        max_candidates=max_candidates,
        tight=draw(st.sampled_from([0.0, 0.3, 0.6, 1.0])),
        placement=draw(st.booleans()) if placement is None else placement,
    )
