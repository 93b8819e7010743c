"""The rules of the house (DESIGN.md section 2), read from the source with ``ast``.

* ``devkit.targets`` (hardware as data) imports nothing from the rest of ``devkit``;
* the engine layers (``devkit.nki``, ``devkit.sim``, ``devkit.cost``, ``devkit.targets``) never import
  the workflow or the CLI (``devkit.workflow``, ``devkit.commands``, ``devkit.cli``, nor the workflow
  modules that still sit at the root of ``devkit``);
* the cost model never imports the simulator or its front end (it reads the trace);
* no hardware number outside the target files: no value that a target file documents appears as a
  literal in the simulator, the cost model or the kernels;
* no source file is longer than 1,200 lines;
* no import cycle among ``devkit`` modules: neither through module-level imports (``TYPE_CHECKING``
  blocks excluded) nor through imports deferred into function bodies ("no two modules import each
  other": a deferred import hides a cycle from Python, not from the design).

Every rule has a twin that feeds the checker a small bad example, so a checker that finds nothing
because it looks at nothing fails too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from devkit.targets import TARGETS, load_target

ROOT = Path(__file__).resolve().parents[1]
DEVKIT = ROOT / "devkit"
MAX_LINES = 1200

#: Layers that sit below the workflow and the CLI.
ENGINE_LAYERS = ("devkit.nki", "devkit.sim", "devkit.cost", "devkit.targets")
#: The workflow and the CLI, including the workflow modules still at the root of devkit.
UPPER_LAYERS = (
    "devkit.workflow",
    "devkit.commands",
    "devkit.cli",
    "devkit.main_job",
    "devkit.tune",
    "devkit.promote",
    "devkit.e2e",
    "devkit.llm",
    "devkit.report",
    "devkit.svd",
    "devkit.hw",
)
#: Code that must read its hardware numbers from devkit.targets.
NUMBER_FREE_DIRS = ("devkit/cost", "devkit/nki", "devkit/sim", "devkit/kernels")
#: Python sources held to the length limit.
SOURCE_DIRS = ("devkit", "simulator_tests", "hw_tests", "benchmarks", "docs/_gen")


# ---- reading imports ---------------------------------------------------------------------------


def module_name(path: Path, root: Path = ROOT) -> str:
    """``devkit/cost/report.py`` -> ``devkit.cost.report``; ``devkit/cost/__init__.py`` -> ``devkit.cost``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(nodes: Iterable[ast.stmt], module_level: bool) -> Iterator[ast.stmt]:
    """Statements to look for imports in: every statement, or (``module_level``) those executed when
    the module is imported (not function bodies, not ``if TYPE_CHECKING:`` blocks)."""
    for node in nodes:
        yield node
        if module_level:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                yield from _walk(node.orelse, module_level)
                continue
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.stmt):
                yield from _walk([child], module_level)
            elif not module_level:
                for sub in ast.walk(child):
                    if isinstance(sub, ast.stmt):
                        yield from _walk([sub], module_level)


def imports_of(
    source: str, module: str, known: set[str], is_package: bool = False, module_level: bool = False
):
    """The modules ``module`` imports: ``import a.b`` -> ``a.b``; ``from a import b`` -> ``a.b`` when that
    is a module in ``known``, else ``a``.  Relative imports are resolved against ``module``."""
    out: set[str] = set()
    package = module if is_package else module.rpartition(".")[0]
    for node in _walk(ast.parse(source).body, module_level):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                out.add(sub if sub in known else base)
    out.discard(module)
    return out


def _sources(dirs: Iterable[str]) -> list[Path]:
    return sorted(p for d in dirs for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts)


def import_graph(module_level: bool) -> dict[str, set[str]]:
    """``devkit`` module -> the ``devkit`` modules it imports."""
    paths = _sources(["devkit"])
    known = {module_name(p) for p in paths}
    graph = {}
    for p in paths:
        name = module_name(p)
        deps = imports_of(p.read_text(encoding="utf-8"), name, known, p.name == "__init__.py", module_level)
        graph[name] = {d for d in deps if d == "devkit" or d.startswith("devkit.")}
    return graph


def _under(module: str, prefixes: Iterable[str]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def offenders(graph: dict[str, set[str]], sources: Iterable[str], forbidden: Iterable[str]) -> list[str]:
    sources, forbidden = tuple(sources), tuple(forbidden)
    return sorted(
        f"{mod} imports {dep}"
        for mod, deps in graph.items()
        if _under(mod, sources)
        for dep in deps
        if _under(dep, forbidden)
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


# ---- hardware numbers --------------------------------------------------------------------------


def hardware_numbers() -> tuple[set[float], set[int]]:
    """Distinctive values of the target files: clocks, bandwidths, latencies and peaks (floats that are
    fractional or >= 10, matched as floats and, when whole and >= 100, as ints) and SBUF sizes (ints
    >= 100,000).  Small counts such as 128 partitions or 8 banks are too common to search for."""
    floats: set[float] = set()
    ints: set[int] = set()
    for name in TARGETS:
        for entry in load_target(name).entries.values():
            v = entry.value
            if isinstance(v, bool):
                continue
            if isinstance(v, float) and (v != int(v) or v >= 10):
                floats.add(v)
                if v == int(v) and v >= 100:
                    ints.add(int(v))
            elif isinstance(v, int) and v >= 100_000:
                ints.add(v)
    return floats, ints


def numbers_in(source: str, floats: set[float], ints: set[int]) -> list[tuple[int, float | int]]:
    """(line, value) of every literal in ``source`` that is one of the hardware numbers."""
    return [
        (node.lineno, node.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Constant)
        and (
            (type(node.value) is float and node.value in floats)
            or (type(node.value) is int and node.value in ints)
        )
    ]


# ---- the rules ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    return import_graph(module_level=False)


def test_the_graph_sees_the_package(graph) -> None:
    assert {"devkit.targets", "devkit.targets.loader", "devkit.cost.scheduler", "devkit.sim.machine"} <= set(
        graph
    )
    assert "devkit.targets.loader" in graph["devkit.targets"]
    assert "devkit.targets" in graph["devkit.cost.scheduler"]


def test_targets_import_nothing_from_devkit(graph) -> None:
    bad = [
        f"{mod} imports {dep}"
        for mod, deps in graph.items()
        if _under(mod, ["devkit.targets"])
        for dep in deps
        if not _under(dep, ["devkit.targets"])
    ]
    assert bad == []


def test_engine_layers_never_import_the_workflow_or_the_cli(graph) -> None:
    assert offenders(graph, ENGINE_LAYERS, UPPER_LAYERS) == []


def test_cost_model_never_imports_the_simulator(graph) -> None:
    """The cost model reads only trace types (devkit.trace), never devkit.sim / devkit.nki."""
    assert offenders(graph, ["devkit.cost"], ["devkit.sim", "devkit.nki"]) == []


def test_no_hardware_number_outside_the_target_files() -> None:
    floats, ints = hardware_numbers()
    assert {180224, 212984, 245752} <= ints and {2.8, 17.0, 1300.0} <= floats
    found = [
        f"{p.relative_to(ROOT)}:{line}: {value!r}"
        for p in _sources(NUMBER_FREE_DIRS)
        for line, value in numbers_in(p.read_text(encoding="utf-8"), floats, ints)
    ]
    assert found == []


def test_no_source_file_over_the_length_limit() -> None:
    paths = _sources(SOURCE_DIRS)
    assert len(paths) > 50
    long = {
        str(p.relative_to(ROOT)): n
        for p in paths
        if not p.name.startswith("generated_")
        and (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_import_cycles_among_devkit_modules() -> None:
    assert cycles(import_graph(module_level=True)) == []


def test_no_import_cycles_through_deferred_imports(graph) -> None:
    assert cycles(graph) == []


# ---- the checkers catch what they are for -------------------------------------------------------


def test_checker_resolves_from_relative_and_lazy_imports() -> None:
    known = {"devkit.cost", "devkit.cost.report", "devkit.cost.render", "devkit.sim.machine", "devkit.cli"}
    src = (
        "from devkit.cost import report\n"
        "from . import render\n"
        "import devkit.sim.machine\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from devkit.cli import main\n"
        "def f():\n"
        "    from devkit.cli import main\n"
    )
    every = imports_of(src, "devkit.cost.scheduler", known)
    assert {"devkit.cost.report", "devkit.cost.render", "devkit.sim.machine", "devkit.cli"} <= every
    top = imports_of(src, "devkit.cost.scheduler", known, module_level=True)
    assert "devkit.cli" not in top and "devkit.cost.report" in top


def test_checker_finds_upward_imports_and_cycles() -> None:
    bad = {
        "devkit.cost.report": {"devkit.cost.render", "devkit.commands.cost"},
        "devkit.cost.render": {"devkit.cost.report"},
        "devkit.targets.loader": {"devkit.trace"},
        "devkit.trace": set(),
    }
    assert offenders(bad, ENGINE_LAYERS, UPPER_LAYERS) == ["devkit.cost.report imports devkit.commands.cost"]
    assert cycles(bad) == [["devkit.cost.render", "devkit.cost.report"]]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_checker_finds_hardware_numbers() -> None:
    floats, ints = hardware_numbers()
    src = "CLOCK_GHZ = 2.8\nUSABLE = 180224\nBANKS = 8\nHOTSPOTS = 20\n"
    assert numbers_in(src, floats, ints) == [(1, 2.8), (2, 180224)]
