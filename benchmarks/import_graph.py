"""The import graph of ``src/crucible``, read statically (``ast``, nothing is imported).

Nodes are the packages and top-level modules of ``crucible`` (``crucible.matbench``,
``crucible.dag``, ``crucible.cli``, ...); an edge ``a -> b`` is any import in ``a`` of something in ``b``,
at module level or inside a function (an import that runs late is still a dependency);
imports under ``if TYPE_CHECKING:`` are left out (they never run). Imports by a name held in a
string (``importlib.import_module``, the registries' lazy entries) are invisible here.

Printed:

* nodes and edges, and ``levels``: the longest-path layering (a node that imports nothing of
  crucible is on level 0, any other one level above the highest node it imports; the nodes of
  a circle share one level);
* ``circles``: strongly connected components of more than one node, between the nodes above
  and between modules (``crucible.llm.generate`` <-> ``crucible.llm.openai_backend``);
* ``against the layering``: imports from a lower layer into a higher one (each package's ``LAYER``), with
  the file and line of each (the layers are the ones CONTRIBUTING.md describes).

    python benchmarks/import_graph.py            # the working tree's src/crucible
    python benchmarks/import_graph.py --json     # the same numbers as JSON
    python benchmarks/import_graph.py --src DIR  # another checkout's src/crucible
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = "crucible"

# The layers, lowest first: a module may import its own layer and those below it only. A
# framework or service package says its own in its ``__init__.py`` (``LAYER = "services"``); a
# registered package (crucible.dag.FAMILY_PACKAGES) in its declaration, ``FAMILY = Family(...)``
# in its ``workflow.py`` (``layer=``, "families" unless it says otherwise), so the folder a module
# lives in is its layer; the modules directly in ``src/crucible`` (the CLI, ``__main__``, the run
# summary) are the top, over everything. CONTRIBUTING.md ("Layers") says what each one holds.
LAYER_ORDER = ("base", "framework", "services", "families", "top")
FAMILY_DEFAULT_LAYER = "families"  # crucible.dag.families.Family.layer's default


def _init_layer(package: Path) -> str | None:
    for node in ast.parse((package / "__init__.py").read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["LAYER"]
            and isinstance(node.value, ast.Constant)
            and node.value.value in LAYER_ORDER
        ):
            return node.value.value
    return None


def family_layer(package: Path) -> str | None:
    """The layer a package's ``FAMILY = Family(..., layer=...)`` declares (read by ``ast``), or
    None if it declares no family."""
    workflow = package / "workflow.py"
    if not workflow.is_file():
        return None
    for node in ast.parse(workflow.read_text(encoding="utf-8")).body:
        if (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["FAMILY"]
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == "Family"
        ):
            given = [k.value for k in node.value.keywords if k.arg == "layer"]
            if not given:
                return FAMILY_DEFAULT_LAYER
            return given[0].value if isinstance(given[0], ast.Constant) and given[0].value in LAYER_ORDER else None
    return None


def read_layers(src: Path) -> tuple[dict[str, str], list[str]]:
    """Each node's layer (a package's ``LAYER`` in its ``__init__.py``, or its family declaration's,
    both read by ``ast``, nothing imported; ``top`` for a module directly in the package root; the
    root's own ``__init__`` (``__version__``) is the base), and the packages that say it twice."""
    layers, twice = {ROOT: "base"}, []
    for path in sorted((src / ROOT).iterdir()):
        if path.is_dir() and (path / "__init__.py").is_file():
            said = [layer for layer in (_init_layer(path), family_layer(path)) if layer]
            if said:
                layers[f"{ROOT}.{path.name}"] = said[-1]
            if len(said) > 1:
                twice.append(f"{ROOT}.{path.name}")
        elif path.suffix == ".py" and path.name != "__init__.py":
            layers[f"{ROOT}.{path.stem}"] = "top"
    return layers, twice


# The one layer whose members may not import each other (each family stands alone).
SIDE_BY_SIDE = "families"


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted
    target: str  # imported module, dotted
    path: str
    line: int


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = node.test
            name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
            if name == "TYPE_CHECKING":
                for child in node.body:
                    lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _resolve(base: str, modules: set[str]) -> str | None:
    """The longest existing module that ``base`` names or lies in (``a.b.func`` -> ``a.b``)."""
    parts = base.split(".")
    while parts:
        name = ".".join(parts)
        if name in modules:
            return name
        parts.pop()
    return None


def read_imports(src: Path) -> tuple[set[str], list[Import]]:
    files = sorted((src / ROOT).rglob("*.py"))
    modules = {module_name(f, src) for f in files}
    imports: list[Import] = []
    for f in files:
        source = module_name(f, src)
        is_package = f.name == "__init__.py"
        tree = ast.parse(f.read_text(encoding="utf-8"), filename=str(f))
        skipped = _type_checking_lines(tree)
        rel = str(f.relative_to(src.parent))
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skipped:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    package = source.split(".") if is_package else source.split(".")[:-1]
                    package = package[: len(package) - (node.level - 1)]
                    base = ".".join(package + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                # ``from a import b`` imports the module ``a.b`` when there is one, else a name of ``a``.
                targets = [f"{base}.{alias.name}" for alias in node.names]
            for target in targets:
                if target.split(".")[0] != ROOT:
                    continue
                resolved = _resolve(target, modules)
                if resolved is not None and resolved != source:
                    imports.append(Import(source, resolved, rel, node.lineno))
    return modules, imports


def node_of(module: str) -> str:
    """``crucible.dag.config`` -> ``crucible.dag``; ``crucible.cli`` stays."""
    return ".".join(module.split(".")[:2])


def strongly_connected(nodes: set[str], edges: set[tuple[str, str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components sorted, each sorted."""
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in sorted(edges):
        succ[a].append(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for start in sorted(nodes):
        if start in index:
            continue
        work = [(start, iter(succ[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(succ[child])))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                components.append(sorted(component))
    return sorted(components)


def levels(nodes: set[str], edges: set[tuple[str, str]]) -> dict[str, int]:
    """Longest-path layering of the graph with each circle taken as one node."""
    component_of: dict[str, int] = {}
    for i, component in enumerate(strongly_connected(nodes, edges)):
        for member in component:
            component_of[member] = i
    succ: dict[int, set[int]] = {c: set() for c in component_of.values()}
    for a, b in edges:
        if component_of[a] != component_of[b]:
            succ[component_of[a]].add(component_of[b])
    level: dict[int, int] = {}

    def visit(c: int) -> int:
        if c not in level:
            level[c] = 1 + max((visit(d) for d in succ[c]), default=-1)
        return level[c]

    sys.setrecursionlimit(max(1000, 4 * len(succ)))
    return {n: visit(component_of[n]) for n in sorted(nodes)}


def against_layering(imports: list[Import], layers: dict[str, str]) -> list[Import]:
    """Imports into a higher layer, or from one family into another."""

    def layer_of(node: str) -> tuple[int, str] | None:
        return (LAYER_ORDER.index(layers[node]), layers[node]) if node in layers else None

    found = []
    for imp in imports:
        a, b = node_of(imp.source), node_of(imp.target)
        if a == b:
            continue
        la, lb = layer_of(a), layer_of(b)
        if la is None or lb is None:
            continue  # reported as unlayered
        if lb[0] > la[0] or (la == lb and la[1] == SIDE_BY_SIDE):
            found.append(imp)
    return sorted(set(found), key=lambda i: (i.path, i.line, i.target))


def analyse(src: Path, left_out: set[tuple[str, str]] = frozenset()) -> dict:
    """The numbers, over every import but those of ``left_out`` ((importing, imported) module
    pairs: the tests' list of known cases, each with the work that removes it)."""
    modules, imports = read_imports(src)
    layers, twice = read_layers(src)
    imports = [i for i in imports if (i.source, i.target) not in left_out]
    nodes = {node_of(m) for m in modules}
    node_edges = {(node_of(i.source), node_of(i.target)) for i in imports}
    node_edges = {(a, b) for a, b in node_edges if a != b}
    module_edges = {(i.source, i.target) for i in imports}
    node_levels = levels(nodes, node_edges)
    return {
        "nodes": len(nodes),
        "modules": len(modules),
        "edges": len(node_edges),
        "module_edges": len(module_edges),
        "levels": 1 + max(node_levels.values()),
        "level_of": node_levels,
        "circles": [c for c in strongly_connected(nodes, node_edges) if len(c) > 1],
        "module_circles": [c for c in strongly_connected(modules, module_edges) if len(c) > 1],
        "against_layering": [
            {"path": i.path, "line": i.line, "from": i.source, "to": i.target}
            for i in against_layering(imports, layers)
        ],
        "unlayered": sorted(n for n in nodes if n not in layers),
        "layer_said_twice": twice,
        "layer_of": {n: layers[n] for n in sorted(nodes) if n in layers},
        "module_pairs": sorted({(i.source, i.target) for i in imports}),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=Path(__file__).resolve().parents[1] / "src")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    args = parser.parse_args(argv)
    result = analyse(args.src)
    if args.json:
        del result["module_pairs"]
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    print(
        f"{result['nodes']} packages and top-level modules ({result['modules']} modules), "
        f"{result['edges']} import edges ({result['module_edges']} between modules), "
        f"{result['levels']} levels"
    )
    by_level: dict[int, list[str]] = {}
    for node, level in result["level_of"].items():
        by_level.setdefault(level, []).append(node)
    for level in sorted(by_level):
        print(f"  level {level}: {' '.join(sorted(by_level[level]))}")
    print(f"circles between nodes: {len(result['circles'])}")
    for circle in result["circles"]:
        print("  " + " <-> ".join(circle))
    print(f"circles between modules: {len(result['module_circles'])}")
    for circle in result["module_circles"]:
        print("  " + " <-> ".join(circle))
    print(f"imports against the layering: {len(result['against_layering'])}")
    for imp in result["against_layering"]:
        print(f"  {imp['path']}:{imp['line']}: {imp['from']} -> {imp['to']}")
    if result["unlayered"]:
        print(f"nodes in no layer (give each package a LAYER in its __init__.py): {' '.join(result['unlayered'])}")
    if result["layer_said_twice"]:
        print(f"layer said in __init__.py and FAMILY both: {' '.join(result['layer_said_twice'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
