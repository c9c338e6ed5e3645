"""The leaderboard's files through the real download code: the chgnet-0.3.0 model card (a copy
in tests/data/discovery) fetched from a local server laid out as the repository, against the pins
of config/sources.yaml; a changed card is refused; the card's published diatomics row."""

from __future__ import annotations

import math
import shutil

import pytest

from crucible.core.errors import DataValidationError, HashMismatchError
from crucible.discovery import data
from crucible.sources import pinned_files

from helpers import REPO, StaticFileServer

CARD = REPO / "tests" / "data" / "discovery" / "chgnet-0.3.0.yml"
ROLE = "discovery/cards/chgnet-0.3.0"


@pytest.fixture
def mirror(tmp_path):
    """The repository's layout on 127.0.0.1, holding the card where upstream keeps it."""
    root = tmp_path / "www"
    mirror_path = pinned_files.load_sources()["artifacts"][pinned_files.find_pin(ROLE).artifact]["mirror_path"]
    (root / mirror_path).parent.mkdir(parents=True)
    shutil.copy(CARD, root / mirror_path)
    server = StaticFileServer(root)
    yield server, root / mirror_path
    server.close()


def test_card_is_fetched_by_the_real_download_code_and_checked(tmp_path, mirror):
    server, served = mirror
    # the card ships in data/matbench-discovery/: fetch_upstream (upstream=True) downloads it
    got = pinned_files.provide(ROLE, tmp_path / "resources", url_prefix=server.url, upstream=True)
    assert got.read_bytes() == CARD.read_bytes()
    assert server.hits == ["/models/chgnet/chgnet-0.3.0.yml"]
    pinned_files.provide(ROLE, tmp_path / "resources", url_prefix=server.url, upstream=True)
    assert len(server.hits) == 1  # present with its pin: not fetched again
    # upstream changes the card: a fresh fetch is refused, nothing is left under its name
    served.write_bytes(CARD.read_bytes().replace(b"pbe_energy_mae: 3.205", b"pbe_energy_mae: 1.000"))
    with pytest.raises(HashMismatchError, match="SHA-256 mismatch"):
        pinned_files.provide(ROLE, tmp_path / "fresh", url_prefix=server.url, upstream=True)
    assert not pinned_files.resource_path(ROLE, resources=tmp_path / "fresh").exists()


def test_by_default_the_shipped_card_is_copied_and_a_mirror_is_not_asked(tmp_path, mirror):
    server, _ = mirror
    got = pinned_files.provide(ROLE, tmp_path / "resources", url_prefix=server.url)
    assert got.read_bytes() == CARD.read_bytes() and server.hits == []


def test_every_card_and_the_reference_have_a_role_and_both_pins():
    pins = {r: pinned_files.find_pin(r) for r in [*data.card_roles(), data.REFERENCE_ROLE]}
    assert len(data.card_roles()) == 35
    for role, pin in pins.items():
        spec = pinned_files.load_sources()["artifacts"][pin.artifact]
        assert spec["sha256"] and spec["git_blob"], role
        assert "/2c7f9fc42d018711dc2f5df573d225ea6d2d17b2/" in spec["url"], role


def test_published_row_of_the_card():
    row = data.published_row(CARD)
    assert row["model"] == "chgnet-0.3.0" and row["date"] == "2026-06-29" and row["source"] == "published"
    assert row["pbe_energy_mae"] == 3.205 and row["force_jump"] == 205.5 and row["hardware"] == "NVIDIA H200"


def test_pinned_read_refuses_an_edited_card(tmp_path):
    edited = tmp_path / pinned_files.resource_path(ROLE).name
    edited.write_bytes(CARD.read_bytes() + b"\n")
    with pytest.raises(HashMismatchError, match="differs from the pin"):
        data.published_row(edited, ROLE)


def test_card_without_a_diatomics_block_and_a_bad_value(tmp_path):
    none = tmp_path / "a.yml"
    none.write_text("model_key: a\nmetrics: {discovery: {}}\n")
    assert data.published_row(none) is None
    bad = tmp_path / "b.yml"
    bad.write_text("model_key: b\nmetrics: {diatomics: {tortuosity: high}}\n")
    with pytest.raises(DataValidationError, match="metrics.diatomics.tortuosity"):
        data.published_row(bad)
    part = tmp_path / "c.yml"
    part.write_text("model_key: c\ndates: {benchmark_added: '2025-01-02'}\nmetrics: {diatomics: {tortuosity: 1.5}}\n")
    row = data.published_row(part)
    assert row["date"] == "2025-01-02" and row["tortuosity"] == 1.5 and math.isnan(row["pbe_energy_mae"])
