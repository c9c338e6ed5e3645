"""crucible.stages.declaration: each command declared once; its parser, its call and its rules' shell lines
follow from the declaration."""

from __future__ import annotations

import argparse
import importlib
import inspect
import re

import pytest

from crucible.cli import GROUPS, main
from crucible.core.errors import ConfigError
from crucible.stages import declaration as stage

from helpers import REPO

DECLARED = {g: stage.stages_of(g) for g, m in GROUPS.items() if hasattr(importlib.import_module(m), "STAGES")}


def test_every_group_declares_its_commands():
    assert set(DECLARED) == set(GROUPS)


@pytest.mark.parametrize("group", sorted(DECLARED))
def test_each_signature_read_from_source_is_the_functions(group):
    """A command's arguments are its function's parameters read from source, without importing
    it: that reading agrees with the imported function's signature (names, order, defaults), and
    a parameter a command does not offer has a default."""
    for declared in DECLARED[group]:
        where = f"crucible {group} {declared.verb}"
        params = inspect.signature(stage.function(declared)).parameters
        read = stage._parameters(declared.run)
        assert [n for n, _, _ in read] == [n for n, p in params.items() if p.kind is not p.VAR_KEYWORD], where
        for name, _, default in read:
            if default is stage.REQUIRED:
                assert params[name].default is inspect.Parameter.empty, (where, name)
            elif default is not stage._NOT_LITERAL:
                assert default == params[name].default, (where, name)
        assert [a.name for a in declared.arguments] == [n for n, _, _ in read if n not in declared.skip], where
        assert all(params[n].default is not inspect.Parameter.empty for n in declared.skip), where


def test_roles_follow_from_the_signature():
    """``out``/``out_<what>``: a file written; annotated InFile: a file read; anything else a param."""
    predict = {a.name: a for a in stage.stages_of("matbench")[3].arguments}
    assert predict["data"].role == predict["element_table"].role == stage.INPUT
    assert predict["out"].role == predict["out_model_dir"].role == stage.OUTPUT
    assert predict["seed"].role == stage.PARAM and predict["seed"].type is int and predict["seed"].default == 0
    assert predict["params"].type is stage.json_value and predict["fold"].many


def _rule_shells(text: str) -> list[str]:
    return re.findall(r"^    shell:\n((?:        .*\n)+)", text, flags=re.M)


def test_no_rule_spells_a_command_by_hand():
    """Every shell line of every rule file is built from a command's declaration."""
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        for body in _rule_shells(path.read_text()):
            assert body.strip().startswith("stage.shell("), f"{path.name} spells a shell line by hand:\n{body}"


def test_shell_line_from_the_declaration():
    line = stage.shell("reactions score", dataset="{wildcards.rxn_dataset:q}", out="{output:q}")
    assert line == (
        "CRUCIBLE_JOB={params.crucible_job:q} crucible reactions score --questions {input.questions:q} "
        "--predictions {input.predictions:q} --out {output:q} --dataset={wildcards.rxn_dataset:q} "
        "--model={params.model:q} 2> {log:q}"
    )
    assert stage.shell("reactions predict", model="x", out="y").startswith(
        "CRUCIBLE_JOB={params.crucible_job:q} OMP_NUM_THREADS={threads} crucible reactions predict"
    )
    # an optional argument the rule leaves out takes its default
    assert "--system-prompt" not in stage.shell("reactions build", system_prompt=None)


@pytest.mark.parametrize(
    "command, sources, message",
    [
        ("reactions score", {"outt": "x"}, "has no argument outt"),
        ("reactions scores", {}, "no command 'crucible reactions scores'"),
        ("reactionz score", {}, "no crucible command group"),
        ("reactions score", {"out": None}, "--out is required"),
    ],
)
def test_shell_line_refuses_what_the_declaration_does_not_have(command, sources, message):
    with pytest.raises(ConfigError, match=message):
        stage.shell(command, **sources)


def test_empty_optional_value_is_its_default_and_lengths_are_checked(tmp_path, capsys):
    out = tmp_path / "q.json"
    # --params= (a rule passing no parameters) is the default; a missing file is one error line
    rc = main(
        [
            "reactions",
            "predict",
            "--model",
            "random",
            "--params=",
            "--data",
            str(tmp_path / "none.parquet"),
            "--card",
            "c.json",
            "--questions",
            "a.json",
            "--out",
            str(out),
        ]
    )
    assert rc == 2 and "no such file" in capsys.readouterr().err
    rc = main(
        [
            "reactions",
            "parse",
            "--model",
            "m",
            "--questions",
            "a.json",
            "b.json",
            "--responses",
            "r.jsonl",
            "--out",
            "x.json",
            "y.json",
        ]
    )
    assert rc == 2 and "--responses and --questions need the same number of paths" in capsys.readouterr().err
    # a JSON argument that is not JSON is argparse's error, naming the option
    with pytest.raises(SystemExit):
        main(
            [
                "reactions",
                "predict",
                "--model",
                "random",
                "--params={",
                "--data",
                "d",
                "--card",
                "c",
                "--questions",
                "a",
                "--out",
                "b",
            ]
        )
    assert "--params: not JSON" in capsys.readouterr().err


def test_a_declaration_that_names_nothing_is_refused():
    def build(*args):  # a declaration is read when its group's parser is built
        stage.configure_parser(argparse.ArgumentParser(), [stage.Stage("x", "x", show, *args)])

    show = "crucible.identity.name_book:show_names"
    with pytest.raises(ValueError, match="undeclared"):
        build(stage.Opt("book", per="b"))
    with pytest.raises(ValueError, match="declared twice"):
        build(stage.Opt("book"), stage.In("book"))
    with pytest.raises(ValueError, match="its function lacks"):
        build(stage.Opt("nook"))
    with pytest.raises(TypeError, match="no setting inputs"):
        stage.Stage("x", "x", show, inputs="book")


def test_no_option_is_spelled_outside_its_declaration():
    """argparse is driven by crucible.stages.declaration alone: no module adds an option by hand, and the
    dispatcher and the declaration layer stay small (the groups' declarations are their help)."""
    root = REPO / "src" / "crucible"
    by_hand = sorted(
        str(p.relative_to(root))
        for p in root.rglob("*.py")
        if "add_argument(" in p.read_text() and str(p.relative_to(root)) not in ("stages/declaration.py", "cli.py")
    )
    assert by_hand == []
    # The dispatcher and the declaration layer stay small; each group's stages.py is its commands'
    # help, and grows by a few lines a command (a new family's file needs no edit here).
    framework = ("cli.py", "stages/declaration.py", "stages/groups.py")
    assert sum(len((root / f).read_text().splitlines()) for f in framework) <= 700
    for group, module in GROUPS.items():
        lines = len((root / (module.replace(".", "/")[9:] + ".py")).read_text().splitlines())
        assert lines <= 15 + 10 * len(stage.stages_of(group)), f"{module}: {lines} lines"


def test_a_download_has_no_identity_and_fixed_counts_and_positionals_render():
    # a download's pin is its identity: its shell line hands it no CRUCIBLE_JOB
    line = stage.shell("sources extract", artifact="{wildcards.artifact:q}", archive="{input:q}")
    assert line.startswith("crucible sources extract --artifact {wildcards.artifact:q} --archive {input:q}")
    # exactly two values after the flag, never "--opt=a b"
    eos = stage.shell("mlip eos", model="m", device=None, volume_range="{params.volume_range}", out="o")
    assert " --volume-range {params.volume_range} " in eos and "--threads={threads}" in eos
    with pytest.raises(SystemExit):
        main(["mlip", "eos", "--model", "emt", "--volume-range", "0.9", "--out", "x.parquet"])
    assert stage.shell("names forget", keys="a b").startswith(
        "CRUCIBLE_JOB={params.crucible_job:q} crucible names forget a b"
    )


def test_names_commands_through_their_declarations(tmp_path, capsys):
    book = tmp_path / "names.json"
    assert main(["names", "show", "--book", str(book)]) == 0
    assert "no names recorded yet" in capsys.readouterr().out
    assert main(["names", "forget", "matbench/model/x", "--book", str(book)]) == 2
    assert main(["names", "record", "--output", str(tmp_path / "none.parquet")]) == 1
    assert "no identity record" in capsys.readouterr().out


PLANTED = '''
import os
from pathlib import Path
from typing import Sequence

from crucible.core.io import InFile


def good(data: InFile, sizes: list[int], pair: tuple[float, float], out: str | os.PathLike, quiet: bool = False,
         params: dict | None = None, note: str | None = None):
    """A command that reads every kind of annotation the declaration knows.

    Args:
        data: the table
        sizes: how many
        pair: two numbers
        out: the file written
        quiet: say nothing
        params: JSON settings
        note: as in :func:`planted_stage.helper`
    """


def helper(note: str = ""):
    """A planted function.

    Args:
        note: a word for the record
    """


def path_typed(data: Path):
    """A planted function.

    Args:
        data: the table
    """


def untyped(data):
    """A planted function.

    Args:
        data: the table
    """


def set_typed(names: set[str]):
    """A planted function.

    Args:
        names: which
    """


def mixed_tuple(pair: tuple[int, str]):
    """A planted function.

    Args:
        pair: a number and a word
    """


def undocumented(data: InFile, seed: int = 0):
    """A planted function.

    Args:
        data: the table
    """


def no_docstring(seed: int = 0):
    pass


def loud(verbose: bool = True):
    """A planted function.

    Args:
        verbose: talk
    """


def starred(*paths: str):
    """A planted function.

    Args:
        paths: files
    """


def borrowed(seed: int = 0):
    """A planted function.

    Args:
        seed: as in :func:`planted_stage.helper`
    """


def outer():
    def nested(seed: int = 0):
        """A planted function.

        Args:
            seed: the seed
        """


imported = Path
'''


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """A module of planted functions beside crucible, read from source like any command's."""
    (tmp_path / "planted_stage.py").write_text(PLANTED)
    monkeypatch.syspath_prepend(str(tmp_path))
    for cached in (stage._function_node, stage._parameters, stage.parameter_help):
        cached.cache_clear()
    yield lambda function, *args, **kw: stage.Stage("x", "x", f"planted_stage:{function}", *args, **kw).arguments
    for cached in (stage._function_node, stage._parameters, stage.parameter_help):
        cached.cache_clear()


def test_what_the_declaration_reads_from_a_signature(planted):
    args = {a.name: a for a in planted("good")}
    assert args["data"].role == stage.INPUT and args["data"].type is None and not args["data"].many
    assert args["sizes"].type is int and args["sizes"].many is True and args["sizes"].required
    assert args["pair"].type is float and args["pair"].many == 2
    assert args["out"].role == stage.OUTPUT
    assert args["quiet"].flag and args["quiet"].default is False
    assert args["params"].type is stage.json_value and args["params"].default is None
    assert stage.parameter_help("planted_stage:good")["note"] == "a word for the record"


@pytest.mark.parametrize(
    "function, parameter, why",
    [
        ("path_typed", "data", "annotation 'Path' is not one"),  # it became a str, silently
        ("untyped", "data", "annotation '\\(none\\)' is not one"),
        ("set_typed", "names", "annotation 'set\\[str\\]' is not one"),
        ("mixed_tuple", "pair", "annotation 'tuple\\[int, str\\]' is not one"),
        ("undocumented", "seed", "has no entry in the docstring's Args: section"),
        ("no_docstring", "seed", "has no entry in the docstring's Args: section"),
        ("loud", "verbose", "its default must be False"),  # a switch that could never be turned off
        ("starred", "paths", "\\*args and \\*\\*kwargs cannot be command options"),
        ("borrowed", "seed", "described 'as in' planted_stage:helper, whose Args: lack it"),
    ],
)
def test_a_signature_the_declaration_does_not_understand_is_refused(planted, function, parameter, why):
    """Refused when the declaration is read, naming the function and the parameter: before, each of
    these became a string option, an option without help, or a KeyError deep in the help."""
    with pytest.raises(stage.DeclarationError, match=f"^planted_stage:{function}: .*parameter {parameter}.*{why}"):
        planted(function)


def test_a_declared_option_needs_no_annotation_or_docstring_entry(planted):
    """What a signature cannot say is declared: the declaration then reads nothing of it."""
    (data,) = planted("untyped", stage.In("data"))
    assert data.role == stage.INPUT
    (seed,) = planted("no_docstring", stage.Opt("seed", "the seed", type=int, default=0))
    assert seed.help == "the seed"
    assert [a.name for a in planted("undocumented", skip=("seed",))] == ["data"]


@pytest.mark.parametrize(
    "function, skip, why",
    [
        ("nested", (), "no top-level function nested"),
        ("imported", (), "no top-level function imported"),
        ("good", ("seeds",), "skips parameter seeds, which the function lacks"),
        ("good", ("data",), "skips parameter data, which has no default to take"),
    ],
)
def test_a_function_or_skip_the_declaration_cannot_read_is_refused(planted, function, skip, why):
    with pytest.raises(stage.DeclarationError, match=f"^planted_stage:{function}: {why}"):
        planted(function, skip=skip)
