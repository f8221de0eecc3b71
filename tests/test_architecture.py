"""The package's shape: no import circle, layers that only point down, no module over 500 lines.

The import graph is read statically (AST) from every module of ``spyreopt``. Importing ``a.b.c`` also runs
``a.b``'s ``__init__``, so an edge to a module adds edges to its enclosing packages, except those that enclose
the importer too (they are already being imported when the importer runs). Two graphs:

* what runs on import (``import_graph()``): module-level statements, including those under ``if``/``try``, but
  not imports inside functions nor under ``if TYPE_CHECKING:``;
* every dependency (``import_graph(deferred=True)``): imports inside functions too (a deferred import is still
  a dependency, only a later one) and those under ``TYPE_CHECKING`` (a module that names another's type
  depends on it). A circle here means two modules that each need the other: the code is in the wrong place.

The layers (ARCHITECTURE.md): errors <- costmodel <- model <- hw <- solvers <- solving/cache/batch <-
bench/viz/cli/integrations. The one import allowed to point up is ``Plan.show``'s lazy picture (``ALLOWED_UP``).
"""

from __future__ import annotations

import argparse
import ast
import os
import subprocess
import sys
from pathlib import Path

import networkx as nx
import pytest

import spyreopt
from spyreopt.cli import COMMANDS, build_parser

ROOT = Path(spyreopt.__file__).parent
MAX_LINES = 500


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _all_imports(tree: ast.Module):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node


def _module_level_imports(body: list[ast.stmt]):
    """Import statements executed when the module body runs (not in functions or classes' methods)."""
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        elif isinstance(node, ast.If):
            if not _is_type_checking(node.test):
                yield from _module_level_imports(node.body)
            yield from _module_level_imports(node.orelse)
        elif isinstance(node, ast.Try):
            for block in (node.body, node.orelse, node.finalbody, *(h.body for h in node.handlers)):
                yield from _module_level_imports(block)
        elif isinstance(node, (ast.With, ast.ClassDef)):
            yield from _module_level_imports(node.body)


def _targets(module: str, node: ast.Import | ast.ImportFrom) -> set[str]:
    """The spyreopt modules an import statement loads directly."""
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names if alias.name in MODULES}
    base = node.module or ""
    if node.level:  # relative: resolve against the importer's package
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    found = {base} if base in MODULES else set()
    found |= {f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in MODULES}
    return found


def _ancestors(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_graph(deferred: bool = False) -> nx.DiGraph:
    """Module -> module it imports; with ``deferred`` also the imports inside functions."""
    graph = nx.DiGraph()
    graph.add_nodes_from(MODULES)
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        mine = set(_ancestors(module)) | {module}
        for node in _all_imports(tree) if deferred else _module_level_imports(tree.body):
            for target in _targets(module, node):
                for dep in [*_ancestors(target), target]:
                    if dep not in mine and dep in MODULES:
                        graph.add_edge(module, dep)
    return graph


def test_the_scan_sees_the_package():
    graph = import_graph()
    assert {"spyreopt.solving.entry", "spyreopt.model.plan", "spyreopt.solvers.registry"} <= set(graph)
    assert graph.has_edge("spyreopt.solving.entry", "spyreopt.model.graph")
    assert graph.number_of_edges() > 100


def test_no_import_cycle():
    cycles = sorted(sorted(c) for c in nx.strongly_connected_components(import_graph()) if len(c) > 1)
    assert not cycles, "import cycles between modules of spyreopt:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def circles(graph: nx.DiGraph) -> list[list[str]]:
    """Every simple circle of the graph but those through an allowed upward import, shortest first."""
    graph = graph.copy()
    graph.remove_edges_from(ALLOWED_UP)
    return sorted((c for c in nx.simple_cycles(graph)), key=lambda c: (len(c), c))


def test_no_import_circle_even_through_deferred_and_type_imports():
    found = circles(import_graph(deferred=True))
    assert not found, f"{len(found)} import circle(s) in spyreopt, deferred and TYPE_CHECKING imports counted:\n" + (
        "\n".join(" -> ".join([*c, c[0]]) for c in found[:20])
    )


def test_the_circle_scan_sees_deferred_and_type_imports():
    """A circle closed by a function-level import, and one closed by a TYPE_CHECKING import, are both found."""
    graph = nx.DiGraph([("a", "b"), ("b", "c"), ("c", "a"), ("x", "y"), ("y", "x")])
    assert sorted(map(sorted, circles(graph))) == [["a", "b", "c"], ["x", "y"]]
    deferred = import_graph(deferred=True)
    assert deferred.has_edge("spyreopt.model.plan", "spyreopt.model.explain")  # inside Plan.explain
    assert deferred.has_edge("spyreopt.model.plan", "spyreopt.model.problem")  # under TYPE_CHECKING
    assert not import_graph().has_edge("spyreopt.model.plan", "spyreopt.model.problem")


def test_no_module_over_500_lines():
    sizes = {module: len(path.read_text().splitlines()) for module, path in MODULES.items()}
    big = {module: n for module, n in sizes.items() if n > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them by idea): {big}"


# top-level module or subpackage of spyreopt -> its layer; a module may import only its own layer or lower ones
LAYERS = {
    "errors": 0, "limits": 0, "rates": 0,
    "costmodel": 1,
    "model": 2, "workloads": 2, "presets": 2, "formats": 2,
    "hw": 3,
    "solvers": 4, "contest": 4,
    "solving": 5, "calibrate": 5, "cache": 5, "batch": 5,
    "bench": 6, "viz": 6, "cli": 6, "integrations": 6, "testing": 6, "__main__": 6, "": 6, "reproduce": 6,
}  # fmt: skip
# the one upward import the design allows: Plan.show() draws the plan with viz (deferred, in the method)
ALLOWED_UP = {("spyreopt.model.plan", "spyreopt.viz")}


def _part(module: str) -> str:
    return module.split(".")[1] if "." in module else ""


def test_every_part_of_the_package_has_a_layer():
    assert {_part(m) for m in MODULES} <= set(LAYERS), "give the new top-level module a layer in LAYERS"


def test_layers_only_point_down():
    up: dict[tuple[str, str], list[str]] = {}
    for a, b in import_graph(deferred=True).edges:
        if LAYERS[_part(a)] < LAYERS[_part(b)] and (a, b) not in ALLOWED_UP:
            up.setdefault((_part(a), _part(b)), []).append(f"{a} -> {b}")
    assert not up, "imports pointing up the layers:\n" + "\n".join(e for edges in up.values() for e in edges)


def test_no_cycle_between_parts_even_through_deferred_imports():
    """A deferred import only hides a loop (api -> cache -> api once did): parts of one layer must not loop either."""
    parts = nx.DiGraph()
    for a, b in import_graph(deferred=True).edges:
        pair = (_part(a), _part(b))
        if pair[0] != pair[1] and (a, b) not in ALLOWED_UP:
            parts.add_edge(*pair)
    cycles = [sorted(c) for c in nx.strongly_connected_components(parts) if len(c) > 1]
    assert not cycles, f"parts of spyreopt importing each other: {cycles}"


HEAVY = (
    "numpy",
    "scipy",
    "pandas",
    "networkx",
    "ortools",
    "pulp",
    "highspy",
    "dask",
    "matplotlib",
    "diskcache",
    "torch",
)


def _loaded_after(code: str) -> set[str]:
    """Top-level packages a fresh interpreter has imported after running ``code``."""
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport sys; print(' '.join(sorted({{m.split('.')[0] for m in sys.modules}})))"],
        capture_output=True, text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT.parent)},
    )  # fmt: skip
    return set(out.stdout.split())


@pytest.mark.parametrize(
    "code",
    [
        "import spyreopt",
        "from spyreopt.cli import build_parser; build_parser(['--help'])",
        "from spyreopt.cli import build_parser; build_parser(['place', '--help'])",
    ],
)
def test_start_up_loads_no_heavy_dependency(code):
    heavy = _loaded_after(code) & set(HEAVY)
    assert not heavy, f"{code!r} imports {sorted(heavy)}: load them where the subcommand or backend runs"


def test_the_root_exposes_every_public_name():
    import spyreopt as so

    for name in so.__all__:
        assert getattr(so, name) is not None
    assert so.solve.__module__ == "spyreopt.solving.entry" and so.workloads.__name__ == "spyreopt.workloads"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        so.nope  # noqa: B018


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_listed_subcommand_says_what_its_module_says(name):
    """``spyreopt --help`` lists subcommands from COMMANDS without importing them: the text must be the module's."""
    listed = {a.dest: a.help for a in _subparsers(build_parser(["--help"]))._choices_actions}
    real = _subparsers(build_parser([name]))
    assert real.choices[name].get_default("func") is not None, (
        f"module {COMMANDS[name][0]!r} does not register {name!r}"
    )
    assert listed[name] == {a.dest: a.help for a in real._choices_actions}[name]


def _subparsers(parser):
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))


# one idea, one place: each step of the solve path has one home, and the marks of writing it a second time
ONE_PLACE = {
    # decoding a Solution into a Plan (model.decode's ``decode``) and checking it: the pipeline's ``finish``
    "the decode -> validate step": ("spyreopt.solving.pipeline", {"decode", "validate"}),
    # splitting a graph into segments and putting their plans in canonical names to stitch them
    "the layer decomposition": ("spyreopt.solving.layers", {"split", "to_canonical"}),
}


def _calls(path: Path) -> set[str]:
    """The names of the functions and methods a module calls, with its imported names that it uses as values
    (``decode`` as imported from ``spyreopt.model.decode``, never a method of the same name)."""
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name):
                out.add(f.id)
            elif isinstance(f, ast.Attribute) and f.attr != "decode":
                out.add(f.attr)
    decoders = {
        a.asname or a.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "spyreopt.model.decode"
        for a in node.names
    }
    return (out - {"decode"}) | ({"decode"} if decoders & out else set())


@pytest.mark.parametrize("step", sorted(ONE_PLACE))
def test_each_step_of_the_solve_path_is_defined_once(step):
    """A module outside the step's home that calls all of its parts (decode a Solution and validate the Plan;
    split a graph and put its segments' plans in canonical names) has written the step a second time."""
    home, parts = ONE_PLACE[step]
    assert parts <= _calls(MODULES[home]), f"{home} no longer holds {step}: update ONE_PLACE"
    again = sorted(m for m, path in MODULES.items() if m != home and parts <= _calls(path))
    assert not again, f"{step} is defined in {home}; written again in {again}: call it instead"


def test_only_the_pipeline_decodes_a_plan():
    """``model.decode`` turns a Solution into a Plan; everything else gets its plans from ``pipeline.finish``,
    which validates them."""
    decoders = sorted(
        m for m, path in MODULES.items()
        if m not in ("spyreopt.solving.pipeline", "spyreopt.model.decode")
        and any(isinstance(n, ast.ImportFrom) and n.module == "spyreopt.model.decode"
                for n in ast.walk(ast.parse(path.read_text())))
    )  # fmt: skip
    assert not decoders, f"modules decoding plans outside solving.pipeline: {decoders}"


def _functions_reading_iopddl(path: Path) -> list[str]:
    """Functions named as judges (``evaluate*``, ``judge*``, ``score*``) in a module that reads the IOPDDL format."""
    tree = ast.parse(path.read_text())
    reads = any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith("spyreopt.formats.iopddl")
                for n in ast.walk(tree))  # fmt: skip
    return [n.name for n in tree.body if reads and isinstance(n, ast.FunctionDef)
            and n.name.startswith(("evaluate", "judge", "score"))]  # fmt: skip


def test_one_iopddl_judge():
    """The contest's cost and feasibility are judged in ``formats.iopddl`` alone (``evaluate_iopddl``, ``score``):
    a second judge elsewhere could disagree with it, and whichever a result went through would decide."""
    assert {"evaluate_iopddl", "score"} <= {n.name for n in ast.parse(MODULES["spyreopt.formats.iopddl"].read_text()).body
                                            if isinstance(n, ast.FunctionDef)}  # fmt: skip
    again = {m: f for m, path in MODULES.items() if not m.startswith("spyreopt.formats.iopddl")
             and (f := _functions_reading_iopddl(path))}  # fmt: skip
    assert not again, f"an IOPDDL judge outside formats/iopddl.py: {again}"
