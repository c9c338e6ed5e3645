"""crucible.sources.workflow: the fetch and extract rules' patterns and arguments come from the
sources file alone."""

from __future__ import annotations

import re

import pytest

from crucible.core.errors import ConfigError
from crucible.sources import pinned_files
from crucible.sources import workflow as swf

DOC = {
    "artifacts": {
        "pkg-1.0": {"filename": "pkg-1.0-py3-none-any.whl", "members": {"b.csv": {}, "a.csv": {}}},
        "set-train": {"filename": "set-train.csv", "mirror_config": "crystal.cdvae_url_prefix"},
    }
}


def _matches(pattern: str, text: str) -> bool:
    return re.fullmatch(f"(?:{pattern})", text) is not None


def test_fetch_rule_takes_exactly_the_pinned_downloads():
    pattern = swf.filename_pattern(DOC)
    assert _matches(pattern, "pkg-1.0-py3-none-any.whl") and _matches(pattern, "set-train.csv")
    # never a matminer task download or a user dataset: other rules make those
    assert not _matches(pattern, "matbench_steels.json.gz") and not _matches(pattern, "user/x.json.gz")
    assert swf.download_file(DOC, "pkg-1.0") == "resources/downloads/pkg-1.0-py3-none-any.whl"
    assert swf.artifact_saved_as(DOC, "set-train.csv") == "set-train"
    with pytest.raises(ConfigError, match="no artifact in config/sources.yaml is saved as x.whl"):
        swf.artifact_saved_as(DOC, "x.whl")


def test_extract_rule_takes_archives_and_their_members():
    assert _matches(swf.archive_pattern(DOC), "pkg-1.0") and not _matches(swf.archive_pattern(DOC), "set-train")
    assert _matches(swf.member_pattern(DOC), "a.csv") and not _matches(swf.member_pattern(DOC), "a_csv")


def test_mirror_comes_from_the_config_key_the_artifact_names():
    cfg = {"crystal": {"cdvae_url_prefix": "http://127.0.0.1:9/my mirror"}}
    assert swf.mirror_url_prefix(cfg, DOC, "set-train") == "http://127.0.0.1:9/my mirror"
    assert swf.mirror_url_prefix({}, DOC, "set-train") == "" and swf.mirror_url_prefix(cfg, DOC, "pkg-1.0") == ""


def test_every_role_of_the_real_file_is_made_by_a_rule():
    """The fetch rule makes every download, the extract rule every member: together every role
    (but an installed package's file, which is read where the package keeps it)."""
    doc = pinned_files.load_sources()
    for role, pin in pinned_files.roles(doc).items():
        if pin.package:
            assert not pin.location.startswith(("downloads/", "extracted/")), role
            continue
        name = pin.location.split("/")[-1]
        if pin.member is None:
            assert _matches(swf.filename_pattern(doc), name), role
        else:
            assert _matches(swf.archive_pattern(doc), pin.artifact) and _matches(swf.member_pattern(doc), name), role


def test_the_fetch_rules_pin_param_changes_with_a_version_bump_only():
    """The fetch rule's params hold the download's source and pins: a bump reruns it."""
    doc = {
        "artifacts": {
            "set-train": {"kind": "http", "url": "http://x/v1.csv", "filename": "set-train.csv", "git_blob": "a" * 40}
        }
    }
    before = swf.download_pin(doc, "set-train")
    doc["artifacts"]["set-train"]["mirror_path"] = "v1.csv"  # not the download's identity
    assert swf.download_pin(doc, "set-train") == before
    doc["artifacts"]["set-train"].update(url="http://x/v2.csv", git_blob="b" * 40)
    after = swf.download_pin(doc, "set-train")
    assert after != before and "v2.csv" in after and "b" * 40 in after
