"""Published Spyre device measurements, rebuilt as spyreopt experiments and predicted by the cost model.

The figures and their sources are in ``costmodel/device_measurements.json``; each
experiment is built with the public API only (``Graph``, ``solve`` with ``pin`` and
``forbid``, a ``HardwareSpec`` with fewer cores), so a row's prediction is what a
user gets for the same experiment. ``run()`` returns one row per published figure:
``{experiment, quantity, unit, published, predicted, rel_err}``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from spyreopt.calibrate.sampling import Config, Sample, reference_coefficients
from spyreopt.costmodel.coefficients import Coefficients
from spyreopt.model.check.plans import fixed_problem
from spyreopt.model.graph import Graph
from spyreopt.model.hardware import HardwareSpec
from spyreopt.model.opspace import op_space
from spyreopt.model.plan import Plan
from spyreopt.model.staging import plan_masks
from spyreopt.solving.entry import solve
from spyreopt.workloads import get as get_workload

Row = dict[str, Any]
KEYS = ("experiment", "quantity", "unit", "published", "predicted", "rel_err", "fitted", "held_out", "held_out_rel_err")
HELD_OUT = {"softmax": "dev softmax", "decode": "dev decode", "relayout": "dev relayout"}  # experiment -> fit family


def measurements() -> dict:
    """The published figures and their sources (the packaged data file)."""
    text = resources.files("spyreopt.costmodel").joinpath("device_measurements.json").read_text()
    return json.loads(text)


def row(experiment: str, quantity: str, unit: str, published: float, predicted: float) -> Row:
    rel = (predicted - published) / abs(published) if published else None
    return dict(zip(KEYS, (experiment, quantity, unit, published, predicted, rel, False, None, None)))


def _fitted(key: str, r: Row) -> bool:
    """Whether the shipped fit used this row (``device_samples``: softmax stage times, forced decode splits,
    the relayout time)."""
    if key == "softmax":
        return r["quantity"] == "time" and "not fitted" not in r["experiment"]
    return (key == "decode" and r["quantity"].startswith("time, split")) or key == "relayout"


def held_out_coefficients(path=None) -> dict[str, Coefficients]:
    """Per published experiment, the coefficients fitted without its rows (``spyreopt fit --sweep``), from the
    shipped coefficient file's fit record (or ``path``); empty when the file has none."""
    if path is None:
        text = resources.files("spyreopt.costmodel").joinpath("spyre_default.json").read_text()
    else:
        text = open(path).read()
    held = json.loads(text).get("fit", {}).get("held_out_coefficients", {})
    return {k: Coefficients.from_dict(v) for k, v in held.items()}


def device_memory_bytes(plan: Plan) -> int:
    """Bytes the plan moves to and from device memory, by the cost model's own accounting
    (graph-input and weight reads, output writes, device-memory reads on edges)."""
    prob = fixed_problem(plan)
    total = 0
    for i in range(len(prob.ops)):
        total += prob.unary(i, 0)[3]
        if prob.candidates[i][0].residency != "lx":
            total += prob.layout(i, 0).write_bytes
    for k in range(len(prob.edges)):
        total += prob.pair(k, 0, 0).read_bytes
    return total


def element_count(formula: str, m: int, n: int) -> int:
    """``8MN+4N`` and the like: a sum of terms, each an integer times M, N or MN."""
    total = 0
    for term in formula.replace(" ", "").split("+"):
        coef = term.rstrip("MN") or "1"
        var = term[len(coef) :] if term[: len(coef)] == coef else term
        total += int(coef) * {"MN": m * n, "M": m, "N": n, "": 1}[var]
    return total


def softmax_graph(rows: int, cols: int, dim: int) -> Graph:
    g = Graph(f"softmax_dim{dim}")
    g.output(g.softmax(g.input("x", (rows, cols), "fp16"), dim=dim, name="softmax"))
    return g


def _softmax(data: dict, opts: dict) -> list[Row]:
    m, n = data["rows"], data["cols"]
    g = softmax_graph(m, n, data["dim"])
    out = []
    for st in data["stages"]:
        hw = HardwareSpec(cores=data["cores"])
        pin = {f"softmax.{op}": p for op, p in st["pin"].items()}
        plan = solve(g, hardware=hw, pin=pin, forbid=st["forbid"], **opts)
        name = f"softmax dim{data['dim']} {m}x{n} {data['cores']} core ({st['stage']}) {st['what']}"
        out.append(row(name, "time", "us", st["time_us"], plan.cost_us))
        published = element_count(st["elements"], m, n) * data["bytes_per_element"]
        out.append(
            row(
                name,
                f"device-memory bytes ({st['elements']} x {data['bytes_per_element']})",
                "B",
                published,
                device_memory_bytes(plan),
            )
        )
    for other in data["other_cores"]:
        plan = solve(g, hardware=HardwareSpec(cores=other["cores"]), **opts)
        name = f"softmax dim{data['dim']} {m}x{n} {other['cores']} cores (not fitted: {other['what']})"
        out.append(row(name, "time", "us", other["time_us"], plan.cost_us))
    return out


def matmul_graph(name: str, m: int, k: int, n: int) -> Graph:
    g = Graph(name)
    g.output(g.matmul(g.input("x", (m, k), "fp16"), g.weight("w", (k, n), "fp16"), name="mm"))
    return g


def _decode(data: dict, opts: dict) -> list[Row]:
    out = []
    for p in data["projections"]:
        g = matmul_graph(p["name"], p["M"], p["K"], p["N"])
        name = f"{data['model']} decode {p['name']} M{p['M']} K{p['K']} N{p['N']}"
        times = {}
        for which in ("best", "worst"):
            split = p[which]["split"]
            plan = solve(g, pin={"mm": {"division": dict(zip("mnk", split))}}, **opts)
            times[which] = plan.cost_us
            out.append(row(name, f"time, split (m,n,k)={tuple(split)}", "us", p[which]["time_us"], plan.cost_us))
        ratio = p["worst"]["time_us"] / p["best"]["time_us"]
        out.append(row(name, "worst/best split", "x", ratio, times["worst"] / times["best"]))
        own = solve(g, **opts)
        div = own.op("mm").division
        label = f"planner's split (m,n,k)=({div['m']},{div['n']},{div['k']}) / best split, by the model"
        out.append(row(name, label, "x", 1.0, own.cost_us / times["best"]))
    return out


def relayout_graph(data: dict) -> Graph:
    g = Graph("relayout_pair")
    x = g.input("x", tuple(data["shape"]), "fp16")
    y = g.pointwise(data["producer"]["fn"], x, name="producer")
    g.output(g.pointwise(data["consumer"]["fn"], y, name="consumer"))
    return g


def _relayout(data: dict, opts: dict) -> list[Row]:
    g = relayout_graph(data)
    pin = {
        "producer": {"division": data["producer"]["division"]},
        "consumer": {"division": data["consumer"]["division"]},
    }
    plan = solve(g, pin=pin, **opts)
    mb = g.tensors["producer"].nbytes / 1e6
    name = f"relayout {mb:.1f} MB, {data['producer']['fn']} {data['producer']['division']} -> {data['consumer']['fn']} {data['consumer']['division']}"
    edge = plan.edges[0]
    predicted = plan.op("consumer").breakdown["relayout"] if edge.mode == "relayout" else float("nan")
    return [row(name, f"relayout time (plan's edge: {edge.mode})", "us", data["time_us"], predicted)]


def utilisation(plan: Plan) -> float:
    """Time-weighted fraction of the machine's cores an op keeps busy (predicted op times)."""
    cores = plan.hardware["cores"]
    total = sum(o.predicted_us for o in plan.ops)
    return sum(o.cores * o.predicted_us for o in plan.ops) / (cores * total)


def _blog(data: dict, opts: dict) -> list[Row]:
    g = get_workload(data["workload"])
    before = solve(g, backend="independent", **{k: v for k, v in opts.items() if k != "backend"})
    after = solve(g, **opts)
    name = f"blog: {data['workload']} co-optimised vs each op its own division (not fitted)"
    return [
        row(name, "core utilisation before", "fraction", data["utilisation_before"], utilisation(before)),
        row(name, "core utilisation after", "fraction", data["utilisation_after"], utilisation(after)),
        row(name, "kernel time change", "fraction", data["time_change"], after.cost_us / before.cost_us - 1),
    ]


EXPERIMENTS: dict[str, Callable[[dict, dict], list[Row]]] = {
    "softmax": _softmax,
    "decode": _decode,
    "relayout": _relayout,
    "blog_mlp": _blog,
}


def run(
    *,
    backend: str = "cpsat",
    time_limit: float = 10.0,
    seed: int = 0,
    coefficients: Coefficients | None = None,
    only: list[str] | None = None,
    coefficients_path: str | None = None,
) -> list[Row]:
    """Every published figure next to the model's prediction for the same experiment; each row says whether the
    shipped fit used it, and (shipped coefficients, or ``coefficients_path`` of a ``spyreopt fit --sweep`` file)
    its prediction by the fit without its experiment's rows (``held_out``: leave one experiment out)."""
    data = measurements()
    opts = {"backend": backend, "time_limit": time_limit, "seed": seed, "coefficients": coefficients}
    held = held_out_coefficients(coefficients_path) if coefficients is None or coefficients_path else {}
    rows: list[Row] = []
    for key, build in EXPERIMENTS.items():
        if only is None or key in only:
            built = build(data[key], opts)
            for r in built:
                r["fitted"] = _fitted(key, r)
            if key in held:  # the same experiment priced by the fit that never saw its rows
                for r, h in zip(built, build(data[key], {**opts, "coefficients": held[key]})):
                    r["held_out"], r["held_out_rel_err"] = h["predicted"], h["rel_err"]
            rows.extend(built)
    return rows


def table(rows: list[Row]) -> str:
    """A plain-text table of the rows (relative error in percent)."""
    head = ["experiment", "quantity", "unit", "published", "predicted", "rel_err", "in fit", "held-out", "held-out err"]
    body = [head]
    for r in rows:
        rel = "-" if r["rel_err"] is None else f"{100 * r['rel_err']:+.1f}%"
        held = "-" if r["held_out"] is None else _num(r["held_out"])
        held_rel = "-" if r["held_out_rel_err"] is None else f"{100 * r['held_out_rel_err']:+.1f}%"
        fitted = "yes" if r["fitted"] else "no"
        cells = [r["experiment"], r["quantity"], r["unit"], _num(r["published"]), _num(r["predicted"]), rel]
        body.append([*cells, fitted, held, held_rel])
    widths = [max(len(b[i]) for b in body) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(b, widths)).rstrip() for b in body]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 10000 else f"{x:,.3f}" if abs(x) < 10 else f"{x:,.2f}"


# ---- device rows as fit samples ----------------------------------------------------------
@dataclass(frozen=True)
class DeviceConfig(Config):
    """A published experiment as a fit configuration: its own graph, the decisions the experiment fixes."""

    built: Graph | None = field(default=None, compare=False)
    masks: tuple[tuple[str, int], ...] = ()  # the plan's input-staging bits per op

    def graph(self) -> Graph:
        return self.built

    def stage_masks(self) -> dict[str, int]:
        return dict(self.masks)


def _config(family: str, graph: Graph, plan: Plan, target: str) -> DeviceConfig:
    decisions = []
    for o in plan.ops:
        dims = op_space(graph, graph.ops[o.name]).dims
        decisions.append((o.name, (tuple(o.division[d] for d in dims), o.stick, o.residency)))
    masks = plan_masks(graph, [graph.ops[o.name] for o in plan.ops], plan.tensors, plan.edges)
    return DeviceConfig(
        family, "device", (), "fp16", False, tuple(decisions), target, graph, tuple(sorted(masks.items()))
    )


def device_samples() -> tuple[list[Sample], list[str]]:
    """The published rows the fit may use, as samples, and why each other published row is left out.

    The decode and relayout rows force their decisions, so their plans are derived with the reference
    coefficients, as the simulator samples are. A softmax stage fixes capabilities, not decisions, and under the
    reference coefficients (compute-bound vector ops) keeping tensors on chip saves no time, so their plans
    put everything in device memory whatever the stage: its plan is the one ``spyreopt reproduce`` shows (the
    shipped coefficients), used only where it moves the published device-memory bytes (a stage the model
    could not plan would fit coefficients to the wrong traffic). A staged input is part of the configuration
    (its ops' staging bits).
    """
    data, ref = measurements(), reference_coefficients()
    samples, skipped = [], []
    sm = data["softmax"]
    g = softmax_graph(sm["rows"], sm["cols"], sm["dim"])
    for st in sm["stages"]:
        pin = {f"softmax.{op}": p for op, p in st["pin"].items()}
        plan = solve(g, hardware=HardwareSpec(cores=sm["cores"]), pin=pin, forbid=st["forbid"])
        want = element_count(st["elements"], sm["rows"], sm["cols"]) * sm["bytes_per_element"]
        got = device_memory_bytes(plan)
        if got != want:
            skipped.append(f"softmax ({st['stage']}) {st['what']}: the model's plan moves {got} B, the device {want} B")
            continue
        samples.append(Sample(_config("dev softmax", g, plan, "total"), st["time_us"]))
    skipped += [f"softmax on {o['cores']} cores: {o['what']}" for o in sm["other_cores"]]
    for p in data["decode"]["projections"]:
        g = matmul_graph(p["name"], p["M"], p["K"], p["N"])
        for which in ("best", "worst"):
            plan = solve(g, pin={"mm": {"division": dict(zip("mnk", p[which]["split"]))}}, coefficients=ref)
            samples.append(Sample(_config("dev decode", g, plan, "op:mm"), p[which]["time_us"]))
    rl = data["relayout"]
    g = relayout_graph(rl)
    pin = {"producer": {"division": rl["producer"]["division"]}, "consumer": {"division": rl["consumer"]["division"]}}
    plan = solve(g, pin=pin, coefficients=ref)
    samples.append(Sample(_config("dev relayout", g, plan, "relayout:consumer"), rl["time_us"]))
    skipped.append("blog MLP: utilisation and time change, not times of a fixed plan")
    return samples, skipped
