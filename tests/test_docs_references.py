"""Every repository path, module name, config key and ``crucible`` command that the docs quote in
backticks (README.md, CONTRIBUTING.md, docs/*.md) exists or parses, so that a renamed module, a
moved file or a dropped option shows up here instead of in a newcomer's shell.

What counts, in an inline code span (fenced blocks are examples, not references):
- ``crucible <group> <verb> [--option ...]``: the group and verb exist and every ``--option`` is one
  of that command's (parsers built in-process from the declarations, once per group);
- ``crucible.x.y[.attr]`` (also ``x.y:attr``, a leading ``@``, a trailing call): the module resolves
  (importlib.util.find_spec, nothing imported) and each attribute is defined in its source;
- a path with a ``/``: it exists under the repository root, ``src/`` or ``src/crucible/`` (a
  pattern, with ``{...}``, ``<...>`` or ``*``, matches at least one file there), or it is an output
  (under results/, resources/, logs/, benchmarks/runs/), a role of config/sources.yaml, or the
  template family ``foo`` of CONTRIBUTING.md (read as ``matbench``);
- ``<section>.<key>...`` for a config section: the keys exist in the assembled schema;
- a word shaped like a rule name (``verb_noun`` whose verb begins a rule of workflow/rules/, such
  as ``predict_matbench_neural``): a rule of that name exists, unless the word is a config key.
"""

from __future__ import annotations

import ast
import functools
import glob
import importlib.util
import re
import shlex
from pathlib import Path

import pytest

from crucible.dag.config import schema
from crucible.sources.pins import roles
from crucible.stages.groups import GROUPS

REPO = Path(__file__).resolve().parents[1]
BASES = (REPO, REPO / "src", REPO / "src" / "crucible")
OUTPUT_ROOTS = ("results/", "resources/", "logs/", "benchmarks/runs/", ".snakemake/")
# Spans with a "/" that are neither paths nor roles, each with what it is.
NOT_PATHS = {
    "matbench/model/gbm-magpie": "a key of the name book (results/.identity/names.json)",
    "report/report.html": "a file inside the report's zip (results/report.zip)",
    "opencompass/datasets/mp20/mp20.py": "a file of the peer, OpenCompass",
}
# Words shaped like a rule name that are something else.
NOT_RULES = {
    "predict_proba": "scikit-learn's classifier method",
    "generate_s": "a timing field of the crystal generation sidecar",
}
FENCE = re.compile(r"^ {0,3}```.*?^ {0,3}```", re.S | re.M)
SPAN = re.compile(r"`([^`]+)`")
MODULE = re.compile(r"^@?(crucible(?:\.[A-Za-z_]\w*)+)(?::([A-Za-z_][\w.]*))?(?:\(.*\))?$")
PLACEHOLDER = re.compile(r"\{[^}]*\}|<[^>]*>|\*+")


def doc_files() -> list[Path]:
    return [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))]


def code_spans(text: str) -> list[str]:
    """The inline code spans of a markdown text, whitespace (a span may wrap) made single."""
    return [" ".join(m.group(1).split()) for m in SPAN.finditer(FENCE.sub("", text))]


@functools.lru_cache(maxsize=None)
def command_options(group: str) -> dict[str, frozenset[str]]:
    """Each verb of a group and the option strings of its parser."""
    from crucible.cli import group_parser

    parser = group_parser(group)
    sub = next(a for a in parser._actions if a.dest == "command")
    return {
        verb: frozenset(s for action in p._actions for s in action.option_strings) for verb, p in sub.choices.items()
    }


def check_command(span: str) -> str | None:
    try:
        words = shlex.split(span)
    except ValueError:
        words = span.split()
    if len(words) < 2 or words[1].startswith("-"):
        return None  # `crucible --help`
    group = words[1]
    if "<" in group:
        return None  # `crucible <group> <verb>`: the form, not a command
    if group not in GROUPS:
        return f"no command group {group!r}"
    verbs = command_options(group)
    if len(words) < 3 or words[2].startswith("-"):
        return None
    verb = words[2]
    if verb == "...":
        return None  # `crucible matbench ...`: the group's commands
    if verb not in verbs:
        return f"crucible {group} has no command {verb!r}"
    for word in words[3:]:
        option = word.split("=", 1)[0]
        if option.startswith("--") and option not in verbs[verb]:
            return f"crucible {group} {verb} has no option {option}"
    return None


@functools.lru_cache(maxsize=None)
def defined_names(origin: str) -> dict[str, set[str]]:
    """Top-level names of a module's source, and each class's own names under ``Class``."""
    tree = ast.parse(Path(origin).read_text(encoding="utf-8"))
    out: dict[str, set[str]] = {"": set()}

    def names_in(body: list[ast.stmt]) -> set[str]:
        found = set()
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.Assign):
                found |= {t.id for t in node.targets if isinstance(t, ast.Name)}
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                found.add(node.target.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                found |= {(a.asname or a.name).split(".")[0] for a in node.names}
        return found

    out[""] = names_in(tree.body)
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            out[node.name] = names_in(node.body)
    return out


def check_module(dotted: str, attrs: str | None) -> str | None:
    parts = dotted.split(".")
    rest: list[str] = []
    spec = None
    while parts:
        try:
            spec = importlib.util.find_spec(".".join(parts))
        except ModuleNotFoundError:
            spec = None
        if spec is not None:
            break
        rest.insert(0, parts.pop())
    if spec is None or len(parts) < 2:
        return f"no module {dotted}"
    rest += attrs.split(".") if attrs else []
    if not rest:
        return None
    if spec.origin is None or not spec.origin.endswith(".py"):
        return f"{'.'.join(parts)} has no source to find {'.'.join(rest)} in"
    names = defined_names(spec.origin)
    if rest[0] not in names[""]:
        return f"{'.'.join(parts)} defines no {rest[0]}"
    if len(rest) > 1 and rest[0] in names and rest[1] not in names[rest[0]]:
        return f"{'.'.join(parts)}.{rest[0]} defines no {rest[1]}"
    return None


@functools.lru_cache(maxsize=None)
def role_patterns() -> tuple[str, ...]:
    return tuple(roles(REPO / "config" / "sources.yaml"))


def is_role(span: str) -> bool:
    pattern = re.compile("^" + PLACEHOLDER.sub("[^/]+", re.escape(span).replace(r"\*", "*")) + "$")
    return any(pattern.match(r) for r in role_patterns())


def expanded(span: str) -> list[str]:
    """A path pattern with its shell braces expanded: ``a.{csv,md}`` -> ``a.csv``, ``a.md``."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", span)
    if m is None:
        return [span]
    return [p for alt in m.group(1).split(",") for p in expanded(span[: m.start()] + alt + span[m.end() :])]


def check_path(span: str) -> str | None:
    path = span.rstrip(".,;:")
    if (
        path.startswith(("/", "~", "$", "--", "...", "{", "<", ".identity"))
        or "://" in path
        or " " in path
        or "=" in path
    ):
        return None  # a user's own file, a URL, an option, a variable, a path inside a folder named before
    if path.startswith("./"):
        path = path[2:]
    if path.startswith(OUTPUT_ROOTS) or path in NOT_PATHS or is_role(path):
        return None
    if re.search(r"(^|/)(test_)?foo(/|_|\.|$)", path):
        path = re.sub(r"(?<![A-Za-z])foo(?![A-Za-z])", "matbench", path)
    for candidate in expanded(path):
        pattern = PLACEHOLDER.sub("*", candidate)
        if not any(glob.glob(str(base / pattern)) for base in BASES):
            return f"no file {candidate}"
    return None


@functools.lru_cache(maxsize=None)
def config_schema() -> dict:
    return schema()


def check_config_key(span: str) -> str | None:
    node = config_schema()
    seen = []
    for key in span.split("."):
        properties = node.get("properties") or {}
        if key not in properties:
            if properties or node.get("additionalProperties") is False:
                return f"config has no key {'.'.join([*seen, key])}"
            return None  # a mapping of names (custom_models.<name>): its keys are the user's
        node = properties[key]
        seen.append(key)
        if node.get("type") == "array" and isinstance(node.get("items"), dict):
            node = node["items"]
    return None


CONFIG_KEY = re.compile(r"^([a-z]+)((?:\.[a-z][a-z0-9_]*)+)$")


RULE_DEFINITION = re.compile(r"^(?:rule|use rule \w+ as) (\w+)", re.M)


@functools.lru_cache(maxsize=None)
def rule_names() -> frozenset[str]:
    files = [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]
    return frozenset(name for f in files for name in RULE_DEFINITION.findall(f.read_text()))


@functools.lru_cache(maxsize=None)
def slurm_group_names() -> frozenset[str]:
    """The SLURM profile's job groups (`groups:` values), which the docs name beside the rules."""
    import yaml

    profile = yaml.safe_load((REPO / "profiles" / "slurm" / "config.yaml").read_text())
    return frozenset(profile["groups"].values())


@functools.lru_cache(maxsize=None)
def config_key_names() -> frozenset[str]:
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            found.update((node.get("properties") or {}).keys())
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(config_schema())
    return frozenset(found)


def check_rule_name(span: str) -> str | None:
    verbs = {name.split("_")[0] for name in rule_names() if "_" in name}
    if not re.fullmatch(r"[a-z]+(_[a-z0-9]+)+", span) or span.split("_")[0] not in verbs:
        return None
    if span in rule_names() or span in config_key_names() or span in slurm_group_names() or span in NOT_RULES:
        return None
    return f"no rule {span}"


def problem(span: str) -> str | None:
    """What is wrong with one code span as a reference, or None (fine, or no reference)."""
    if span.startswith("crucible ") and not span.startswith("crucible (") and "\n" not in span:
        return check_command(span)
    m = MODULE.match(span.split(" ")[0].rstrip(",;"))
    if m:
        return check_module(m.group(1), m.group(2))
    m = CONFIG_KEY.match(span)
    if m and m.group(1) in config_schema()["properties"]:
        return check_config_key(span)
    if "/" in span and not span.startswith("crucible."):
        return check_path(span)
    return check_rule_name(span)


def references() -> list[tuple[str, str]]:
    return [(f.relative_to(REPO).as_posix(), span) for f in doc_files() for span in code_spans(f.read_text())]


def test_the_docs_exist():
    assert (REPO / "docs" / "architecture.md").is_file()
    assert len(doc_files()) > 10
    assert len(references()) > 500  # the extraction finds the spans at all


def test_every_quoted_reference_exists():
    bad = [f"{where}: `{span}`: {why}" for where, span in references() if (why := problem(span))]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "span, why",
    [
        ("crucible matbench predictt --help", "no command 'predictt'"),
        ("crucible nosuchgroup run", "no command group"),
        ("crucible names record --no-such-option FILE", "no option --no-such-option"),
        ("crucible.mlip.calculators", "defines no calculators"),
        ("crucible.nosuch", "no module"),
        ("crucible.matbench.metrics.NoSuchThing", "defines no NoSuchThing"),
        ("crucible.stages.declaration:NoSuch", "defines no NoSuch"),
        ("src/crucible/no_such_module.py", "no file"),
        ("workflow/rules/nosuch_*.smk", "no file"),
        ("results/tables/x.{csv,md}", None),  # an output
        ("docs/architecture.md", None),
        ("src/crucible/<family>/config.schema.yaml", None),
        ("mlip.custom_potential", "config has no key mlip.custom_potential"),
        ("mlip.custom_potentials", None),  # deprecated, still read
        ("matbench.model_params", None),
        ("matbench.custom_models.my-model.class", None),  # a user's names below
        ("reactions/cernak", None),  # a role
        ("crucible matbench score --task T --model M --out s.json", None),
        ("crucible.report.front_page", None),
        ("crucible.dag.config.schema", None),
        ("predict_matbench_neural", None),
        ("predict_matbench_cpu", "no rule predict_matbench_cpu"),
        ("score_timeout_s", None),  # a config key
    ],
)
def test_a_planted_bad_reference_is_found(span, why):
    found = problem(span)
    if why is None:
        assert found is None, found
    else:
        assert found is not None and why in found, found


def test_a_bad_reference_in_a_page_fails(tmp_path, monkeypatch):
    """The whole check, on a page that quotes one stale module among good references."""
    page = tmp_path / "page.md"
    page.write_text(
        "Run `crucible matbench predict --help`, read `src/crucible/cli.py`.\n\n"
        "```sh\ncrucible nosuch thing   # an example block is not checked\n```\n"
        "The old home was `crucible.mlip.calculators`.\n"
    )
    spans = code_spans(page.read_text())
    assert spans == ["crucible matbench predict --help", "src/crucible/cli.py", "crucible.mlip.calculators"]
    assert [s for s in spans if problem(s)] == ["crucible.mlip.calculators"]
