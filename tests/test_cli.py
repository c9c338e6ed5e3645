"""The ``crucible`` command: every group answers --help, errors are one clean line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crucible.cli import GROUPS, group_parser


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_group_has_help(group, venv_env):
    proc = subprocess.run(
        [sys.executable, "-m", "crucible", group, "--help"], env=venv_env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("usage: crucible")
    # help is not a command that ran: no "command: ..." log line before or after it (issue 45)
    assert "INFO" not in proc.stderr + proc.stdout, proc.stderr


def test_unknown_task_is_a_clean_error(tmp_path, venv_env):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "crucible",
            "matbench",
            "predict",
            "--model",
            "dummy",
            "--task",
            "matbench_steel",
            "--fold",
            "0",
            "--data",
            "d",
            "--card",
            "c",
            "--folds",
            "f",
            "--out",
            str(tmp_path / "o.parquet"),
        ],
        env=venv_env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "unknown Matbench task 'matbench_steel'" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_input_file_is_named(tmp_path, venv_env):
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "crucible",
            "matbench",
            "folds",
            "--task",
            "matbench_steels",
            "--data",
            str(tmp_path / "missing.parquet"),
            "--card",
            "c",
            "--validation",
            "v",
            "--out",
            str(tmp_path / "o.parquet"),
        ],
        env=venv_env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "missing.parquet" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    "folds, outs, message",
    [
        (["0", "1"], ["a.parquet"], "one distinct fold per output file"),
        (["0", "0"], ["a.parquet", "b.parquet"], "one distinct fold per output file"),
    ],
)
def test_predict_needs_one_output_per_distinct_fold(tmp_path, venv_env, folds, outs, message):
    """A per-task job passes --fold 0 1 2 3 4 --out f0 .. f4: a mismatch is a clean error, nothing written."""
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "crucible",
            "matbench",
            "predict",
            "--model",
            "dummy",
            "--task",
            "matbench_steels",
            "--fold",
            *folds,
            "--data",
            "d",
            "--card",
            "c",
            "--folds",
            "f",
            "--out",
            *(str(tmp_path / o) for o in outs),
        ],
        env=venv_env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert not list(tmp_path.iterdir())


def test_predict_help_lists_models_and_tasks(venv_env):
    proc = subprocess.run(
        [sys.executable, "-m", "crucible", "matbench", "predict", "--help"],
        env={**venv_env, "COLUMNS": "250"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0
    text = " ".join(proc.stdout.split())
    for name in (
        "dummy",
        "rf-magpie",
        "gbm-magpie",
        "comp-transformer",
        "matbench_steels",
        "matbench_mp_e_form",
        "custom-models",
    ):
        assert name in text, name
    assert "--model MODEL built-in" in text


def test_a_file_where_an_output_folder_goes_is_one_line(tmp_path, venv_env):
    from crucible.core.io import write_json, write_parquet

    from helpers import clean_task

    data, card, _ = clean_task("matbench_steels")
    write_json(card, tmp_path / "matbench_steels.json")
    write_parquet(data, tmp_path / "matbench_steels.parquet")
    (tmp_path / "tables").write_text("not a folder")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "crucible",
            "matbench",
            "tasks-table",
            "--cards",
            str(tmp_path / "matbench_steels.json"),
            "--data",
            str(tmp_path / "matbench_steels.parquet"),
            "--out-csv",
            str(tmp_path / "tables" / "t.csv"),
            "--out-md",
            str(tmp_path / "t.md"),
            "--out-overlap-csv",
            str(tmp_path / "o.csv"),
            "--out-overlap-md",
            str(tmp_path / "o.md"),
        ],
        env=venv_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "tables" in proc.stderr


def _options_without_help(parser, prog):
    """(command, option) of every option, and every subcommand, that --help prints without a text."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                if not helps.get(name):
                    yield f"{prog} {name}", "(the command itself)"
                yield from _options_without_help(sub, f"{prog} {name}")
        elif not isinstance(action, argparse._HelpAction) and action.help in (None, "", argparse.SUPPRESS):
            yield prog, "/".join(action.option_strings) or action.dest


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_every_option_of_every_command_has_help(group):
    """`crucible <group> <command> --help` explains every option: a new command or option
    without a help text fails here."""
    import argparse

    parser = argparse.ArgumentParser(prog=f"crucible {group}")
    group_parser(group, parser)

    # every --help prints (a lone % in a help text, argparse's format string, would crash it); the
    # help a declaration leaves out is read from its function's docstring as help is printed
    def parsers(p):
        yield p
        for action in p._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from parsers(sub)

    assert all(p.format_help() for p in parsers(parser))
    missing = list(_options_without_help(parser, f"crucible {group}"))
    assert missing == []
    # the walk reaches the commands: every group has at least one with options
    assert any(isinstance(a, argparse._SubParsersAction) for a in parser._actions)


def _run_with_rusage(argv: list[str], env: dict) -> tuple[int, float]:
    """Exit status and CPU seconds (user + system) of ``python -m crucible ARGV``, from the kernel."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "crucible", *argv], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    return os.waitstatus_to_exitcode(status), usage.ru_utime + usage.ru_stime


def test_cpu_log_records_each_commands_whole_cpu_time(tmp_path, venv_env):
    # What benchmarks/bench_cli_startup.py --runs sums instead of Snakemake's sampled cpu_time.
    log = tmp_path / "job_cpu.jsonl"
    env = {**venv_env, "CRUCIBLE_CPU_LOG": str(log)}
    rc_ok, cpu_ok = _run_with_rusage(["-v", "features", "version"], env)
    rc_bad, _ = _run_with_rusage(["matbench", "score", "--no-such-option"], env)
    assert (rc_ok, rc_bad) == (0, 2)
    first, second = (json.loads(line) for line in log.read_text().splitlines())
    assert first["command"] == "features version" and first["argv"] == ["features", "version"]
    assert first["returncode"] == 0 and second["returncode"] == 2
    # the interpreter's start-up and numpy's import are included: only the tear-down comes after
    assert 0.75 * cpu_ok <= first["cpu_s"] <= cpu_ok + 0.01


def test_no_cpu_log_without_the_variable(tmp_path, venv_env):
    env = {k: v for k, v in venv_env.items() if k != "CRUCIBLE_CPU_LOG"}
    proc = subprocess.run(
        [sys.executable, "-m", "crucible", "names", "show", "--help"], env=env, cwd=tmp_path, capture_output=True
    )
    assert proc.returncode == 0 and list(tmp_path.iterdir()) == []


def test_a_cpu_log_that_cannot_be_written_stops_the_command_in_one_line(tmp_path, venv_env):
    # a folder where the file goes: the command stops before its work, naming the variable
    env = {**venv_env, "CRUCIBLE_CPU_LOG": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "crucible", "features", "version"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert f"CRUCIBLE_CPU_LOG={tmp_path}: cannot append to it (Is a directory)" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("kind", ["fifo", "full"])
def test_a_cpu_log_on_a_fifo_without_reader_or_a_full_device_stops_the_command_before_its_work(
    tmp_path, venv_env, kind
):
    # a fifo nobody reads hung the command in open(); /dev/full let it do its work, then exit 2
    if kind == "fifo":
        path = tmp_path / "log.fifo"
        os.mkfifo(path)
        why = "a fifo that nobody reads"
    else:
        path = Path("/dev/full")
        if not path.exists():
            pytest.skip("no /dev/full here")
        why = "No space left on device"
    env = {**venv_env, "CRUCIBLE_CPU_LOG": str(path)}
    # timeout: a hang guard only
    proc = subprocess.run(
        [sys.executable, "-m", "crucible", "features", "version"], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 2 and proc.stdout == "", proc  # the version is the command's work
    assert proc.stderr.strip() == f"crucible: error: CRUCIBLE_CPU_LOG={path}: cannot append to it ({why})"
