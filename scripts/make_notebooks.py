"""Write the notebooks in notebooks/ from the cell sources below (outputs cleared).

Run: python scripts/make_notebooks.py  — CI executes them with nbmake.
"""

from __future__ import annotations

from pathlib import Path

import nbformat as nbf

HERE = Path(__file__).resolve().parents[1] / "notebooks"

NOTEBOOKS: dict[str, list[tuple[str, str]]] = {}
CELL_TIMEOUT_SECONDS = 1800


def notebook(name: str, *cells: tuple[str, str]) -> None:
    NOTEBOOKS[name] = list(cells)


def md(text: str) -> tuple[str, str]:
    return ("md", text.strip())


def code(text: str) -> tuple[str, str]:
    return ("code", text.strip())


notebook(
    "01_quickstart.ipynb",
    md("""
# Quick start: build a graph, plan it, look at it

A graph is built op by op. `so.solve` compiles it into the solver-facing
Formulation, runs a backend and returns a validated `Plan`.
"""),
    code("""
%matplotlib inline
import spyreopt as so

g = so.Graph("mlp")
x = g.input("x", (128, 256), dtype="fp16")
h = g.pointwise("gelu", g.matmul(x, g.weight("w1", (256, 1024)), name="up"), name="gelu")
g.output(g.matmul(h, g.weight("w2", (1024, 256)), name="down"))
plan = so.solve(g, backend="cpsat", time_limit=60, seed=0)  # stops at its deterministic budget, far sooner
print(plan.table())
"""),
    md("Every hard constraint is re-checked independently of the solver, and the simulator gives its own verdict:"),
    code("""
plan.validate()
sim = so.simulate(plan)
print(f"predicted {plan.cost_us:.2f} µs, simulated {sim.time_us:.2f} µs")
"""),
    md("The main pictures: where each buffer sits in scratchpad over time, and where the time goes."),
    code("""
figs = plan.show()
"""),
    md("Plans round-trip through JSON exactly, and the same seed gives the same bytes:"),
    code("""
assert so.Plan.from_json(plan.to_json()) == plan
assert so.solve(g, backend="cpsat", time_limit=60, seed=0).to_json() == plan.to_json()
"""),
)

notebook(
    "02_backends_and_optimality.ipynb",
    md("""
# Backends and optimality

Greedy, simulated annealing, CP-SAT and MILP read the same Formulation. CP-SAT
and MILP prove optimality (or report their bound and gap); the baselines `hbm`
and `independent` show what co-optimisation buys. "Optimal" is over the
enumerated candidates (the plan's status message says which).

Every budget here is deterministic, so the outcome does not depend on how busy
the machine is: annealing runs a fixed number of guide rounds and steps, CP-SAT
its deterministic-time budget; the wall-clock limits are only a generous cap.
"""),
    code("""
%matplotlib inline
import time

import spyreopt as so
from spyreopt import viz

BUDGET = {"anneal": {"steps": 10_000, "rounds": 200}}  # a fixed amount of work, not a number of seconds

rows = []
for name in ["softmax", "mlp", "swiglu", "sdpa", "layernorm"]:
    problem = so.Problem(so.workloads.get(name))  # built once, solved by every backend
    for backend in ["hbm", "independent", "greedy", "anneal", "cpsat", "milp"]:
        start = time.perf_counter()
        plan = so.solve(problem, backend=backend, time_limit=120, seed=0, **BUDGET.get(backend, {}))
        rows.append({"workload": name, "backend": backend, "status": plan.status, "cost_us": plan.cost_us,
                     "bound_us": plan.bound_us, "gap": plan.gap, "simulated_us": so.simulate(plan).time_us,
                     "solve_s": time.perf_counter() - start})
for r in rows:
    gap = "-" if r["gap"] is None else f"{100 * r['gap']:.2f}%"
    print(f"{r['workload']:10s} {r['backend']:12s} {r['status']:9s} {r['cost_us']:8.2f} µs  sim {r['simulated_us']:8.2f}  gap {gap:>7s}  {r['solve_s']:.2f} s")
"""),
    md("""
CP-SAT proves every small kernel optimal within its deterministic budget; no
other backend's plan is cheaper, and wherever MILP (HiGHS, whose only limit is
the wall clock) proves optimality too, the two agree:
"""),
    code("""
for name in ["softmax", "mlp", "swiglu", "sdpa", "layernorm"]:
    mine = {r["backend"]: r for r in rows if r["workload"] == name}
    c, m = mine["cpsat"], mine["milp"]
    assert c["status"] == "optimal" and all(c["cost_us"] <= r["cost_us"] + 1e-9 for r in mine.values())
    assert m["status"] != "optimal" or abs(c["cost_us"] - m["cost_us"]) < 1e-9
    print(f"{name:10s} cpsat {c['status']}, milp {m['status']}, same cost: {abs(c['cost_us'] - m['cost_us']) < 1e-9}")
"""),
    code("""
fig = viz.backend_comparison(rows, metric="simulated_us", baseline="independent")
"""),
)

notebook(
    "03_scratchpad_story.ipynb",
    md("""
# The scratchpad story: softmax 512×1024

Softmax decomposes into max, sub, exp, sum, div. Through device memory every op
reads and writes the whole tensor; kept in scratchpad, only the input read and
the output write remain. The Spyre compiler reports 32.51 → 23.67 µs from reuse alone.
"""),
    code("""
%matplotlib inline
import spyreopt as so
from spyreopt import viz

g = so.workloads.get("softmax", rows=512, cols=1024)
plans = {b: so.solve(g, backend=b, time_limit=10) for b in ["hbm", "independent", "cpsat"]}
for b, p in plans.items():
    print(f"{b:12s} predicted {p.cost_us:7.2f} µs   simulated {so.simulate(p).time_us:7.2f} µs")
"""),
    md("Through device memory, the time is all memory traffic:"),
    code("""
fig = viz.cost_breakdown(plans["hbm"])
"""),
    md("Co-optimised, each intermediate stays on chip, reused in place by the next op with the same division:"),
    code("""
fig = viz.scratchpad_chart(plans["cpsat"])
fig = viz.cost_breakdown(plans["cpsat"])
print({e.mode for e in plans["cpsat"].edges})
"""),
    md("The simulator shows the scratchpad filling and emptying on every core:"),
    code("""
fig = viz.simulation_chart(so.simulate(plans["cpsat"]), plans["cpsat"])
"""),
)

notebook(
    "04_relayout_vs_spill.ipynb",
    md("""
# Relayout or spill?

When a consumer slices a tensor differently from its producer, the data can be
shuffled between cores on chip (a *relayout*: paid in time and in scratchpad for
both copies) or round-tripped through device memory (a *spill*). A relayout is
legal when the destination cores are a multiple of the source cores and each
destination gathers at most 8 fragments.
"""),
    code("""
%matplotlib inline
import spyreopt as so
from spyreopt import viz

g = so.workloads.get("relayout")
plan = so.solve(g, backend="cpsat", time_limit=10)
print(plan.table())
for e in plan.edges:
    print(e.tensor, "->", e.consumer, e.mode, "fan-in", e.fan_in, "copy bytes/core", e.copy_bytes_per_core)
"""),
    md("The same graph without the relayout option (everything through device memory) is much slower:"),
    code("""
hbm = so.solve(g, backend="hbm")
print(f"relayout plan {plan.cost_us:.1f} µs  vs  device-memory plan {hbm.cost_us:.1f} µs "
      f"(simulated {so.simulate(plan).time_us:.1f} vs {so.simulate(hbm).time_us:.1f})")
fig = viz.cost_breakdown(plan)
"""),
    md("""
With a small scratchpad the copy no longer fits next to its source, and the
planner chooses differently. Shrinking the planner's share of LX shows where
the choice flips:
"""),
    code("""
for fraction in [0.8, 0.1, 0.05, 0.02]:
    hw = so.HardwareSpec(planner_fraction=fraction)
    p = so.solve(g, backend="cpsat", time_limit=10, hardware=hw)
    modes = sorted({e.mode for e in p.edges})
    print(f"planner LX {hw.planner_lx_bytes:>8d} B/core: {p.cost_us:8.2f} µs, edges {modes}, residency {[o.residency for o in p.ops]}")
"""),
)

notebook(
    "05_inductor_adapter.ipynb",
    md("""
# Planning a PyTorch module through Inductor

The adapter captures Inductor's lowered IR after lowering and before scheduling
(where the Spyre compiler runs its co-optimiser), translates it into a
`spyreopt.Graph`, plans it, and lets the program run. In `analysis` mode it
plans without generating code and runs the program eagerly (fast, for notebooks).
"""),
    code("""
%matplotlib inline
import torch
import torch.nn.functional as F

import spyreopt as so
from spyreopt import viz
from spyreopt.integrations import inductor


class Block(torch.nn.Module):
    def __init__(self, d=256, ff=512):
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.up = torch.nn.Linear(d, ff)
        self.down = torch.nn.Linear(ff, d)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))

torch.manual_seed(0)
model = Block().eval()
x = torch.randn(128, 256)
inductor.clear()
compiled = torch.compile(model, backend="spyreopt", options={"backend": "cpsat", "time_limit": 10, "mode": "analysis"})
with torch.no_grad():
    torch.testing.assert_close(compiled(x), model(x))
"""),
    code("""
for captured in inductor.plans():
    print(captured.summary())
    print("ops by kind:", captured.counts, " opaque:", captured.opaque or "none")
    for mm in captured.matmuls:
        print("  matmul", mm)
"""),
    code("""
captured = inductor.plans()[-1]
plan = captured.plan
print(plan.table())
print(f"predicted {plan.cost_us:.2f} µs, simulated {so.simulate(plan).time_us:.2f} µs")
fig = viz.scratchpad_chart(plan)
"""),
    md("Each plan op maps back to the Inductor buffer it came from:"),
    code("""
for op, buf in list(captured.op_buffer.items())[:12]:
    print(f"{op:30s} <- {buf}")
"""),
)

notebook(
    "06_costmodel_fit.ipynb",
    md("""
# The cost model, fitted to the simulator

The planner prices plans with an analytic cost model; the simulator is the
ground truth on this machine. `spyreopt fit` samples configurations of every op
family from the planner's own candidates, measures them on the simulator, fits
the coefficients by bounded least squares on relative error, and scores them on
configurations held out from the fit. (The Spyre compiler's model, fitted on
hardware: 5–40% RMS error by family, rank correlation 0.875–0.998.)

A small sample here, so the notebook runs in well under a minute; the shipped
coefficients come from `spyreopt fit --samples 200 --seed 0`.
"""),
    code("""
%matplotlib inline
import matplotlib.pyplot as plt
import numpy as np

import spyreopt as so
from spyreopt.calibrate.fit import evaluate, fit, format_table, predict_us, terms
from spyreopt.calibrate.sampling import random_configs, simulate_samples

configs = random_configs(12, seed=1)
samples, rejected = simulate_samples(configs)
print(len(samples), "configurations simulated,", len(rejected), "rejected by the simulator")
"""),
    code("""
result = fit(samples, holdout=0.3, seed=1)
print(result.format())
"""),
    md("The shipped coefficients on these fresh configurations (none of them was in the shipped fit):"),
    code("""
shipped = so.Coefficients.load()
print(format_table(evaluate(shipped, samples)))
"""),
    code("""
measured = np.array([s.measured_us for s in samples])
predicted = predict_us(shipped, terms([s.config for s in samples]))
families = sorted({s.config.family for s in samples})
fig, ax = plt.subplots(figsize=(6, 5))
for fam in families:
    idx = [i for i, s in enumerate(samples) if s.config.family == fam]
    ax.scatter(measured[idx], predicted[idx], s=14, label=fam)
lim = [measured.min() * 0.8, measured.max() * 1.2]
ax.plot(lim, lim, "k--", linewidth=1)
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("simulated µs")
ax.set_ylabel("predicted µs (shipped coefficients)")
ax.set_title("cost model vs simulator, per op family")
ax.legend(fontsize=7)
"""),
    md("On whole plans the model ranks backends the way the simulator does:"),
    code("""
for name in ["mlp", "sdpa", "layernorm"]:
    problem = so.Problem(so.workloads.get(name))
    for backend in ["hbm", "independent", "greedy", "cpsat"]:
        p = so.solve(problem, backend=backend, time_limit=120)  # CP-SAT stops at its deterministic budget
        print(f"{name:10s} {backend:12s} predicted {p.cost_us:7.2f}  simulated {so.simulate(p).time_us:7.2f}")
"""),
)


def main() -> None:
    HERE.mkdir(exist_ok=True)
    for name, cells in NOTEBOOKS.items():
        nb = nbf.v4.new_notebook()
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        # nbmake's per-cell limit (default 300 s): budgets are deterministic, so a loaded machine is only slower
        nb.metadata["execution"] = {"timeout": CELL_TIMEOUT_SECONDS}
        nb.cells = [nbf.v4.new_markdown_cell(src) if kind == "md" else nbf.v4.new_code_cell(src) for kind, src in cells]
        for k, cell in enumerate(nb.cells):  # stable ids: regenerating changes nothing that did not change
            cell.id = f"{name.split('_')[0]}-{k:02d}"
        nbf.write(nb, HERE / name)
        print(f"wrote notebooks/{name}")


if __name__ == "__main__":
    main()
