"""The DAG from a directory whose name has a space, with a custom model module beside the
config, and the report built by the run itself (issue 10, points 2, 6, 7, 8): what a new user
does on day one. The report's front page (issue 23): every family that ran, the sources read and
their pins, the code version and the wall time, checked in its HTML and in a headless browser."""

from __future__ import annotations

import json
import re
import shutil
import zipfile

import pytest
import yaml

from helpers import REPO, assert_printed_tables, provide_downloads, run_snakemake
from report_pages import (
    NO_BROWSER,
    TINY_RUN_CONFIG,
    TINY_RUN_ROLES,
    chromium,
    front_page_html,
    rendered_dom,
    screenshot,
    unpack,
)

pytestmark = pytest.mark.slow

MODULE = '''
import numpy as np


class MeanOrMajority:
    """The training mean (regression) or majority label (classification), plus noise from its seed."""

    def __init__(self, random_state=None):
        self.random_state = random_state

    def get_params(self, deep=True):
        return {"random_state": self.random_state}

    def set_params(self, **params):
        self.__dict__.update(params)
        return self

    def fit(self, X, y):
        self.bool_ = y.dtype == bool
        self.value_ = bool(y.mean() >= 0.5) if self.bool_ else float(np.mean(y))
        return self

    def predict(self, X):
        if self.bool_:
            return np.full(len(X), self.value_)
        noise = np.random.default_rng(self.random_state).normal(0, 1e-6, len(X))
        return self.value_ + noise
'''

# The tiny run of every default family, plus a custom model module beside the config.
CONFIG = {
    **TINY_RUN_CONFIG,
    "matbench": {
        **TINY_RUN_CONFIG["matbench"],
        "models": ["dummy", "mine"],
        "custom_models": {"mine": {"class": "mymodels:MeanOrMajority", "input": "composition"}},
    },
}


def _snakemake(workdir, *args, env):
    # The clone itself lives under a path with spaces: its Snakefile, config and sources file too.
    return run_snakemake(workdir, [workdir / "my config.yaml"], *args, env=env, snakefile=workdir / "Snakefile")


@pytest.fixture(scope="module")
def run(tmp_path_factory, venv_env):
    workdir = tmp_path_factory.mktemp("dag") / "with spaces" / "my clone"
    workdir.mkdir(parents=True)
    for name in ("Snakefile", "workflow", "config", "envs", "data"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, workdir / name)
    # the archives this config reads, from the test cache (PyPI the first time: marks `network`)
    provide_downloads(workdir, *TINY_RUN_ROLES)
    (workdir / "my config.yaml").write_text(yaml.safe_dump(CONFIG))
    (workdir / "mymodels.py").write_text(MODULE)
    env = {k: v for k, v in venv_env.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(REPO / "src")  # as the brief runs it; the project dir is added by the workflow
    proc = _snakemake(workdir, "--report", str(workdir / "report.zip"), "--report-after-run", env=env)
    assert proc.returncode == 0, proc.stderr[-6000:]
    return workdir, env


def test_every_output_is_built_from_a_path_with_spaces(run):
    workdir, _ = run
    for rel in [
        "results/tables/matbench_leaderboard.csv",
        "results/tables/mlip_eos.csv",
        "results/tables/mlip_s2ef_vasp.csv",
        "results/figures/matbench/mine/matbench_steels.png",
        "results/tables/crystal_aflow-prototypes.csv",
        "results/tables/reactions_direct-arylation.csv",
        "results/tables/discovery_diatomics.csv",
    ]:
        assert (workdir / rel).stat().st_size > 0, rel


def test_custom_model_module_beside_the_project_is_imported_by_jobs_and_seeded(run):
    workdir, _ = run
    info = json.loads((workdir / "results/matbench/predictions/mine/matbench_steels/fold_0.json").read_text())
    assert info["params"]["random_state"] == 0 and info["seed"] == 0


def test_the_report_has_every_table_and_figure(run):
    workdir, _ = run
    names = zipfile.ZipFile(workdir / "report.zip").namelist()
    for wanted in [
        "matbench_tasks.csv",
        "matbench_task_overlap.csv",
        "matbench_leaderboard.csv",
        "matbench_folds.csv",
        "matbench_scaled_error.png",
        "matbench_steels.png",
        "mlip_eos.csv",
        "mlip_eos_delta.png",
        "mlip_eos_b0_parity.png",
        "mlip_s2ef_vasp.csv",
    ]:
        assert any(n.endswith(wanted) for n in names), wanted


def test_every_familys_tables_enter_the_report_as_csv(run):
    workdir, _ = run
    names = zipfile.ZipFile(workdir / "report.zip").namelist()
    for table in (
        "reactions_direct-arylation.csv",
        "reactions_direct-arylation_paired.csv",
        "crystal_aflow-prototypes.csv",
    ):
        assert any(n.endswith(table) for n in names), table
    # Markdown only for the reaction package's own report, a document, not a table
    assert [n.rsplit("/", 1)[1] for n in names if n.endswith(".md")] == ["report.md"]


def test_every_printed_table_of_every_family_has_a_title_a_caption_and_worded_headers(run):
    workdir, _ = run
    checked = assert_printed_tables(workdir / "results" / "tables")
    # the tables of each family this run made (catalysis: tests/test_workflow_catalysis.py)
    for family in ("matbench", "mlip", "crystal", "reactions", "discovery"):
        assert any(name.startswith(f"{family}_") for name in checked), family
    assert len(checked) == 11, checked  # crystal 3, matbench 3, mlip 2, reactions 2, discovery 1


@pytest.fixture(scope="module")
def report_html(run, tmp_path_factory):
    """The report as the README makes it after a run: `snakemake --report` (with
    --report-after-run, Snakemake 9.27 drops the profile's metadata, so that report opens on the
    rule graph, with the front page after it)."""
    workdir, env = run
    proc = _snakemake(workdir, "--report", str(workdir / "report-front.zip"), env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return unpack(workdir / "report-front.zip", tmp_path_factory.mktemp("report"))


def test_the_report_front_page_names_the_families_sources_version_and_wall_time(run, report_html):
    import subprocess

    import crucible
    from crucible.sources.pinned_files import find_pin, load_sources, resource_path

    workdir, _ = run
    page = front_page_html(report_html)
    # every family that ran, what it built; those that did not
    for family, built in {
        "matbench": ["matbench_steels", "dummy, mine"],
        "mlip": ["potentials (1): emt", "EOS elements (1): Cu", "S2EF datasets (1): vasp"],
        "reactions": ["direct-arylation"],
        "crystal": ["aflow-prototypes", "template, random-symmetric"],
        "discovery": ["emt"],
    }.items():
        row = page.split(f"<strong>{family}</strong>", 1)[1].split("</tr>", 1)[0]
        assert all(b in row for b in built), (family, row)
    assert "Not in this run (nothing configured): llm, catalysis." in page
    # the sources: each pinned file the jobs read with its pin, its archive with the archive's
    sources = load_sources(workdir / "config/sources.yaml")
    for role in TINY_RUN_ROLES:
        pin = find_pin(role, sources)
        assert str(resource_path(role, sources)) in page and pin.sha256 in page, role
        assert sources["artifacts"][pin.artifact]["sha256"] in page, pin.artifact
    assert str(resource_path("matbench/mirror/matbench_glass", sources)) not in page  # not read by this run
    assert "my config.yaml" in page  # the config files of the run
    # the code version: the package's, and the checkout's commit (this copy is none)
    git = subprocess.run(["git", "-C", str(workdir), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert f"crucible {crucible.__version__}" in page
    assert (f"git commit {git.stdout.strip()}" if git.returncode == 0 else "not a git checkout") in page
    # the wall time, from the benchmark files: at least the longest job's
    wall = re.search(r"Wall time: (?:(\d+) h )?(?:(\d+) min )?(\d+) s</strong>", page)
    assert wall, page[:3000]
    h, m, sec = (int(x or 0) for x in wall.groups())
    longest = max(
        float(p.read_text().splitlines()[1].split("\t")[0]) for p in (workdir / "benchmarks/runs").rglob("*.tsv")
    )
    assert 3600 * h + 60 * m + sec >= int(longest)


@pytest.mark.skipif(chromium() is None, reason=NO_BROWSER)
def test_in_a_browser_the_report_opens_on_its_front_page_and_the_rule_graph_has_its_own(run, report_html):
    workdir, _ = run
    landing = rendered_dom(report_html)
    # rendered by the page's scripts (the embedded copy has its quotes escaped)
    assert '<div class="section" id="families-that-ran">' in landing
    assert '<div id="rulegraph"' not in landing
    graph = rendered_dom(report_html, view="rulegraph")
    assert '<div id="rulegraph"' in graph and "<canvas" in graph
    # the report the run itself made opens on the graph, and still has the front page
    after_run = rendered_dom(unpack(workdir / "report.zip", report_html.parents[1] / "after-run"))
    assert '<div id="rulegraph"' in after_run and '<div class="section" id="families-that-ran">' in after_run
    # for a reader: the pictures (benchmarks/report_screenshot.py makes them for a tiny run)
    assert screenshot(report_html, workdir / "report_front.png").stat().st_size > 20_000


def test_an_extracted_member_edited_after_the_run_stops_the_rerun(run):
    workdir, env = run
    from crucible.sources.pinned_files import resource_path

    member = workdir / resource_path("matbench/mirror/matbench_steels")
    lines = member.read_text().splitlines()
    a, b = lines[1].rsplit(",", 1), lines[2].rsplit(",", 1)
    lines[1], lines[2] = f"{a[0]},{b[1]}", f"{b[0]},{a[1]}"
    member.write_text("\n".join(lines) + "\n")
    board = (workdir / "results/tables/matbench_leaderboard.csv").read_bytes()
    proc = _snakemake(workdir, "results/tables/matbench_leaderboard.csv", env=env)
    assert proc.returncode != 0
    log = (workdir / "logs/matbench/clean/matbench_steels.log").read_text()
    assert str(member.relative_to(workdir)) in log and "differs from the pin" in log
    assert (workdir / "results/tables/matbench_leaderboard.csv").read_bytes() == board
