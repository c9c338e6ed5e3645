"""crucible.stage: each command declared once; its parser, its call and its rules' shell lines
follow from the declaration."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from crucible import stage
from crucible.cli import GROUPS, main
from crucible.errors import ConfigError

from helpers import REPO

DECLARED = {
    g: importlib.import_module(m).STAGES
    for g, (m, _) in GROUPS.items()
    if hasattr(importlib.import_module(m), "STAGES")
}


def test_every_group_declares_its_commands():
    assert set(DECLARED) >= {"reactions", "mlip", "features", "llm", "sources", "names"}


@pytest.mark.parametrize("group", sorted(DECLARED))
def test_each_declaration_agrees_with_its_function(group):
    """A declared argument is a parameter of the function it runs, and the function takes no
    required parameter the declaration leaves out: the two cannot drift apart."""
    for declared in DECLARED[group]:
        assert stage.signature_mismatch(declared) == [], f"crucible {group} {declared.verb}"


def _rule_shells(text: str) -> list[str]:
    return re.findall(r"^    shell:\n((?:        .*\n)+)", text, flags=re.M)


# the rule file of each group whose jobs the workflow runs (names: a person's commands only)
RULE_FILES = {"sources": "fetch.smk", "names": None}


def test_converted_rule_files_spell_no_command_by_hand():
    """Every rule of a family whose commands are declared builds its shell line from them."""
    for group in DECLARED:
        rule_file = RULE_FILES.get(group, f"{group}.smk")
        if rule_file is None:
            continue
        text = (REPO / "workflow" / "rules" / rule_file).read_text()
        shells = _rule_shells(text)
        assert shells, group
        for body in shells:
            assert body.strip().startswith("stage.shell("), f"{group}.smk spells a shell line by hand:\n{body}"


def test_shell_line_from_the_declaration():
    line = stage.shell("reactions score", dataset="{wildcards.rxn_dataset:q}", out="{output:q}")
    assert line == (
        "CRUCIBLE_JOB={params.crucible_job:q} crucible reactions score --dataset={wildcards.rxn_dataset:q} "
        "--model={params.model:q} --questions {input.questions:q} --predictions {input.predictions:q} "
        "--out {output:q} 2> {log:q}"
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
    with pytest.raises(ValueError, match="undeclared"):
        stage.Stage("x", "x", "m:f", (stage.Opt("a", "a", per="b"),))
    with pytest.raises(ValueError, match="declared twice"):
        stage.Stage("x", "x", "m:f", (stage.Opt("a", "a"), stage.In("a", "a")))


CLI_FILES = ["cli.py", "stage.py", "*_stages.py", "*/cli*.py", "*/stages.py"]


def test_cli_code_stays_small():
    """The CLI is declarations, not code: all of it (the dispatcher, the declaration layer and
    every group's declarations) stays within 1,000 lines."""
    root = REPO / "src" / "crucible"
    files = sorted({p for pattern in CLI_FILES for p in root.glob(pattern)})
    lines = {str(p.relative_to(root)): len(p.read_text().splitlines()) for p in files}
    unconverted = sorted(p for p in lines if "/" in p and Path(p).name.startswith("cli"))
    if unconverted:
        pytest.skip(f"groups still to declare: {unconverted}")
    assert sum(lines.values()) <= 1000, lines


def test_a_download_has_no_identity_and_fixed_counts_and_positionals_render():
    # a download's pin is its identity: its shell line hands it no CRUCIBLE_JOB
    line = stage.shell("sources extract", artifact="{wildcards.artifact:q}", archive="{input:q}")
    assert line.startswith("crucible sources extract --artifact {wildcards.artifact:q} --sources={params.sources:q}")
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
