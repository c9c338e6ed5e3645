"""Reference data read from installed packages (section ``installed`` of config/sources.yaml) is
pinned like any member: the EOS references, the s2ef test data, the Magpie tables and matminer's
dataset catalogue are checked against their SHA-256 where they are read. Edits are made on copies
(the package folder is pointed at a temporary one), never on the installed package."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from crucible.cli import main
from crucible.core.errors import HashMismatchError
from crucible.mlip import eos
from crucible.sources import pinned_files


@pytest.fixture
def ase_copy(tmp_path, monkeypatch):
    """A copy of the files the installed ase's pins name, standing in for the package folder."""
    real = pinned_files.package_dir("ase")
    root = tmp_path / "site" / "ase"
    for pin in pinned_files.roles().values():
        if pin.package == "ase":
            (root / pin.location).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(real / pin.location, root / pin.location)
    original = pinned_files.package_dir
    monkeypatch.setattr(pinned_files, "package_dir", lambda package: root if package == "ase" else original(package))
    eos._collection.cache_clear()
    yield root
    eos._collection.cache_clear()


def test_every_installed_pin_matches_the_installed_package():
    """requirements.lock installs exactly the files pinned (else a clean clone could not run)."""
    installed = {r: p for r, p in pinned_files.roles().items() if p.package}
    assert {p.package for p in installed.values()} == {"ase", "matminer"}
    assert {"mlip/eos/dcdft", "matminer/dataset-catalogue", "features/magpie/Number"} <= set(installed)
    for role in installed:
        assert pinned_files.pinned(role).is_file()
        assert pinned_files.provide(role) == pinned_files.pinned(role)  # nothing to fetch


def _edit_cu_volume(root, new_volume: float) -> None:
    path = root / "collections" / "dcdft.json"
    doc = json.loads(path.read_text())
    for key in doc["ids"]:
        kvp = doc[str(key)]["key_value_pairs"]
        if kvp["name"] == "Cu":
            kvp["wien2k_volume"] = new_volume
    path.write_text(json.dumps(doc))


def test_edited_eos_reference_stops_the_eos_benchmark(ase_copy, tmp_path, capsys):
    out = tmp_path / "eos.parquet"
    assert main(["mlip", "eos", "--model", "emt", "--elements", "Cu", "--out", str(out)]) == 0
    delta = float(pd.read_parquet(out)["delta_mev"].iloc[0])
    assert delta == pytest.approx(11.87, abs=0.01)  # EMT's Δ for Cu against the pinned WIEN2k V0

    _edit_cu_volume(ase_copy, 12.5)  # was 11.9511 Å³/atom; read unchecked, Δ became 28.79 meV/atom
    out.unlink()
    assert main(["mlip", "eos", "--model", "emt", "--elements", "Cu", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "collections/dcdft.json" in err and "'mlip/eos/dcdft'" in err and "ase 3.29.0" in err
    assert "differs from the pin" in err and "--force-reinstall" in err
    assert not out.exists()


def test_edited_s2ef_testdata_is_refused(ase_copy):
    from crucible.mlip.frames import read_frames

    assert len(read_frames("ase-vasp-testdata")) > 0
    path = ase_copy / "test" / "testdata" / "vasp" / "vasprun_pstress.xml"
    path.write_text(path.read_text().replace("<energy>", "<energy> ", 1))
    with pytest.raises(HashMismatchError, match="vasprun_pstress.xml.*mlip/s2ef/ase-vasp-testdata/vasprun_pstress"):
        read_frames("ase-vasp-testdata")


def test_missing_installed_file_names_the_role_and_the_fix(ase_copy):
    (ase_copy / "collections" / "dcdft.json").unlink()
    with pytest.raises(Exception, match=r"missing; it should hold 'mlip/eos/dcdft'.*pip install --force-reinstall"):
        eos.dcdft_elements()


def test_matminer_catalogue_and_magpie_tables_are_read_through_their_pins(tmp_path, monkeypatch):
    from crucible.features import magpie

    real = pinned_files.package_dir("matminer")
    root = tmp_path / "matminer"
    for pin in pinned_files.roles().values():
        if pin.package == "matminer":
            (root / pin.location).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(real / pin.location, root / pin.location)
    original = pinned_files.package_dir
    monkeypatch.setattr(
        pinned_files, "package_dir", lambda package: root if package == "matminer" else original(package)
    )
    assert "matbench_steels" in pinned_files.matminer_metadata()
    catalogue = root / "datasets" / "dataset_metadata.json"
    catalogue.write_text(catalogue.read_text().replace('"hash"', '"hash" ', 1))
    with pytest.raises(HashMismatchError, match="matminer/dataset-catalogue"):
        pinned_files.matminer_metadata()
    table = root / "utils" / "data_files" / "magpie_elementdata" / "Number.table"
    table.write_text("0\n" + table.read_text())
    magpie._tables.cache_clear()
    try:
        with pytest.raises(HashMismatchError, match="features/magpie/Number"):
            magpie._tables()
    finally:
        magpie._tables.cache_clear()


def test_installed_section_needs_version_role_and_sha(tmp_path):
    doc = pinned_files.load_sources()
    doc["installed"]["ase"]["files"]["collections/g2.json"] = {"role": "x/g2"}
    bad = tmp_path / "sources.yaml"
    import yaml

    bad.write_text(yaml.safe_dump(doc))
    with pytest.raises(
        Exception, match="installed package 'ase' file 'collections/g2.json': needs 'role' and 'sha256'"
    ):
        pinned_files.load_sources(bad)
