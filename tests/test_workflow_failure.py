"""A failure stays in its family (issue 52): the real Snakefile, with the default profile (it keeps
going), on a tiny two-family config whose discovery downloads go to a host name that does not
resolve (fetch_upstream with a mirror under .invalid) while mlip needs nothing from outside. The
mlip table is built, and so are the diatomics curves (they need no download), the run exits 1, each failed fetch was tried once (no retry, by the fetch
nor by Snakemake), and the closing summary names the family, the jobs, the cause and the keys to
set, and a report command with the run's config file."""

from __future__ import annotations

import pytest

from crucible.discovery import data
from crucible.discovery.workflow import final_outputs as discovery_outputs
from crucible.sources import pinned_files

from helpers import run_snakemake

pytestmark = pytest.mark.slow

UNRESOLVABLE = "http://crucible-does-not-exist.invalid"
CONFIG = {
    "mlip": {"models": ["emt"], "eos": {"elements": ["Cu"]}},
    "discovery": {
        "diatomics": {"potentials": ["emt"], "elements": ["H"]},
        "fetch_upstream": True,
        "url_prefix": UNRESOLVABLE,
    },
}


@pytest.fixture(scope="module")
def failed_run(tmp_path_factory, venv_env):
    workdir = tmp_path_factory.mktemp("failed_family")
    env = {k: v for k, v in venv_env.items() if k != "CRUCIBLE_OFFLINE"}  # the host is asked, and does not resolve
    proc = run_snakemake(workdir, CONFIG, env=env, timeout=1200)
    return workdir, proc, proc.stdout + proc.stderr


def test_the_other_family_is_built_and_the_run_exits_1(failed_run):
    workdir, proc, console = failed_run
    assert proc.returncode == 1, console[-4000:]
    assert (workdir / "results/tables/mlip_eos.csv").stat().st_size > 0
    # the curves need no download and are built; the table and figures beside the published rows are not
    built = [p for p in discovery_outputs(CONFIG) if (workdir / p).exists()]
    assert built == ["results/discovery/diatomics/emt.json.gz"], built


def test_each_failed_download_was_tried_once(failed_run):
    workdir, _, console = failed_run
    logs = sorted((workdir / "logs" / "fetch").glob("mbd-*.log"))
    assert len(logs) == 36  # the reference and the 35 cards
    for log in logs:
        text = log.read_text()
        assert text.count(f"fetching {UNRESOLVABLE}/") == 1, text
        assert "does not resolve" in text and "(not retried)" in text
    assert "Trying to restart" not in console  # no Snakemake retries either


def test_the_summary_names_family_jobs_cause_fix_and_a_working_report_command(failed_run):
    workdir, _, console = failed_run
    summary = console[console.index("crucible: the run failed: 36 jobs failed (exit 1)") :]
    assert "  FAILED family discovery: " in summary and "FAILED family mlip" not in summary
    assert summary.count("  FAILED fetch_artifact: see logs/fetch/mbd-") == 36
    pin = pinned_files.find_pin(data.REFERENCE_ROLE)
    upstream_path = pinned_files.load_sources()["artifacts"][pin.artifact]["mirror_path"]
    assert f"    family: discovery; output: resources/{pin.location}" in summary
    assert f"    cause: download of artifact '{pin.artifact}' from {UNRESOLVABLE}/{upstream_path}" in summary
    assert "the host name does not resolve" in summary
    assert "    fix: set discovery.fetch_upstream: false to copy the file that ships in the repository; " in summary
    assert "set discovery.url_prefix to a mirror" in summary
    assert f" --report results/report.zip --configfile {workdir / 'config.yaml'}" in summary
    print(summary[:3000])
