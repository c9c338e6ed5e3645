"""Files that ship in the repository (issue 52): every artifact of config/sources.yaml that declares
``shipped:`` lies at that path under data/, byte for byte what its SHA-256 and git blob id pin,
beside its source's LICENSE and a README that lists it with both pins. Its fetch copies it (no
network) through the same verification as a download; ``upstream`` downloads it instead; a copy
that differs from its pins is refused and kept aside; a sources file whose shipped path leaves
data/ is refused."""

from __future__ import annotations

import copy
import re
import shutil

import pytest

from crucible.core.errors import ConfigError, CrucibleError, HashMismatchError
from crucible.core.hashes import pin_mismatch
from crucible.sources import downloads, pins

from helpers import REPO, StaticFileServer, sources


def _shipped() -> dict[str, dict]:
    return {name: spec for name, spec in sources()["artifacts"].items() if spec.get("shipped")}


def test_every_shipped_file_is_there_with_its_pins_licence_and_readme():
    shipped = _shipped()
    # the diatomics reference and the 35 model cards; the κ_SRME structures, reference and CHGNet run
    assert len(shipped) == 40
    folders = set()
    for name, spec in shipped.items():
        path = REPO / spec["shipped"]
        assert path.is_file(), name
        assert spec["sha256"] and spec["git_blob"], name
        assert pin_mismatch(path, sha256=spec["sha256"], git_blob=spec["git_blob"]) is None, name
        # each shipped set has its own switch beside its own mirror key (the leaderboard's files:
        # discovery.*, k_SRME's: discovery.phonons.*)
        section = spec["mirror_config"].rpartition(".")[0]
        assert section in ("discovery", "discovery.phonons"), name
        assert spec["upstream_config"] == f"{section}.fetch_upstream", name
        # at its upstream path: the mirror's layout, the URL's tail
        assert spec["shipped"].endswith("/" + spec["mirror_path"]) and spec["url"].endswith("/" + spec["mirror_path"])
        folders.add(REPO / "data" / spec["shipped"].split("/")[1])
    for folder in folders:
        readme = (folder / "README.md").read_text(encoding="utf-8")
        assert (folder / "LICENSE").is_file(), folder
        for spec in shipped.values():
            if (REPO / spec["shipped"]).is_relative_to(folder):
                assert spec["mirror_path"] in readme and spec["sha256"] in readme and spec["git_blob"] in readme


def _one() -> tuple[str, dict]:
    name, spec = next(iter(sorted(_shipped().items())))
    return name, spec


def test_the_fetch_copies_the_shipped_file_and_upstream_downloads_it(tmp_path, monkeypatch):
    monkeypatch.setenv(downloads.OFFLINE_VAR, "1")  # no host may be asked for the copy
    name, spec = _one()
    got = downloads.fetch(name, pins.origin_spec(spec, REPO), tmp_path / "a" / spec["filename"])
    assert got.read_bytes() == (REPO / spec["shipped"]).read_bytes()
    www = tmp_path / "www"
    (www / spec["mirror_path"]).parent.mkdir(parents=True)
    shutil.copy(REPO / spec["shipped"], www / spec["mirror_path"])
    server = StaticFileServer(www)
    try:
        upstream = pins.origin_spec(spec, REPO, url_prefix=server.url, upstream=True)
        assert "shipped" not in upstream and upstream["url"] == f"{server.url}/{spec['mirror_path']}"
        downloads.fetch(name, upstream, tmp_path / "b" / spec["filename"])
    finally:
        server.close()
    assert server.hits == [f"/{spec['mirror_path']}"]
    assert (tmp_path / "b" / spec["filename"]).read_bytes() == got.read_bytes()


def test_a_shipped_copy_that_differs_from_its_pins_is_refused_and_kept_aside(tmp_path):
    name, spec = _one()
    root = tmp_path / "clone"
    edited = root / spec["shipped"]
    edited.parent.mkdir(parents=True)
    edited.write_bytes((REPO / spec["shipped"]).read_bytes() + b"\n")
    dest = tmp_path / "downloads" / spec["filename"]
    with pytest.raises(HashMismatchError, match=rf"SHA-256 mismatch for artifact '{name}' \({edited}\)"):
        downloads.fetch(name, pins.origin_spec(spec, root), dest)
    assert not dest.exists() and len(list(dest.parent.glob(dest.name + ".bad-*"))) == 1
    edited.unlink()
    switch = re.escape(spec["upstream_config"])  # the first shipped file is a k_SRME one: discovery.phonons.*
    with pytest.raises(CrucibleError, match=rf"{edited}: missing.*git checkout.*{switch}: true"):
        downloads.fetch(name, pins.origin_spec(spec, root), dest)


@pytest.mark.parametrize("shipped", ["/etc/passwd", "data/../config/x.yml", "resources/x.yml"])
def test_a_shipped_path_outside_data_is_refused(tmp_path, shipped):
    import yaml

    doc = copy.deepcopy(sources())
    name, _ = _one()
    doc["artifacts"][name]["shipped"] = shipped
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match=rf"artifact '{name}': shipped .* must be a path under data/"):
        pins.load_sources(path)


def test_upstream_config_without_a_shipped_file_is_refused(tmp_path):
    import yaml

    doc = copy.deepcopy(sources())
    name, _ = _one()
    del doc["artifacts"][name]["shipped"]
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(ConfigError, match="upstream_config without shipped"):
        pins.load_sources(path)
