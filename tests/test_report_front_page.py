"""The report's front page (crucible.report.front_page) from plain data: which families ran and
what each built, the sources the jobs read with their pins, the files read without a pin, the
code version, the wall time from benchmark files, and reStructuredText that docutils renders
without a warning. The page as Snakemake renders it and a browser shows it:
tests/test_workflow_paths.py."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
from collections import namedtuple
from types import SimpleNamespace

import pytest
import yaml

from crucible.core.errors import ConfigError
from crucible.dag.config import check_config, fill_defaults
from crucible.dag.families import families
from crucible.report import front_page as fp
from crucible.report import run_facts
from crucible.sources.pinned_files import find_pin, load_sources, resource_path

from helpers import REPO, SOURCES_FILE

SOURCES = load_sources(SOURCES_FILE)
STEELS = str(resource_path("matbench/mirror/matbench_steels"))
# the archive the steels table comes from, by role (no artifact name or version written here)
ARCHIVE = find_pin("matbench/mirror/matbench_steels", SOURCES).artifact
CRABNET = f"resources/downloads/{SOURCES['artifacts'][ARCHIVE]['filename']}"


def _config(**sections) -> dict:
    config = copy.deepcopy(sections)
    fill_defaults(config)
    return config


def _pin(role: str) -> str:
    from crucible.sources.pinned_files import find_pin

    return find_pin(role).sha256


def test_families_that_ran_are_those_with_outputs_and_say_what_they_built():
    config = _config(
        matbench={"tasks": ["matbench_steels", "matbench_expt_gap"], "models": ["dummy", "gbm-magpie"]},
        reactions={"datasets": ["direct-arylation"], "models": ["random", "nearest-substrate", "oracle"]},
    )
    ran = {f.name: f for f in fp.families_run(config)}
    assert list(ran) == ["matbench", "reactions"]
    # Matbench's order (by dataset size), not the config's; empty axes left out
    assert ran["matbench"].built == {
        "tasks": ["matbench_steels", "matbench_expt_gap"],
        "models": ["dummy", "gbm-magpie"],
    }
    # direct-arylation has one substrate: nearest-substrate does not run on it, so it is not listed
    assert ran["reactions"].built == {"datasets": ["direct-arylation"], "baselines": ["random", "oracle"]}
    assert fp.families_not_run(config) == [f.name for f in families() if f.name not in ran]
    # a named run says so (its aggregates are under results/runs/<name>/)
    config["matbench"]["run_name"] = "steels-only"
    assert fp.families_run(config)[0].built["run name"] == ["steels-only"]


def test_every_family_says_what_it_built_as_lists_of_names():
    config = yaml.safe_load((REPO / ".test/all-stages.yaml").read_text())
    fill_defaults(config)
    for family in families():
        built = fp.built_by(family, config)
        assert built and all(isinstance(v, list) and all(isinstance(x, str) for x in v) for v in built.values())
    mlip = {f.name: f for f in fp.families_run(config)}["mlip"].built
    assert mlip == {"potentials": ["emt", "chgnet-0.3.0"], "EOS elements": ["Cu"], "S2EF datasets": ["vasp"]}


def test_sources_are_the_files_the_jobs_read_with_their_pins(tmp_path):
    (tmp_path / "resources/downloads").mkdir(parents=True)
    (tmp_path / "resources/downloads/matbench_glass.json.gz").write_bytes(b"not pinned here")
    jobs = [
        run_facts.Job("extract_member", (CRABNET,), (STEELS,)),
        run_facts.Job(
            "clean_matbench_task", (STEELS, str(tmp_path / "resources/downloads/matbench_glass.json.gz")), ("x",)
        ),
    ]
    read = run_facts.sources_read(jobs, SOURCES, root=tmp_path)
    assert [s.path for s in read] == [CRABNET, STEELS, "resources/downloads/matbench_glass.json.gz"]
    archive, member, other = read
    assert archive.sha256 == SOURCES["artifacts"][ARCHIVE]["sha256"]
    assert archive.origin == f"PyPI {SOURCES['artifacts'][ARCHIVE]['requirement']}"
    assert member.sha256 == _pin("matbench/mirror/matbench_steels") and member.pinned
    # a file the sources file does not pin: its hash now, marked as not a pin
    import hashlib

    assert other.sha256 == hashlib.sha256(b"not pinned here").hexdigest() and not other.pinned
    assert "not in config/sources.yaml" in other.origin
    # other members of the same archive were not read: not listed
    assert str(resource_path("matbench/mirror/matbench_glass")) not in [s.path for s in read]
    assert archive.on_disk == member.on_disk == "absent" and other.on_disk == "no pin to compare with"


def test_a_source_edited_after_the_run_shows_on_the_page(tmp_path):
    from helpers import pinned_file

    target = tmp_path / STEELS
    target.parent.mkdir(parents=True)
    shutil.copy(pinned_file("matbench/mirror/matbench_steels"), target)
    jobs = [run_facts.Job("clean_matbench_task", (STEELS,), ("x",))]
    assert run_facts.sources_read(jobs, SOURCES, root=tmp_path)[0].on_disk == "matches the pin"
    target.write_text(target.read_text().replace("\n", "\r\n", 1))  # one line ending changed
    (edited,) = run_facts.sources_read(jobs, SOURCES, root=tmp_path)
    assert edited.on_disk == "DIFFERS from the pin" and edited.sha256 == _pin("matbench/mirror/matbench_steels")


def test_a_source_pinned_by_git_blob_gets_the_sha256_its_first_fetch_recorded(tmp_path):
    name = next(n for n, spec in SOURCES["artifacts"].items() if spec.get("git_blob"))
    path = f"resources/downloads/{SOURCES['artifacts'][name]['filename']}"
    jobs = [run_facts.Job("build_crystal_items", (path,), ("items.jsonl",))]
    (unknown,) = run_facts.sources_read(jobs, SOURCES, root=tmp_path)
    assert unknown.sha256 is None and "git blob" in unknown.origin
    (tmp_path / run_facts.LOCK_FILE).parent.mkdir(parents=True)
    (tmp_path / run_facts.LOCK_FILE).write_text(f'{{"{name}": "{"ab" * 32}"}}')
    (locked,) = run_facts.sources_read(jobs, SOURCES, root=tmp_path)
    assert locked.sha256 == "ab" * 32


def test_files_read_as_they_are_are_the_inputs_no_job_makes(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config/published.yaml").write_text("dummy: 1\n")
    (tmp_path / "mine").mkdir()
    jobs = [
        run_facts.Job("a", ("config/published.yaml", "results/x.parquet", STEELS, "mine"), ("results/y.csv",)),
        run_facts.Job("b", (), ("results/x.parquet",)),
    ]
    import hashlib

    assert run_facts.inputs_read_as_they_are(jobs, root=tmp_path) == [
        ("config/published.yaml", hashlib.sha256(b"dummy: 1\n").hexdigest()),
        ("mine", None),
    ]


def _benchmark(path, seconds: float, end: float):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\n{seconds}\t0:00:00\t12.5\n")
    os.utime(path, (end, end))


def test_wall_time_runs_from_the_first_start_to_the_last_end_of_the_benchmark_files(tmp_path):
    _benchmark(tmp_path / "benchmarks/runs/a.tsv", 100.0, 1_000_000.0)
    _benchmark(tmp_path / "benchmarks/runs/b.tsv", 30.5, 1_000_500.0)
    (tmp_path / "benchmarks/runs/broken.tsv").write_text("s\n")
    jobs = [
        run_facts.Job("a", (), ("x",), "benchmarks/runs/a.tsv"),
        run_facts.Job("b", (), ("y",), "benchmarks/runs/b.tsv"),
        run_facts.Job("c", (), ("z",), None),
        run_facts.Job("d", (), ("w",), "benchmarks/runs/broken.tsv"),
        run_facts.Job("all", ("x", "y", "z"), ()),  # an aggregate target: nothing runs
    ]
    time = run_facts.wall_time(jobs, tmp_path)
    assert time.n_timed == 2 and time.job_seconds == pytest.approx(130.5)
    assert time.span_seconds == pytest.approx(600.0) and time.untimed == ("c", "d")
    assert (
        run_facts.duration(3939) == "1 h 05 min 39 s"
        and run_facts.duration(242) == "4 min 02 s"
        and run_facts.duration(7.4) == "7 s"
    )


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_code_version_names_the_commit_and_uncommitted_changes(tmp_path):
    import crucible

    assert (
        run_facts.code_version(tmp_path) == f"crucible {crucible.__version__} (not a git checkout: no commit recorded)"
    )
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.txt").write_text("1")
    _git(tmp_path, "add", "a.txt")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert run_facts.code_version(tmp_path) == f"crucible {crucible.__version__}, git commit {head.strip()}"
    (tmp_path / "new.txt").write_text("untracked: not a change to the code that ran")
    assert "uncommitted" not in run_facts.code_version(tmp_path)
    (tmp_path / "a.txt").write_text("2")
    assert run_facts.code_version(tmp_path).endswith("with uncommitted changes to tracked files")


def test_the_page_is_restructuredtext_docutils_renders_without_a_warning(tmp_path):
    from docutils.core import publish_parts

    config = _config(
        matbench={
            "tasks": ["matbench_steels"],
            "models": ["dummy", "my_model_"],
            "custom_models": {"my_model_": {"class": "m:M", "input": "composition"}},
        }
    )
    jobs = [
        run_facts.Job("extract_member", (CRABNET,), (STEELS,)),
        run_facts.Job("clean_matbench_task", (STEELS,), ("x",)),
    ]
    rst = fp.render(
        config, jobs, sources=SOURCES, configfiles=["config/config.yaml"], repo=tmp_path, root=tmp_path,
        categories={"Matbench": 7},
    )  # fmt: skip
    html = publish_parts(
        rst + "\n.. _Matbench: javascript:app.showCategory('Matbench')\n",
        writer="html",
        settings_overrides={"halt_level": 2, "report_level": 2},
    )["html_body"]
    assert "my_model_" in html and "matbench_steels" in html  # the trailing _ is text, not a link
    assert "showCategory('Matbench')" in html and "(7)" in html
    assert _pin("matbench/mirror/matbench_steels") in html
    assert "Wall time: not known" in html and "Not in this run (nothing configured): mlip, reactions, llm" in html


def test_the_snakefile_hands_the_template_a_page_that_renders_from_the_dag(tmp_path):
    job = SimpleNamespace(rule=SimpleNamespace(name="extract_member"), input=[CRABNET], output=[STEELS], benchmark=None)
    config = _config(matbench={"tasks": ["matbench_steels"], "models": ["dummy"]})
    page = fp.FrontPage(
        config, lambda: SimpleNamespace(jobs=[job]), sources=SOURCES, configfiles=lambda: [], repo=tmp_path
    )
    config[fp.CONFIG_KEY] = page
    assert copy.deepcopy(config)[fp.CONFIG_KEY] is page  # Snakemake may copy its config
    category = namedtuple("Category", "name")  # Snakemake's report categories have a name
    text = page.rst({category("Matbench"): {category(None): [1, 2, 3]}})
    assert "`Matbench`_ (3)" in text and CRABNET in text
    # the template prints exactly this key, which no config file may set
    assert f'snakemake.config["{fp.CONFIG_KEY}"].rst(categories)' in (REPO / "workflow/report/workflow.rst").read_text()
    with pytest.raises(ConfigError, match=fp.CONFIG_KEY):
        check_config({fp.CONFIG_KEY: "x"})
