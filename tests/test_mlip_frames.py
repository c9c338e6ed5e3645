"""crucible.mlip.frames: reference frames from ASE's VASP test files, extended XYZ and ASE
databases; a potential's energies and forces on them, a failure kept with its reason, a wrong
force shape refused, and forces byte-identical run to run."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest
from ase.calculators.calculator import Calculator, all_changes

from crucible.core.errors import DataValidationError
from crucible.potentials.registry import load_potential


@pytest.fixture(scope="module")
def emt():
    return load_potential("emt")


@pytest.fixture(scope="module")
def chgnet():
    pytest.importorskip("chgnet", reason="chgnet needs torch, absent on the Python 3.12 CI leg")
    return load_potential("chgnet-0.3.0", device="cpu")


class _Fake(Calculator):
    """Energies from a function of the volume per atom, forces of a chosen shape."""

    implemented_properties = ["energy", "forces"]

    def __init__(self, fn, forces_shape=None):
        super().__init__()
        self.fn, self.forces_shape = fn, forces_shape

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        n = len(atoms)
        self.results["energy"] = self.fn(atoms.get_volume() / n) * n
        self.results["forces"] = np.zeros(self.forces_shape or (n, 3))


def test_read_ase_vasp_testdata():
    from crucible.mlip.frames import read_frames

    frames = read_frames("ase-vasp-testdata")
    assert [f.atoms.get_chemical_formula() for f in frames] == ["Ni18", "C2", "ClNa"]
    assert frames[0].energy_ref == pytest.approx(-68.23102426)
    assert all(f.forces_ref.shape == (len(f.atoms), 3) and f.atoms.calc is None for f in frames)


def test_read_extxyz_and_db_roundtrip(tmp_path):
    from ase.build import bulk
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.io import write

    from crucible.mlip.frames import read_frames

    images = []
    for i, a in enumerate([3.5, 3.6]):
        atoms = bulk("Cu", "fcc", a=a, cubic=True)
        atoms.calc = SinglePointCalculator(atoms, energy=-1.0 - i, forces=np.full((4, 3), 0.1 * i))
        images.append(atoms)
    for name in ("frames.extxyz", "frames.db"):
        write(tmp_path / name, images)
        frames = read_frames(tmp_path / name)
        assert [f.frame_id for f in frames] == [f"{name}:0", f"{name}:1"]
        assert [f.energy_ref for f in frames] == [-1.0, -2.0]
        assert frames[1].forces_ref[0, 0] == pytest.approx(0.1)
    write(tmp_path / "bare.extxyz", bulk("Cu"))
    with pytest.raises(DataValidationError, match="bare.extxyz, frame 0: no reference energy"):
        read_frames(tmp_path / "bare.extxyz")
    with pytest.raises(DataValidationError, match="does not exist"):
        read_frames(tmp_path / "missing.xyz")


def test_a_reference_energy_of_a_boolean_is_refused_by_frame_and_field(tmp_path):
    """Extended XYZ's energy=T is True to ASE, and float(True) made it a reference of 1.0 eV."""
    from crucible.mlip.frames import read_frames

    head = 'Lattice="5 0 0 0 5 0 0 0 5" Properties=species:S:1:pos:R:3:forces:R:3 energy={e} pbc="T T T"'
    rows = ["Cu 0 0 0 0.0 0.0 0.0", "Cu 1.8 1.8 0 0.0 0.0 0.0"]
    (tmp_path / "bool.xyz").write_text("\n".join(["2", head.format(e="T"), *rows]) + "\n")
    with pytest.raises(
        DataValidationError, match=r"bool.xyz, frame 0: reference energy \(field 'energy'\) True is a bool"
    ):
        read_frames(tmp_path / "bool.xyz")
    (tmp_path / "ok.xyz").write_text("\n".join(["2", head.format(e="-1.5"), *rows]) + "\n")
    assert read_frames(tmp_path / "ok.xyz")[0].energy_ref == -1.5


def test_s2ef_predict_emt_and_score(emt):
    from crucible.mlip.frames import predict_frames, read_frames
    from crucible.mlip.s2ef_scoring import score_s2ef

    df = predict_frames(read_frames("ase-vasp-testdata"), emt, progress=False)
    assert list(df["status"].str[:4]) == ["ok", "ok", "NotI"]  # EMT has no Na/Cl: kept, with reason
    assert math.isnan(df.loc[2, "energy_pred"]) and df.loc[2, "forces_pred"] is None
    scores = score_s2ef(df)
    assert scores["n_frames"] == 3 and scores["n_ok"] == 2 and sum(scores["failures"].values()) == 1


def test_s2ef_predict_chgnet(chgnet):
    from crucible.mlip.frames import predict_frames, read_frames

    df = predict_frames(read_frames("ase-vasp-testdata")[1:], chgnet, progress=False)
    assert (df["status"] == "ok").all()
    assert [len(f) for f in df["forces_pred"]] == [2, 2]


def test_s2ef_bad_force_shape_raises():
    from crucible.mlip.frames import predict_frames, read_frames

    frames = read_frames("ase-vasp-testdata")[1:2]
    with pytest.raises(DataValidationError, match=r"shape \(3, 3\), expected \(2, 3\)"):
        predict_frames(frames, _Fake(lambda v: -1.0, forces_shape=(3, 3)), progress=False)


@pytest.mark.slow  # loads SevenNet three times (~10 s each)
def test_s2ef_forces_are_byte_identical_run_to_run_on_two_threads(tmp_path):
    """Two torch threads summed SevenNet's force backward in a different order on every run
    (forces moved by ~5e-7): the CLI asks torch for deterministic kernels."""
    pytest.importorskip("sevenn", reason="SevenNet needs torch, absent on the Python 3.12 CI leg")
    outs = []
    for i in range(3):
        out = tmp_path / f"run{i}.parquet"
        cmd = [sys.executable, "-m", "crucible.cli", "mlip", "s2ef-predict", "--dataset", "ase-vasp-testdata"]
        cmd += ["--model", "sevennet-0", "--threads", "2", "--out", str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == outs[2]


def test_predictions_follow_the_schema_and_keep_the_references(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet  # noqa: F401 - pa.parquet

    from crucible.core.io import write_parquet
    from crucible.mlip.frames import predict_frames, prediction_schema, read_frames

    frames = read_frames("ase-vasp-testdata")[1:]
    df = predict_frames(frames, _Fake(lambda v: -2.0), progress=False)
    assert list(df["frame_id"]) == [f.frame_id for f in frames]
    assert list(df["energy_ref"]) == [f.energy_ref for f in frames]
    assert list(df["energy_pred"]) == [-2.0 * len(f.atoms) for f in frames]
    path = tmp_path / "p.parquet"
    write_parquet(df, path, schema=prediction_schema())
    assert pa.parquet.read_schema(path).remove_metadata().equals(prediction_schema().remove_metadata())
