"""The import graph of src/crucible (benchmarks/import_graph.py, read statically): no import
circle, between packages or between modules, and no import against the layering that
CONTRIBUTING.md describes ("Layers"), except the known cases below, each with the work that
removes it. An entry whose import is gone fails too, so that the list only shrinks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = importlib.util.spec_from_file_location("import_graph", REPO / "benchmarks" / "import_graph.py")
import_graph = importlib.util.module_from_spec(SPEC)
sys.modules["import_graph"] = import_graph  # dataclasses look their module up there
SPEC.loader.exec_module(import_graph)

# (importing module, imported module) -> why it is still there. Empty since issue 30 landed: a
# new entry needs its reason and the work that removes it.
KNOWN: dict[tuple[str, str], str] = {}


def _graph(left_out=frozenset(KNOWN)):
    return import_graph.analyse(REPO / "src", set(left_out))


def test_no_import_circle_and_none_against_the_layering():
    result = _graph()
    assert result["circles"] == [], f"import circles between packages: {result['circles']}"
    assert result["module_circles"] == [], f"import circles between modules: {result['module_circles']}"
    against = [f"{i['path']}:{i['line']}: {i['from']} -> {i['to']}" for i in result["against_layering"]]
    assert not against, "imports against the layering (CONTRIBUTING.md, Layers):\n" + "\n".join(against)


def test_every_package_says_its_layer():
    """The layer of a module is its folder's: each package's ``__init__.py`` names it, and no
    module but the CLI's face lives directly in src/crucible (issue 45: at most five)."""
    result = _graph()
    assert result["unlayered"] == [], 'give each package LAYER = "..." in its __init__.py and say so in CONTRIBUTING.md'
    assert result["layer_said_twice"] == [], "a registered package's floor is its FAMILY's layer, not its __init__'s"
    top = sorted(p.name for p in (REPO / "src" / "crucible").glob("*.py"))
    assert len(top) <= 5, top


def test_every_known_case_is_still_there():
    present = set(_graph(frozenset())["module_pairs"])
    stale = sorted(set(KNOWN) - present)
    assert not stale, f"no longer imported, drop them from KNOWN: {stale}"


def _package(root: Path, name: str, layer: str | None) -> Path:
    (root / name).mkdir(parents=True)
    (root / name / "__init__.py").write_text(f"LAYER = {layer!r}\n" if layer else "")
    return root / name


def test_the_check_sees_circles_and_imports_against_the_layering(tmp_path):
    """Not vacuous: a planted circle, a function-level import into a higher layer, a family
    importing another and a package that says no layer are all found, the layer read from the
    folder a module lives in."""
    pkg = tmp_path / "crucible"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    core = _package(pkg, "core", "base")
    dag = _package(pkg, "dag", "framework")
    matbench = _package(pkg, "matbench", "families")
    reactions = _package(pkg, "reactions", "families")
    _package(pkg, "stray", None)
    # a registered package says its floor in its FAMILY (default: families), not in its __init__
    discovery = _package(pkg, "discovery", None)
    (discovery / "workflow.py").write_text('FAMILY = Family(name="discovery", package="crucible.discovery")\n')
    (discovery / "d.py").write_text("from crucible.reactions import c\n")
    llm = _package(pkg, "llm", "families")
    (llm / "workflow.py").write_text('FAMILY = Family(name="llm", layer="services")\n')
    (reactions / "e.py").write_text("from crucible.llm import workflow\n")
    (core / "errors.py").write_text("def f():\n    from crucible.dag.config import x\n")
    (dag / "config.py").write_text("from crucible.core.errors import f\nx = 1\n")
    (matbench / "a.py").write_text("from . import b\n")
    (matbench / "b.py").write_text("from crucible.matbench.a import y\nfrom crucible.reactions import c\n")
    (reactions / "c.py").write_text("from crucible.core import errors\n")
    result = import_graph.analyse(tmp_path)
    assert result["circles"] == [["crucible.core", "crucible.dag"]]
    assert ["crucible.matbench.a", "crucible.matbench.b"] in result["module_circles"]
    pairs = {(i["from"], i["to"]) for i in result["against_layering"]}
    assert pairs == {
        ("crucible.core.errors", "crucible.dag.config"),
        ("crucible.matbench.b", "crucible.reactions.c"),
        ("crucible.discovery.d", "crucible.reactions.c"),
    }
    assert result["unlayered"] == ["crucible.stray"]
    assert result["layer_of"]["crucible.llm"] == "services" and result["layer_said_twice"] == ["crucible.llm"]
    # The same module moved up a floor is no longer against the layering.
    (dag / "errors.py").write_text((core / "errors.py").read_text())
    (core / "errors.py").unlink()
    (dag / "config.py").write_text("x = 1\n")
    (reactions / "c.py").write_text("")
    pairs = {(i["from"], i["to"]) for i in import_graph.analyse(tmp_path)["against_layering"]}
    assert pairs == {("crucible.matbench.b", "crucible.reactions.c"), ("crucible.discovery.d", "crucible.reactions.c")}


def test_no_module_over_500_lines():
    """A module that grows past 500 lines is doing two jobs (issues 30 and 45); split it by what it
    does, never by squeezing lines."""
    root = REPO / "src" / "crucible"
    sizes = {str(p.relative_to(root)): len(p.read_text(encoding="utf-8").splitlines()) for p in root.rglob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 500} == {}
