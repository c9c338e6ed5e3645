"""Each command of the ``crucible`` CLI declared once.

A :class:`Stage` names the library function a command runs; its arguments (:class:`Arg`) are
that function's parameters, read from its signature and docstring. From that one declaration follow the argparse parser and its help (:func:`configure_parser`), the
call of the function (:func:`run`), and the shell line of the Snakemake rule that runs it
(:func:`shell`). Nothing is spelled twice: a rule names its inputs, outputs and params after the
command's arguments, and passes only what comes from elsewhere (a wildcard, a literal).

This module is imported by every command before it runs, so it imports nothing heavy; a group's
declarations (``crucible/<family>/stages.py``) name their functions by dotted path and the one
asked for is imported alone.
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import json
import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from crucible.core.errors import ConfigError

REQUIRED = object()
# How every rule's shell line begins: the job's identity (crucible.identity.records) in its environment.
JOB_PREFIX = "CRUCIBLE_JOB={params.crucible_job:q} "
INPUT, OUTPUT, PARAM = "input", "output", "param"


def json_value(text: str) -> Any:
    """argparse type of a JSON argument (parameters the rule passes)."""
    from crucible.core.strict_json import unique_keys

    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except ValueError as exc:  # not JSON, or a key given twice
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {text[:80]!r}") from None


@dataclass(frozen=True)
class Arg:
    """One option ``--<name>`` of a command, the keyword argument ``name`` of its function.

    ``role`` says where a rule's value comes from: its input or output of that name, or its param
    of that name (an argument named ``threads`` takes the rule's threads). An optional argument
    given the empty string (``--opt=``) takes its default, so that a rule can pass "none". Its help
    is the function's docstring's (its ``Args:`` section) unless declared here (a text computed
    from the registries).
    """

    name: str
    help: str | None = None
    role: str = PARAM
    type: Callable[[str], Any] | None = None
    default: Any = REQUIRED
    many: bool | int = False  # one or more values after the flag; an int: exactly that many
    repeat: bool = False  # the flag repeated, each with one value
    choices: Sequence[Any] | None = None
    flag: bool = False  # a switch: present or not
    per: str | None = None  # as many values as the argument named here
    positional: bool = False  # given without a flag (a command a person types, never a rule)
    metavar: str | tuple[str, ...] | None = None  # the value's name in --help

    @property
    def option(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED and not self.flag

    def placeholder(self) -> str:
        """What a rule's shell line passes for this argument, unless the rule says otherwise."""
        if self.role == INPUT:
            return f"{{input.{self.name}:q}}"
        if self.role == OUTPUT:
            return f"{{output.{self.name}:q}}"
        if self.name == "threads":
            return "{threads}"
        return f"{{params.{self.name}:q}}"


def In(name: str, help: str | None = None, **kw: Any) -> Arg:
    """A file the command reads (the rule's input of this name)."""
    return Arg(name, help, role=INPUT, **kw)


def Out(name: str, help: str | None = None, **kw: Any) -> Arg:
    """A file the command writes (the rule's output of this name)."""
    return Arg(name, help, role=OUTPUT, **kw)


def Opt(name: str, help: str | None = None, **kw: Any) -> Arg:
    """A setting (the rule's param of this name)."""
    return Arg(name, help, role=PARAM, **kw)


@dataclass(frozen=True, init=False)
class Stage:
    """A command ``crucible <group> <verb>``: it calls ``run`` (``"module:function"``).

    Its arguments are the function's parameters, read from its source (no import): a parameter
    named ``out`` or ``out_<what>`` is a file it writes, one annotated ``InFile`` (crucible.core.io) a
    file it reads, any other a setting; type, number of values and default follow from the annotation and the
    default, help from the docstring; what it cannot read so is refused (:class:`DeclarationError`),
    never guessed. ``args`` (after ``run``) declare only what a signature cannot say (choices,
    a value count ``per`` another argument, a help several commands share); ``skip`` names
    parameters the command does not offer.
    """

    verb: str
    help: str
    run: str  # "module:function"; ".module:function" within the group's package
    args: tuple[Arg, ...] = ()
    skip: tuple[str, ...] = ()
    # groups of arguments of which exactly one is given
    one_of: tuple[tuple[str, ...], ...] = ()
    # OMP_NUM_THREADS={threads} before the command: a library that spawns BLAS threads at import
    omp_threads: bool = False
    # a longer text under the usage line of --help
    description: str | None = None
    # False: its jobs have no identity (a download, whose pin is its identity): no CRUCIBLE_JOB
    identified: bool = True

    def __init__(self, verb: str, help: str, run: str, *args: Arg, **settings: Any):
        values = {"verb": verb, "help": help, "run": run, "args": tuple(settings.pop("args", args))}
        values |= {f.name: settings.pop(f.name, f.default) for f in fields(self)[4:]}
        if settings:
            raise TypeError(f"Stage {verb}: no setting {', '.join(sorted(settings))}")
        for name, value in values.items():
            object.__setattr__(self, name, value)  # frozen

    @property
    def target(self) -> tuple[str, str]:
        module, _, function = self.run.partition(":")
        return module, function

    @functools.cached_property
    def arguments(self) -> tuple[Arg, ...]:
        """Every argument: the signature's, in its order, each replaced by its declaration if any."""
        return _resolve(self)

    def arg(self, name: str) -> Arg:
        for a in self.arguments:
            if a.name == name:
                return a
        raise KeyError(name)


def _resolve(stage: Stage) -> tuple[Arg, ...]:
    declared = {a.name: a for a in stage.args}
    if len(declared) != len(stage.args):
        raise ValueError(f"{stage.verb}: an argument is declared twice: {[a.name for a in stage.args]}")
    every = _parameters(stage.run)
    defaults = {n: d for n, _, d in every}
    for name in stage.skip:
        if name not in defaults:
            raise DeclarationError(f"{stage.run}: skips parameter {name}, which the function lacks")
        if defaults[name] is REQUIRED:
            raise DeclarationError(f"{stage.run}: skips parameter {name}, which has no default to take")
    params = [p for p in every if p[0] not in stage.skip]
    unknown = set(declared) - {p[0] for p in params}
    if unknown:
        raise ValueError(f"{stage.verb}: declares arguments its function lacks: {sorted(unknown)}")
    found = tuple(
        declared.get(name) or _derived(stage, name, annotation, default) for name, annotation, default in params
    )
    # Every option has its help, from the declaration or the docstring: a parameter the docstring
    # forgot would show in --help with no word on what it is.
    helps = parameter_help(stage.run)
    for a in found:
        if a.help is None and a.name not in helps:
            raise DeclarationError(
                f"{stage.run}: parameter {a.name} has no entry in the docstring's Args: section "
                "(nor a help in its declaration)"
            )
    names = {a.name for a in found}
    refers = {a.per for a in found if a.per} | {n for g in stage.one_of for n in g}
    if refers - names:
        raise ValueError(f"{stage.verb}: refers to undeclared arguments {sorted(refers - names)}")
    return found


_NOT_LITERAL = object()  # a default the source does not spell as a literal


class DeclarationError(ValueError):
    """A command's declaration that this module cannot read without guessing: raised when the
    declaration is read (its group's parser or a rule's shell line is built), naming the function
    and the parameter."""


@functools.lru_cache(maxsize=None)
def _function_node(run: str) -> ast.FunctionDef:
    module, _, name = run.partition(":")
    if module.startswith("crucible."):
        path = Path(__file__).parents[1].joinpath(*module.split(".")[1:]).with_suffix(".py")
    else:  # a module beside crucible (a user's): found on the path, still not imported
        import importlib.util

        spec = importlib.util.find_spec(module)
        if spec is None or not spec.origin:
            raise DeclarationError(f"{run}: no module {module}")
        path = Path(spec.origin)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if node is None:
        # Only a top-level ``def`` is read from source: a name imported, assigned, async or nested
        # would need the module imported (torch, pymatgen) to know its parameters.
        raise DeclarationError(f"{run}: no top-level function {name} (a plain `def`) in {path}")
    if node.args.vararg or node.args.kwarg:
        star = node.args.vararg or node.args.kwarg
        raise DeclarationError(f"{run}: parameter {star.arg}: *args and **kwargs cannot be command options")
    return node


@functools.lru_cache(maxsize=None)
def _parameters(run: str) -> tuple[tuple[str, str, Any], ...]:
    """(name, annotation text, default) of each parameter of ``run``'s function, read from the
    module's source: the rules' shell lines are built when Snakemake reads the workflow, which
    must not import torch or pymatgen to do so."""
    a = _function_node(run).args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    pairs = list(zip(positional + a.kwonlyargs, defaults + list(a.kw_defaults)))
    return tuple((p.arg, ast.unparse(p.annotation) if p.annotation else "", _literal(d)) for p, d in pairs)


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return REQUIRED
    try:
        return ast.literal_eval(node)
    except ValueError:
        return _NOT_LITERAL


# The annotations a parameter's option is read from (anything else is refused, never guessed):
# one of these scalars, or a sequence of them, or a JSON mapping, each optionally "| None".
# A path is a string on the command line, and so is its value (str | os.PathLike admits it).
_SCALARS: dict[str, Callable[[str], Any] | None] = {
    "str": None,
    "str | os.PathLike": None,
    "InFile": None,
    "int": int,
    "float": float,
}
_SEQUENCES = ("list", "Sequence", "Iterable", "tuple")
_MAPPINGS = ("dict", "Mapping")


def _union(node: ast.expr) -> list[str]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _union(node.left) + _union(node.right)
    return [ast.unparse(node)]


def _kind(annotation: str) -> tuple[str, Callable[[str], Any] | None, bool | int] | None:
    """(scalar, argparse type, many) of an annotation the options are read from, or None."""
    # "X | None": whether it is optional is the default's to say
    text = " | ".join(m for m in _union(ast.parse(annotation or "None", mode="eval").body) if m != "None")
    if text in _SCALARS or text == "bool":
        return text, _SCALARS.get(text), False
    node = ast.parse(text or "None", mode="eval").body
    outer = node.value if isinstance(node, ast.Subscript) else node
    name = outer.id if isinstance(outer, ast.Name) else None
    if name in _MAPPINGS:
        return "dict", json_value, False
    if name not in _SEQUENCES or node is outer:
        return None
    items = [ast.unparse(e) for e in (node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice])]
    many: bool | int = True
    if name == "tuple":
        items, many = (items[:-1], True) if items[-1] == "..." else (items, len(items))
    # one type for every value, or the command line could not say which value is which
    return (items[0], _SCALARS[items[0]], many) if len(set(items)) == 1 and items[0] in _SCALARS else None


def _derived(stage: Stage, name: str, annotation: str, default: Any) -> Arg:
    if default is _NOT_LITERAL:
        raise DeclarationError(f"{stage.run}: parameter {name}: its default is not a literal; declare it")
    kind = _kind(annotation)
    if kind is None:
        raise DeclarationError(
            f"{stage.run}: parameter {name}: annotation {annotation or '(none)'!r} is not one a command "
            f"option is read from ({', '.join(_SCALARS)}, bool, a list/Sequence/Iterable/tuple of one of "
            "those, dict or Mapping, each optionally | None); annotate it so, or declare it (Opt/In/Out)"
        )
    scalar, convert, many = kind
    role = OUTPUT if name == "out" or name.startswith("out_") else INPUT if scalar == "InFile" else PARAM
    if scalar == "bool":
        if default is not False:
            raise DeclarationError(
                f"{stage.run}: parameter {name}: a bool is a switch (present or not), so its default must be False"
            )
        return Arg(name, role=role, flag=True, default=default)
    return Arg(name, role=role, type=convert, default=default, many=many)


def _add_argument(parser: argparse.ArgumentParser | Any, arg: Arg, required: bool) -> None:
    kw: dict[str, Any] = {"help": arg.help, "dest": arg.name}
    if arg.metavar is not None:
        kw["metavar"] = arg.metavar
    if arg.positional:
        del kw["dest"]  # argparse names a positional by its dest
        parser.add_argument(arg.name, nargs="+" if arg.many else None, **kw)
        return
    if arg.flag:
        parser.add_argument(arg.option, action="store_true", **kw)
        return
    if arg.repeat:
        kw["action"] = "append"
    elif arg.many is not True and arg.many:
        kw["nargs"] = arg.many
    elif arg.many:
        kw["nargs"] = "+" if arg.required else "*"
    if arg.type is not None:
        kw["type"] = _or_empty(arg.type, arg.default) if not arg.required else arg.type
    elif not arg.required:
        kw["type"] = _or_empty(str, arg.default)
    if arg.choices is not None:
        kw["choices"] = _WithEmpty(arg.choices) if not arg.required else arg.choices
    if required:
        kw["required"] = True
    elif arg.default is not REQUIRED:
        kw["default"] = arg.default
    parser.add_argument(arg.option, **kw)


class _Default:
    """The value of an optional argument given as '' (a rule passing "none")."""

    def __init__(self, value: Any):
        self.value = value

    def __repr__(self) -> str:  # argparse prints it in "invalid choice" messages
        return repr("")


def _or_empty(convert: Callable[[str], Any], default: Any) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        return _Default(default) if text == "" else convert(text)

    parse.__name__ = getattr(convert, "__name__", "value")  # argparse names the type in its errors
    return parse


class _WithEmpty(list):
    """Choices that also admit '' (an optional argument's default)."""

    def __contains__(self, value: Any) -> bool:
        return isinstance(value, _Default) or super().__contains__(value)


@functools.lru_cache(maxsize=None)
def parameter_help(run: str) -> dict[str, str]:
    """The texts of the parameters of ``run``'s function (``"module:function"``) in its docstring's
    ``Args:`` section (Google style: ``name: text``, continued on deeper-indented lines), read from
    source; ``name: as in :func:`module.function``` is that function's text (a parameter several
    functions share is described once)."""
    helps: dict[str, str] = {}
    section = False
    name = None
    for line in (ast.get_docstring(_function_node(run)) or "").splitlines():
        if line.strip() == "Args:":
            section = True
            continue
        if not section or not line.strip():
            continue
        if not line.startswith("    "):
            break  # the section ended
        entry = re.match(r"    (\w+): (.*)", line)
        if entry:
            name = entry.group(1)
            helps[name] = entry.group(2).strip()
        elif name is not None:
            helps[name] += " " + line.strip()
    for name, text in helps.items():
        shared = re.fullmatch(r"as in :func:`([\w.]+)\.(\w+)`", text)
        if shared:
            other = f"{shared.group(1)}:{shared.group(2)}"
            if name not in parameter_help(other):
                raise DeclarationError(f"{run}: parameter {name} is described 'as in' {other}, whose Args: lack it")
            helps[name] = parameter_help(other)[name]
    return helps


class _StageParser(argparse.ArgumentParser):
    """A command's parser: the help of an argument its declaration leaves out is read from the
    function's docstring (in its source) when help is printed, so that help imports nothing."""

    def format_help(self) -> str:
        stage = self._defaults.get("stage")
        if stage is not None:
            helps = parameter_help(stage.run)
            for action in self._actions:
                if action.help is None and action.dest in helps:
                    # argparse %-formats help: only %(default)s / %(default)r stay placeholders
                    action.help = re.sub(r"%(?!\(default\)[sr])", "%%", helps[action.dest])
        return super().format_help()


def configure_parser(parser: argparse.ArgumentParser, stages: Iterable[Stage], only: str | None = None) -> None:
    """Add one subcommand per stage to ``parser`` (a group's ``crucible <group>`` parser). Given
    ``only`` (the verb a job runs), the other subcommands get no arguments: each stage's arguments
    are read from its function's source, and a job should not pay for its group's every command."""
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_StageParser)
    for stage in stages:
        p = sub.add_parser(stage.verb, help=stage.help, description=stage.description or stage.help)
        p.set_defaults(stage=stage)
        if only is not None and stage.verb != only:
            continue
        grouped = {n: g for g in stage.one_of for n in g}
        groups: dict[tuple[str, ...], Any] = {}
        for arg in stage.arguments:
            if arg.name in grouped:
                g = grouped[arg.name]
                if g not in groups:
                    groups[g] = p.add_mutually_exclusive_group(required=True)
                _add_argument(groups[g], arg, required=False)
            else:
                _add_argument(p, arg, required=arg.required)


def arguments(stage: Stage, namespace: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``stage``'s function from parsed options; lists given ``per``
    another argument must have as many values as that one."""
    kwargs = {}
    for arg in stage.arguments:
        value = getattr(namespace, arg.name)
        if isinstance(value, list):
            value = [v for v in value if not isinstance(v, _Default)]
        elif isinstance(value, _Default):
            value = value.value
        kwargs[arg.name] = value
    for arg in stage.arguments:
        if arg.per and kwargs[arg.name] is not None and kwargs[arg.per] is not None:
            if len(kwargs[arg.name]) != len(kwargs[arg.per]):
                raise ConfigError(f"{arg.option} and {stage.arg(arg.per).option} need the same number of paths")
    return kwargs


def function(stage: Stage) -> Callable[..., Any]:
    module, name = stage.target
    return getattr(importlib.import_module(module), name)


def run(stage: Stage, namespace: argparse.Namespace) -> int:
    """Call ``stage``'s function. An int it returns is the exit status; anything else it returns
    (a library function's result: a card, a table) is success."""
    result = function(stage)(**arguments(stage, namespace))
    return result if isinstance(result, int) and not isinstance(result, bool) else 0


@functools.lru_cache(maxsize=None)
def stages_of(group: str) -> tuple[Stage, ...]:
    """The declared stages of a command group (``crucible.stages.groups.GROUPS``), each ``run`` whole."""
    from crucible.stages.groups import GROUPS

    if group not in GROUPS:
        raise ConfigError(f"no crucible command group {group!r}")
    module = GROUPS[group]
    package = module.rpartition(".")[0]
    return tuple(
        replace(s, run=package + s.run) if s.run.startswith(".") else s for s in importlib.import_module(module).STAGES
    )


def shell(command: str, **sources: str | None) -> str:
    """The shell line of a rule running ``crucible <command>`` ("<group> <verb>"): every argument
    from the rule's input, output or param of its name (see :meth:`Arg.placeholder`), except those
    given here: a template (``task="{wildcards.task}"``) or None (left out: its default)."""
    group, _, verb = command.partition(" ")
    stage = next((s for s in stages_of(group) if s.verb == verb), None)
    if stage is None:
        raise ConfigError(f"no command 'crucible {command}'")
    unknown = sorted(set(sources) - {a.name for a in stage.arguments})
    if unknown:
        raise ConfigError(f"crucible {command} has no argument {', '.join(unknown)}")
    words = [JOB_PREFIX.strip()] if stage.identified else []
    if stage.omp_threads:
        words.append("OMP_NUM_THREADS={threads}")
    words += ["crucible", group, verb]
    for arg in stage.arguments:
        value = sources.get(arg.name, "" if arg.flag else arg.placeholder())
        if value is None or value == "":
            if arg.required:
                raise ConfigError(f"crucible {command}: {arg.option} is required")
            continue
        if arg.repeat or arg.flag or arg.positional:
            words.append(value)
        elif arg.required or arg.many:
            words.append(f"{arg.option} {value}")
        else:  # "--opt=" reads as the empty string (its default) where the rule passes nothing
            words.append(f"{arg.option}={value}")
    return " ".join(words) + " 2> {log:q}"
