"""What a job read and ran (issue 54): the files a process imported and opened, sorted into the
user's files (with their SHA-256), installed distributions (by version) and installed code no
RECORD vouches for (refused); what planning makes of a job's record; records that must exist
and match their journal."""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import os
import sys

import pytest

from crucible.core.errors import ConfigError
from crucible.identity import installed_code, job_reads, job_state, records
from crucible.identity.name_book import Meaning, NameBook
from crucible.identity.records import IdentityError, JobRecord, journal_path, record_path


def _row(site, rel):
    data = (site / rel).read_bytes()
    return f"{rel},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}"


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A site-packages folder on the path with ``readpkg 2.0`` installed (a RECORD of its files)."""
    site = tmp_path / "lib" / "site-packages"
    (site / "readpkg").mkdir(parents=True)
    (site / "readpkg/__init__.py").write_text("VALUE = 1\n")
    info = site / "readpkg-2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: readpkg\nVersion: 2.0\n\n")
    (info / "RECORD").write_text(_row(site, "readpkg/__init__.py") + "\nreadpkg-2.0.dist-info/RECORD,,\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("CRUCIBLE_HASH_CACHE", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    installed_code.clear_caches()
    importlib.invalidate_caches()
    sys.modules.pop("readpkg", None)
    sys.modules.pop("readpkg.extra", None)
    yield site
    sys.modules.pop("readpkg", None)
    sys.modules.pop("readpkg.extra", None)
    installed_code.clear_caches()


def test_a_job_records_the_users_files_and_the_distributions_it_ran(site, tmp_path):
    (tmp_path / "coef.csv").write_text("scale,2\n")
    (tmp_path / "results").mkdir()
    (tmp_path / "results/input.json").write_text("{}")
    job_reads.watch()
    importlib.import_module("readpkg")
    (tmp_path / "coef.csv").read_text()
    (tmp_path / "results/input.json").read_text()  # an input: checked by its record
    with open(tmp_path / "written.txt", "w") as fh:  # the job's own product
        fh.write("x")
    (tmp_path / "written.txt").read_text()
    ran = job_reads.collect([], [])
    assert ran["files"]["coef.csv"] == hashlib.sha256(b"scale,2\n").hexdigest()
    assert ran["distributions"]["readpkg"] == "2.0"
    assert not any(f.startswith(("results", "written")) for f in ran["files"]), ran["files"]
    assert not any(os.path.dirname(os.__file__) in f for f in ran["files"])  # the standard library
    assert ran["refused"] == {}


def test_installed_code_no_record_vouches_for_is_refused(site):
    (site / "readpkg/extra.py").write_text("X = 2\n")  # beside the package, not in its RECORD
    job_reads.watch()
    importlib.import_module("readpkg.extra")
    ran = job_reads.collect([], [])
    message = job_reads.refusal(ran["refused"])
    assert "readpkg/extra.py" in message and "readpkg 2.0: a file its RECORD does not list" in message
    assert "pip install --force-reinstall --no-deps readpkg" in message
    # and a distribution whose RECORD is gone: every file of it
    (site / "readpkg-2.0.dist-info/RECORD").unlink()
    installed_code.clear_caches()
    job_reads.watch()
    ran = job_reads.collect([], [])
    assert "readpkg 2.0 is installed without a RECORD" in job_reads.refusal(ran["refused"])


def test_a_sitecustomize_on_the_path_is_a_startup_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    assert "sitecustomize.py" not in job_reads.startup_files()
    (tmp_path / "sitecustomize.py").write_text("import os\n")
    assert "sitecustomize.py" in job_reads.startup_files()


def _made(tmp_path, content=b"1.0\n", ran=None):
    out = "results/m/preds.parquet"
    (tmp_path / "results/m").mkdir(parents=True, exist_ok=True)
    (tmp_path / out).write_bytes(content)
    JobRecord("matbench predict", "c0de", {}, [], [out], rule="predict_matbench").write_records(["x"], {}, ran)
    return out


def test_planning_reruns_a_job_whose_read_file_changed_and_is_stable_after(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRUCIBLE_HASH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "coef.csv").write_text("a")
    sha = hashlib.sha256(b"a").hexdigest()
    out = _made(tmp_path, ran={"files": {"coef.csv": sha}, "distributions": {}})
    assert job_state.planned_state("predict_matbench", [out]) == ""
    (tmp_path / "coef.csv").write_text("b")
    job_state._planned_state.cache_clear()
    changed = job_state.planned_state("predict_matbench", [out])
    assert changed.startswith("changed ")
    assert capsys.readouterr().err.count("coef.csv changed since a job read it") == 1
    # the rerun writes what it was planned under: the next planning is what Snakemake stored
    job = JobRecord("matbench predict", "c0de", {}, [], [out], rule="predict_matbench", planned=changed)
    job.write_records(["x"], {}, {"files": {"coef.csv": hashlib.sha256(b"b").hexdigest()}, "distributions": {}})
    job_state._planned_state.cache_clear()
    assert job_state.planned_state("predict_matbench", [out]) == changed


def test_an_output_without_its_record_or_with_an_edited_one_is_remade_and_refused(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CRUCIBLE_HASH_CACHE", str(tmp_path / "cache"))
    out = _made(tmp_path)
    reader = JobRecord("matbench score", "c0de", {}, [out], ["results/m/score.json"], rule="score_matbench")
    assert reader.checked_input_names() == {}
    (tmp_path / out).write_bytes(b"9.0\n")
    doc = json.loads(record_path(out).read_text())
    doc["sha256"] = hashlib.sha256(b"9.0\n").hexdigest()  # rewritten to match the tampered file
    record_path(out).write_text(json.dumps(doc))
    with pytest.raises(IdentityError, match="journal"):
        reader.checked_input_names()
    job_state._planned_state.cache_clear()
    assert job_state.planned_state("predict_matbench", [out]).startswith("remake ")
    assert "rule predict_matbench remakes it" in capsys.readouterr().err
    record_path(out).unlink()
    with pytest.raises(IdentityError, match="has no identity record") as err:
        reader.checked_input_names()
    assert out in str(err.value)
    journal_path(out).unlink()
    job_state._planned_state.cache_clear()
    assert job_state.planned_state("predict_matbench", [out]).startswith("remake ")


def test_journal_lives_in_the_results_folder():
    assert journal_path("results/x/y.json") == records.Path("results/.identity/journal/x/y.json.sha256")


def test_declared_files_expand_their_globs_and_refuse_an_empty_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data/a.csv").write_text("1")
    (tmp_path / "data/b.csv").write_text("2")
    book = NameBook(
        {"matbench/model/mine": Meaning({}, "matbench.custom_models.mine", declared=("data/*.csv", "x.h5"))}
    )
    assert book.declared_files(["matbench/model/mine"]) == ("data/a.csv", "data/b.csv", "x.h5")
    book = NameBook({"matbench/model/mine": Meaning({}, "matbench.custom_models.mine", declared=("none/*.h5",))})
    with pytest.raises(ConfigError, match="matbench.custom_models.mine: files: 'none/\\*.h5' matches no file"):
        book.declared_files(["matbench/model/mine"])
