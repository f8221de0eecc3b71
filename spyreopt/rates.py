"""Every machine-calibrated rate in one place: how many seconds a unit of each method's work is planned to take.

A time limit becomes deterministic work through these numbers: greedy's window units, anneal's rounds and looks,
CP-SAT's deterministic time, the contest engine's rounds, the nominal build and finish of a problem. Each backend
turns its seconds into its own units with them (so the plan depends on the limit, never on the clock); the clock
only stops a run these rates misjudged, and the plan then says so (``spyreopt.limits``).

Machine: the project's shared 2-core x86_64 box (Python 3.11, 24 GiB), measured under the helpers' load unless
noted. Command that re-measures every rate below on the machine at hand:

    spyreopt bench --suite rates          (``spyreopt.bench.rates``: one row per rate, measured beside nominal)

A nominal rate is set below what was measured (a slower machine still ends on the work budget, not the clock);
changing one changes plans, so a change is a decision about every machine, never a fit to one workload.
"""

from __future__ import annotations

# --- the problem around the search (``spyreopt.limits.search_budget``) ---
BUILD_SECONDS_PER_OP = 0.05  # building a problem, per compute op; measured 0.016 to 0.034 s for the built-in
# workloads under load, 0.04 for a Llama-3-8B layer built cold (bench rate ``build_s_per_op``)
FINISH_SECONDS_PER_OP = 0.002  # decoding and validating the plan, per compute op (``finish_s_per_op``)
FINISH_SECONDS = 0.02  # decoding and validating a small plan, kept back from a backend's clock
STARTUP_SECONDS = 0.6  # a command's interpreter start-up and imports: 0.4 to 0.7 s measured idle
# (``python -X importtime -c "import spyreopt.cli.solve"``)
WHOLE_SECONDS_PER_OP = 0.02  # building a whole layered graph (repeated layers share tables) and greedy on it

# --- greedy (``solvers.greedy``, ``solvers.window_moves``) ---
WINDOW_UNITS_PER_SECOND = 60_000_000  # window work units a second: 100 to 170 million measured under load
# (``window_units_per_s``); set below, so the budget runs out well before the clock does

# --- anneal (``solvers.anneal.search``) ---
ROUND_SECONDS_PER_TERM = 3.5e-4  # one guide round, per unit plus pair of the unit graph (``anneal_round_s``)
LOOK_SECONDS = 8e-5  # one look at a unit: candidate vector and memory change (``anneal_look_s``)
ANNEAL_CANDIDATES_PER_SECOND = 2000  # anneal's set-up grows with the candidates: beyond this many per second of
# the chain's limit, the chain skips its anneal step (``solvers.solving_chain``)

# --- MILP (``solvers.milp``) and the IOPDDL command (``cli.iopddl``) ---
READ_SECONDS_PER_VARIABLE = 1e-5  # kept back for PuLP to read the solution into its variables: 0.4 to 0.9 s
# measured for 85k variables
GREEDY_SECONDS_PER_ENTRY = 4e-6  # loading an instance into a Formulation and greedy's set-up, per cost entry:
# 0.7 s for the 246,314 entries of B under load (``spyreopt iopddl B --backend greedy``)

# --- CP-SAT (``solvers.cpsat``), one worker ---
DTIME_PER_SECOND = 0.16  # deterministic time per wall second: about 0.19 measured on IOPDDL and in LNS windows
# (``cpsat_dtime_per_s``)
DTIME_PER_SECOND_PLACED = 0.25  # a whole model with a NoOverlap2D placement: 0.1 to 1.0 measured (0.4 on a
# 40-node placed random formulation); the Spyre kernels' proofs take well under 0.01 units after presolve
FULL_MODEL_SIZE_PER_SECOND = 4000  # variables + constraints the whole model may have per second of limit
FULL_MODEL_SIZE_PER_SECOND_PLACED = 4000  # with addresses: kernels up to ~40k solve whole in 10 s; larger go to LNS
PLACEMENT_DTIME_PER_SECOND = 0.05  # the placement's CP-SAT model: about 0.06 units per CPU second measured on
# the MiniMalloc instances (``solvers.placement.cpsat``)
EXACT_MIN_SECONDS = 0.5  # a small problem's CP-SAT stage below this planned budget ends on the clock (its model
# and chain alone take 0.2 to 0.5 s), so auto gives anneal the search
LNS_MIN_SECONDS = 2.0  # below this planned budget CP-SAT's reductions (its LP) alone may overrun on a large
# problem: 1.3 s on a Llama-3-8B attention layer; on transformer_block a 1.2 s CP-SAT stage ends on the clock, a
# 2 s one proves the optimum in 1.1 s

# --- the contest engine, backend ``trws`` (``solvers.trws``) ---
ROUND_SECONDS_PER_ENTRY = 2e-7  # one engine round per table entry
ROUND_SECONDS_MIN = 2e-3  # the floor of one round (prices, repair and polish on a tiny problem)
ENGINE_MIN_SECONDS = 0.5  # below this planned budget the engine's fixed work (reductions, repair, placement)
# dominates, so auto leaves it out
ENGINE_LOAD_SECONDS = 1.5  # importing numba and loading the engine's cached kernels
