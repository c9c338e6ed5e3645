"""crucible.run_summary: the lines a run ends with (the Snakefile's onsuccess/onerror), and the
one-line job messages of crucible.dag.rules."""

from __future__ import annotations

from crucible.dag import rules as wf
from crucible.run_summary import (
    cause_and_fix,
    failed_job_details,
    failed_jobs,
    report_command,
    run_summary,
    snakemake_executable,
)

# What Snakemake 9 writes to its log for a failed job (the format the summary reads).
SNAKEMAKE_LOG = """\
[Tue Dec  1 14:50:01 2026]
Error in rule predict_matbench:
    message: predict_matbench fold=2 model=bad task=matbench_steels
    jobid: 7
    input: results/matbench/data/matbench_steels.parquet
    output: results/matbench/predictions/bad/matbench_steels/fold_2.parquet
    log: logs/matbench/predict/bad/matbench_steels/fold_2.log (check log file(s) for error details)
    shell:
        crucible matbench predict ...
        (command exited with non-zero exit code)
[Tue Dec  1 14:50:02 2026]
Error in rule tabulate_eos:
    jobid: 9
    output: results/tables/mlip_eos.csv
Shutting down, this might take some time.
"""


def _touch(root, *paths):
    for p in paths:
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_text("x")


def test_summary_names_the_runs_tables_and_figures_grouped(tmp_path):
    outputs = [
        "results/tables/matbench_leaderboard.csv",
        "results/tables/matbench_leaderboard.md",
        "results/tables/matbench_leaderboard.tex",
        "results/figures/matbench_scaled_error.png",
        "results/figures/matbench/dummy/matbench_steels.png",
        "results/figures/matbench/dummy/matbench_glass.png",
        "results/matbench/scores/dummy/matbench_steels.json",
        "results/tables/mlip_eos.csv",  # configured but not built by this call
    ]
    _touch(tmp_path, *outputs[:-1])
    _touch(tmp_path, "results/tables/stale_model.csv")  # on disk, not an output of the run
    text = run_summary(outputs, "/x/.snakemake/log/run.log", root=tmp_path)
    assert "crucible: the run is complete" in text
    assert "    results/tables/matbench_leaderboard.{csv,md,tex}" in text
    assert "    results/figures/matbench_scaled_error.png" in text
    assert "    results/figures/matbench/dummy/ (2 files)" in text
    assert "tables (1)" not in text and "tables (3):" in text and "figures (3):" in text
    assert "stale_model" not in text and "scores" not in text
    assert "1 of the config's 8 final outputs are not built" in text
    assert "report: snakemake --report results/report.zip" in text and "is there" not in text
    assert "Snakemake's log: /x/.snakemake/log/run.log" in text and "FAILED" not in text
    _touch(tmp_path, "results/report.zip")
    assert "results/report.zip is there from an earlier call" in run_summary(outputs, None, root=tmp_path)


def test_failed_jobs_are_read_from_snakemakes_log(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(SNAKEMAKE_LOG)
    assert failed_jobs(log) == [
        ("predict_matbench", "logs/matbench/predict/bad/matbench_steels/fold_2.log"),
        ("tabulate_eos", ""),
    ]
    text = run_summary([], log, failed=True, root=tmp_path)
    assert "crucible: the run failed: 2 jobs failed (exit 1); the jobs that do not depend on them ran" in text
    assert "  FAILED predict_matbench: see logs/matbench/predict/bad/matbench_steels/fold_2.log" in text
    assert "  FAILED tabulate_eos\n" in text + "\n"
    assert "tables (0):\n    none" in text
    assert failed_jobs(tmp_path / "absent.log") == [] and failed_jobs(None) == []
    # Snakemake 9 hands the handlers a list of log files
    assert failed_jobs([str(log)]) == failed_jobs(log)
    assert f"Snakemake's log: {log}" in run_summary([], [str(log)], failed=True, root=tmp_path)


def test_a_failed_job_is_named_with_its_family_output_cause_and_fix(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(
        SNAKEMAKE_LOG.replace("predict_matbench", "fetch_artifact", 1)
        .replace("results/matbench/predictions/bad/matbench_steels/fold_2.parquet", "resources/downloads/card.yml")
        .replace("logs/matbench/predict/bad/matbench_steels/fold_2.log", "logs/fetch/card.yml.log")
    )
    job_log = tmp_path / "logs/fetch/card.yml.log"
    job_log.parent.mkdir(parents=True)
    job_log.write_text(
        "2026-12-07 INFO crucible: command: crucible sources fetch ...\n"
        "crucible sources: error: download of artifact 'card' from http://x.invalid/card.yml failed: the host name "
        "does not resolve (not retried). Fix: set discovery.fetch_upstream: false to copy the shipped file\n"
    )
    assert failed_job_details(log)[0].output == "resources/downloads/card.yml"
    text = run_summary(
        ["results/tables/discovery_diatomics.csv", "results/tables/mlip_eos.csv"],
        log,
        failed=True,
        root=tmp_path,
        families={"discovery": ["results/tables/discovery_diatomics.csv"], "mlip": ["results/tables/mlip_eos.csv"]},
        family_of=lambda rule, output: "discovery" if rule == "fetch_artifact" else "mlip",
        report_cmd="/venv/bin/snakemake --report results/report.zip --configfile /my/run.yaml",
    )
    assert "  FAILED family discovery: 1 of its 1 final outputs not built" in text
    assert (
        "  FAILED fetch_artifact: see logs/fetch/card.yml.log\n    family: discovery; output: resources/downloads/card.yml"
        in text
    )
    assert (
        "    cause: download of artifact 'card' from http://x.invalid/card.yml failed: the host name does not " in text
    )
    assert "    fix: set discovery.fetch_upstream: false to copy the shipped file" in text
    assert "  report: /venv/bin/snakemake --report results/report.zip --configfile /my/run.yaml" in text
    # a job whose log has no crucible error line: its last line; a long cause is cut
    job_log.write_text("Traceback ...\nValueError: " + "x" * 1000 + "\n")
    cause, fix = cause_and_fix("logs/fetch/card.yml.log", tmp_path)
    assert cause.startswith("ValueError: xxx") and cause.endswith("…") and len(cause) == 400 and fix == ""
    assert cause_and_fix("logs/absent.log", tmp_path) == ("", "")


def test_the_report_command_is_the_running_snakemake_with_the_runs_config_files(tmp_path):
    script = tmp_path / "venv" / "bin" / "snakemake"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    assert snakemake_executable(str(script), "/usr/bin/python3") == str(script.resolve())
    assert snakemake_executable("/x/snakemake/__main__.py", "/v/bin/python") == "/v/bin/python -m snakemake"
    project = tmp_path / "my clone"
    cmd = report_command(str(script), [project / "my config.yaml"], project / "Snakefile", project)
    assert cmd == f"{script} --report results/report.zip --configfile '{project}/my config.yaml'"
    other = report_command("/v/bin/python -m snakemake", [], project / "Snakefile", tmp_path / "work")
    assert other == (
        f"/v/bin/python -m snakemake --snakefile '{project}/Snakefile' --directory {tmp_path}/work "
        "--report results/report.zip"
    )


def test_job_message_is_the_rule_and_its_wildcards_in_name_order():
    msg = wf.job_message("predict_matbench", {"task", "model", "fold"})
    assert msg == "predict_matbench fold={wildcards.fold} model={wildcards.model} task={wildcards.task}"
    assert wf.job_message("tabulate_eos", []) == "tabulate_eos"
