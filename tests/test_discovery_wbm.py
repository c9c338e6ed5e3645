"""The discovery scorer's files: the WBM summary and a model's predictions in the leaderboard's
formats (synthetic, built here), their fetch through the real download code from a local server
(MD5 and size checked, the SHA-256 recorded in the lock file and binding from then on), and each
pinned predictions file against the pred_file block of its model card."""

from __future__ import annotations

import copy
import json
import math
import shutil

import pytest

from crucible.core.errors import CrucibleError, DataValidationError, HashMismatchError
from crucible.core.hashes import file_sha256, md5_file
from crucible.discovery import data, stability, wbm
from crucible.sources import pinned_files

from helpers import REPO, StaticFileServer, write_wbm_files

CARD = REPO / "tests" / "data" / "discovery" / "chgnet-0.3.0.yml"
SHARED_CARDS = REPO.parent / "shared" / "data" / "matbench-discovery" / "models"


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return write_wbm_files(tmp_path_factory.mktemp("wbm"))


def test_the_leaderboard_formats_are_read_and_scored(files):
    summary, preds = files
    table = wbm.parse_wbm_summary(summary)
    assert len(table) == 400 and table.index.name == "material_id"
    assert table[stability.UNIQUE_PROTOTYPE].dtype == bool
    p = wbm.parse_predictions(preds)
    assert len(p) == 398 and math.isnan(p["wbm-1-4"])
    scores = stability.discovery_metrics(table, p, where=str(preds))
    assert scores["absent"] == 3 and scores["unrealistic"] == 1 and scores["n_materials"] == 400
    full = scores["full_test_set"]
    assert full["TP"] + full["FN"] + full["FP"] + full["TN"] == 400 and full["missing_preds"] == 4


def test_bad_files_are_refused_naming_file_line_and_field(tmp_path):
    bad = tmp_path / "s.csv"
    bad.write_text("material_id,e_form_per_atom_mp2020_corrected,unique_prototype\na,-1,True\n")
    with pytest.raises(
        DataValidationError, match=r"s.csv: line 1: no column\(s\) e_above_hull_mp2020_corrected_ppd_mp"
    ):
        wbm.parse_wbm_summary(bad)
    bad.write_text(
        "material_id,e_form_per_atom_mp2020_corrected,e_above_hull_mp2020_corrected_ppd_mp,unique_prototype\n"
        "a,-1,0.1,True\nb,-1,high,False\n"
    )
    with pytest.raises(DataValidationError, match="s.csv: line 3: field e_above_hull_mp2020_corrected_ppd_mp: 'high'"):
        wbm.parse_wbm_summary(bad)
    bad.write_text(
        "material_id,e_form_per_atom_mp2020_corrected,e_above_hull_mp2020_corrected_ppd_mp,unique_prototype\n"
        "a,-1,0.1,True\na,-1,0.2,maybe\n"
    )
    with pytest.raises(DataValidationError, match="line 3: material_id 'a' given twice"):
        wbm.parse_wbm_summary(bad)
    two = tmp_path / "p.csv"
    two.write_text("material_id,e_form_per_atom_a,e_form_per_atom_b\nx,1,2\n")
    with pytest.raises(DataValidationError, match=r"p.csv: line 1: 2 columns named e_form_per_atom\*"):
        wbm.parse_predictions(two)
    assert wbm.parse_predictions(two, "e_form_per_atom_b")["x"] == 2.0
    with pytest.raises(DataValidationError, match="p.csv: line 1: no column e_form"):
        wbm.parse_predictions(two, "e_form")


# --- the fetch: MD5 and size, then the recorded SHA-256 -------------------------------------------


@pytest.fixture
def served(tmp_path, files):
    """The synthetic summary on 127.0.0.1 where the repository's layout keeps it, and a sources
    document whose summary pin is that file's MD5 and size (the published ones name a file we
    cannot serve)."""
    summary, _ = files
    doc = copy.deepcopy(pinned_files.load_sources())
    spec = doc["artifacts"][pinned_files.find_pin(wbm.WBM_ROLE).artifact]
    spec.update(md5=md5_file(summary), size=summary.stat().st_size)
    www = tmp_path / "www"
    (www / spec["mirror_path"]).parent.mkdir(parents=True)
    shutil.copy(summary, www / spec["mirror_path"])
    server = StaticFileServer(www)
    yield server, doc, spec, summary
    server.close()


def test_md5_checked_then_sha256_recorded_and_binding(tmp_path, served):
    server, doc, spec, summary = served
    res = tmp_path / "resources"
    got = pinned_files.provide(wbm.WBM_ROLE, res, sources=doc, url_prefix=server.url)
    assert got.read_bytes() == summary.read_bytes() and server.hits == ["/" + spec["mirror_path"]]
    lock = json.loads((res / pinned_files.LOCK_NAME).read_text())
    entry = lock[pinned_files.find_pin(wbm.WBM_ROLE).artifact]
    assert entry["sha256"] == file_sha256(summary) and entry["md5"] == spec["md5"]
    pinned_files.provide(wbm.WBM_ROLE, res, sources=doc, url_prefix=server.url)
    assert len(server.hits) == 1  # present and matching: not fetched again
    # the file changes after its fetch: the read refuses it by the recorded SHA-256
    got.write_bytes(summary.read_bytes() + b"\n")
    with pytest.raises(HashMismatchError, match=f"differs from the pin {entry['sha256']}.*recorded in"):
        pinned_files.pinned(wbm.WBM_ROLE, sources=doc, resources=res)
    # a second fetch checks it against the recorded SHA-256, keeps it aside and fetches it again
    pinned_files.provide(wbm.WBM_ROLE, res, sources=doc, url_prefix=server.url)
    assert len(server.hits) == 2 and got.read_bytes() == summary.read_bytes()
    assert len(list(got.parent.glob(got.name + ".bad-*"))) == 1


@pytest.mark.parametrize("field", ["md5", "size"])
def test_a_wrong_md5_or_size_is_refused_and_nothing_is_left_under_its_name(tmp_path, served, field):
    server, doc, spec, summary = served
    spec[field] = "0" * 32 if field == "md5" else spec["size"] + 1
    res = tmp_path / "resources"
    if field == "md5":
        expected = f"MD5 mismatch for artifact .* \\({spec['filename']} from {server.url}/.*\\): published 0{{32}}, got {md5_file(summary)}"
    else:
        expected = f"size mismatch for artifact .*: published {spec['size']} bytes, got {summary.stat().st_size}"
    with pytest.raises(HashMismatchError, match=expected):
        pinned_files.provide(wbm.WBM_ROLE, res, sources=doc, url_prefix=server.url)
    target = pinned_files.resource_path(wbm.WBM_ROLE, doc, res)
    assert not target.exists() and not list(target.parent.glob(".fetch-*"))
    assert not (res / pinned_files.LOCK_NAME).exists()  # nothing recorded for a refused file
    with pytest.raises(CrucibleError, match="missing"):
        pinned_files.pinned(wbm.WBM_ROLE, sources=doc, resources=res)


# --- the cards name the pinned files ---------------------------------------------------------------


def _cards():
    cards = sorted(SHARED_CARDS.glob("*.yml")) if SHARED_CARDS.is_dir() else []
    return [CARD, *cards]


@pytest.mark.parametrize("card", _cards(), ids=lambda p: p.parent.name + "/" + p.stem)
def test_each_pinned_predictions_file_is_the_one_its_card_publishes(card):
    from crucible.core.yaml_files import load_mapping

    wbm.check_card_names_pin(card, load_mapping(card)["model_key"])


def test_a_card_naming_another_file_is_refused(tmp_path):
    edited = tmp_path / "card.yml"
    text = CARD.read_text()
    md5 = wbm.discovery_block(CARD)["pred_file"]["md5"]
    edited.write_text(text.replace(md5, "f" * 32))
    with pytest.raises(HashMismatchError, match=f"md5 '{'f' * 32}', but config/sources.yaml pins '{md5}'"):
        wbm.check_card_names_pin(edited, "chgnet-0.3.0")


def test_every_card_has_a_pinned_predictions_file():
    cards = {r[len(data.CARD_ROLE_PREFIX) :] for r in data.card_roles()}
    assert set(wbm.prediction_models()) == cards and len(cards) == 35
    assert pinned_files.find_pin(wbm.WBM_ROLE).md5 and not pinned_files.find_pin(wbm.WBM_ROLE).sha256


def test_published_discovery_rows_of_the_card():
    rows = {r["subset"]: r for r in wbm.published_rows(CARD)}
    assert list(rows) == list(stability.SUBSETS)
    full = rows["full_test_set"]
    assert full["model"] == "chgnet-0.3.0" and full["date"] == "2023-12-21"
    assert (full["F1"], full["DAF"], full["TP"], full["missing_preds"]) == (0.612, 3.038, 32642, 2)
    assert rows["most_stable_10k"]["Precision"] == 0.851
