"""Every YAML file a user gives crucible, read strictly and bounded, in one place.

The workflow's config files (``config/config.yaml`` and each ``--configfile``, checked before
Snakemake merges them), ``config/sources.yaml``, the published tables, prompt templates and the
config files a language-model job reads are all read by :func:`load_yaml`. Beyond PyYAML's safe
loader (which already refuses ``!!python/...`` tags; the refusal here names the file and line):

* bytes: at most :func:`max_bytes` (16 MB, or ``CRUCIBLE_MAX_INPUT_MB`` when set); text: UTF-8,
  a byte that is not is named with its line (:func:`crucible.core.reading.decode`);
* a key given twice in one mapping is refused naming both lines (PyYAML keeps the last one);
  a merge key (``<<: *defaults``) overriding a merged key is YAML's own rule, not a repeat;
* aliases: the document's size *with every alias expanded* is counted on the node graph before
  anything is built (each shared node once, so a "billion laughs" bomb is counted in
  microseconds) and refused past :func:`max_nodes` (50,000: the largest file of ours has under
  700); a mapping or list that contains itself through an alias is refused;
* text that is not valid Unicode (a lone surrogate written as ``"\\ud800"``) is refused naming
  the line.

:func:`check_expanded` bounds an already-built value (a config merged by Snakemake, ``--config``
values) the same way, without expanding it. :func:`check_configfile_args` reads the
``--configfile`` files of a Snakemake command line: the workflow profiles run it while Snakemake
reads them, before Snakemake's own merge of those files (which expands a bomb of mappings for
minutes, before any Snakefile code runs).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Sequence

import yaml

from crucible.core import reading
from crucible.core.errors import ConfigError, CrucibleError

MAX_NODES_ENV = "CRUCIBLE_MAX_YAML_NODES"
DEFAULT_MAX_NODES = 50_000
DEFAULT_MAX_MB = 16
_PYTHON_TAG = "tag:yaml.org,2002:python/"
_MERGE_TAG = "tag:yaml.org,2002:merge"


def max_nodes() -> int:
    """The most nodes (mappings, lists, keys and values) a YAML document may hold, aliases expanded."""
    return reading.env_int(MAX_NODES_ENV, DEFAULT_MAX_NODES)


def max_bytes() -> int:
    if os.environ.get(reading.MAX_BYTES_ENV):
        return reading.max_bytes()
    return DEFAULT_MAX_MB * 2**20


def _line(node_or_mark: Any) -> int:
    mark = getattr(node_or_mark, "start_mark", node_or_mark)
    return mark.line + 1 if mark is not None else 0


class _Refused(yaml.YAMLError):
    def __init__(self, line: int, message: str):
        super().__init__(message)
        self.line, self.message = line, message


def _surrogate(text: str) -> str | None:
    for ch in text:
        if "\ud800" <= ch <= "\udfff":
            return f"\\u{ord(ch):04x}"
    return None


_BASE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class StrictLoader(_BASE):  # type: ignore[misc,valid-type]
    """PyYAML's safe loader that refuses repeated keys and text that is not Unicode."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise _Refused(
                            _line(key_node), f"key {key!r} is given twice in one mapping (first on line {seen[key]})"
                        )
                    seen[key] = _line(key_node)
                except TypeError:  # an unhashable key: the safe loader refuses it itself
                    continue
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_str(self, node: Any) -> str:
        value = self.construct_scalar(node)
        bad = _surrogate(value)
        if bad:
            raise _Refused(_line(node), f"text holds a lone surrogate ({bad}), which is not valid Unicode")
        return value


StrictLoader.add_constructor("tag:yaml.org,2002:str", StrictLoader.construct_yaml_str)


def _expanded_size(root: Any, limit: int) -> int:
    """Nodes of the composed document with aliases expanded, each shared node counted once per
    use but computed once; refuses a node that contains itself, python tags and past ``limit``."""
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise _Refused(_line(node), "a mapping or list that contains itself through an alias")
        if isinstance(node.tag, str) and node.tag.startswith(_PYTHON_TAG):
            tag = "!!" + node.tag[len("tag:yaml.org,2002:") :]
            raise _Refused(_line(node), f"the tag {tag} is not allowed: crucible reads plain YAML data only")
        open_nodes.add(key)
        total = 1
        if isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(v) for v in node.value)
        open_nodes.discard(key)
        if total > limit:
            raise _Refused(
                _line(node),
                f"more than {limit} nodes once its aliases are expanded (an alias bomb?); if that is meant, "
                f"raise the bound with {MAX_NODES_ENV}=<n> in the environment",
            )
        sizes[key] = total
        return total

    return size(root)


def loads_yaml(text: str, where: str) -> Any:
    """One YAML document of ``text`` (``None`` when empty), strictly read; ``where`` names it in errors."""
    loader = StrictLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _expanded_size(node, max_nodes())
        return loader.construct_document(node)
    except _Refused as exc:
        raise ConfigError(f"{where}: line {exc.line}: {exc.message}") from None
    except yaml.MarkedYAMLError as exc:
        line = _line(exc.problem_mark or exc.context_mark)
        problem = exc.problem or str(exc)
        if "could not determine a constructor for the tag" in problem and _PYTHON_TAG in str(exc.problem):
            problem = "a python tag is not allowed: crucible reads plain YAML data only"
        raise ConfigError(f"{where}: line {line}: not valid YAML ({problem})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML ({exc})") from None
    except RecursionError:
        raise ConfigError(f"{where}: YAML nested too deeply") from None
    finally:
        loader.dispose()


def load_yaml(path: str | os.PathLike) -> Any:
    """A user's YAML file, bounded and strictly read (see the module docstring)."""
    try:
        text = reading.read_text(path, max_bytes())
    except CrucibleError as exc:
        raise ConfigError(str(exc)) from None
    return loads_yaml(text, str(path))


def load_mapping(path: str | os.PathLike) -> dict[str, Any]:
    """:func:`load_yaml` of a file that holds a mapping (``{}`` when empty); anything else is
    refused naming the file (a reader's ``doc.get`` on a list was an AttributeError)."""
    doc = load_yaml(path)
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: expected a mapping of keys at the top, got {type(doc).__name__}")
    return doc


def check_config_files(paths: Iterable[str | os.PathLike]) -> None:
    """Each existing config file read strictly: what the Snakefile runs before ``configfile:``
    (Snakemake's own loader takes a repeated key and expands an alias bomb while merging)."""
    for path in paths:
        if Path(path).is_file():
            load_yaml(path)


def check_expanded(value: Any, where: str, limit: int | None = None) -> None:
    """``value`` (a built config) holds at most ``limit`` nodes counted as a tree, shared parts
    once per use: stops at the bound, so a bomb costs ``limit`` steps, never its full size."""
    limit = max_nodes() if limit is None else limit
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if count > limit:
            raise ConfigError(
                f"{where}: more than {limit} keys and values once shared parts are expanded (an alias bomb?); "
                f"if that is meant, raise the bound with {MAX_NODES_ENV}=<n> in the environment"
            )
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)


_CONFIGFILE_OPTIONS = ("--configfile", "--configfiles")


def configfile_args(argv: Sequence[str]) -> list[str]:
    """The files a Snakemake command line gives to ``--configfile``/``--configfiles`` (several
    after one option, up to the next option; ``--configfile=x``), in order."""
    files: list[str] = []
    taking = False
    for arg in argv:
        option, eq, value = arg.partition("=")
        if option in _CONFIGFILE_OPTIONS:
            taking = not eq
            files += [value] if eq else []
        elif arg == "--" or arg.startswith("-"):
            taking = False
        elif taking:
            files.append(arg)
    return files


def check_configfile_args(argv: Sequence[str] | None = None) -> None:
    """The ``--configfile`` files of ``argv`` (default: this process's) read by :func:`load_yaml`;
    a refusal is printed in one line and ends the process with status 1. Run by the workflow
    profiles as Snakemake loads them: Snakemake merges these files before the Snakefile runs, and a
    bomb of nested mappings made that merge run for minutes (ten levels: hours)."""
    import sys

    try:
        check_config_files(configfile_args(sys.argv[1:] if argv is None else argv))
    except ConfigError as exc:
        print(f"crucible: config error: {exc}", file=sys.stderr)
        # SystemExit, not an exception: Snakemake wraps a profile's exceptions in a usage error
        raise SystemExit(1) from None
