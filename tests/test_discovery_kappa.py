"""The κ_SRME task: structure frames, the metrics on hand-checkable inputs and on the PBE
reference, the mode split of the coherence term, the imaginary-mode test, failures, the published
run's reader and the workflow's plan."""

from __future__ import annotations

import gzip
import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from crucible.core.errors import ConfigError, DataValidationError
from crucible.discovery.phonons import metrics
from crucible.discovery.phonons.conductivity import has_imaginary_modes, mode_kappa_total
from crucible.discovery.phonons.structures import read_structures, select

ROOT = Path(__file__).resolve().parents[1]
STRUCTURES = ROOT / "data/k-srme/data/phononDB-PBE-structures.extxyz"
REFERENCE = ROOT / "data/k-srme/data/kappas_phononDB_PBE_noNAC.json.gz"
PUBLISHED = ROOT / "data/k-srme/models/CHGNet/metrics.txt"
FRAME = """2
Lattice="4.2 0.0 0.0 0.0 4.2 0.0 0.0 0.0 4.2" Properties=species:S:1:pos:R:3 {fields} pbc="T T T"
Mg 0.0 0.0 0.0
O 2.1 2.1 2.1
"""
SETTINGS = {
    "fc2_supercell": 'fc2_supercell="_JSON [[2, 0, 0], [0, 2, 0], [0, 0, 2]]"',
    "fc3_supercell": 'fc3_supercell="_JSON [[1, 0, 0], [0, 1, 0], [0, 0, 1]]"',
    "q_mesh": 'q_mesh="_JSON [4, 4, 4]"',
    "mp_id": "mp_id=mp-x",
}


def _frames(tmp_path, *frames: dict[str, str]) -> Path:
    path = tmp_path / "s.extxyz"
    path.write_text("".join(FRAME.format(fields=" ".join(f.values())) for f in frames))
    return path


@pytest.mark.parametrize("field", sorted(SETTINGS))
def test_a_frame_without_a_setting_is_refused_naming_frame_and_field(tmp_path, field):
    good = dict(SETTINGS, mp_id="mp_id=mp-a")
    bad = {k: v for k, v in SETTINGS.items() if k != field}
    path = _frames(tmp_path, good, bad)
    with pytest.raises(DataValidationError, match=rf"frame 1\b.*missing field\(s\) {field}"):
        read_structures(path, check_pin=False)
    assert read_structures(_frames(tmp_path, good), check_pin=False)[0].q_mesh == (4, 4, 4)


def test_a_malformed_mesh_or_supercell_is_refused(tmp_path):
    with pytest.raises(DataValidationError, match="frame 0.*q_mesh"):
        read_structures(_frames(tmp_path, dict(SETTINGS, q_mesh='q_mesh="_JSON [4, 4]"')), check_pin=False)
    singular = 'fc3_supercell="_JSON [[1, 0, 0], [0, 1, 0], [0, 0, 0]]"'
    with pytest.raises(DataValidationError, match="fc3_supercell.*singular"):
        read_structures(_frames(tmp_path, dict(SETTINGS, fc3_supercell=singular)), check_pin=False)


def test_the_shipped_structures_are_the_103_crystals_and_are_selected_by_id_label_or_name():
    materials = read_structures(STRUCTURES)  # through its pin
    assert len(materials) == 103
    assert {m.structure_type for m in materials} == {"rs", "zb", "wz"}
    assert [m.desc for m in select(materials, ["mp-1265"])] == ["MgO-rs"]
    assert [m.mp_id for m in select(materials, ["MgO-rs"])] == ["mp-1265"]
    assert sorted(m.desc for m in select(materials, ["ZnS"])) == ["ZnS-wz", "ZnS-zb"]
    assert len(select(materials, "all")) == 103
    with pytest.raises(ConfigError, match="'Unobtainium'"):
        select(materials, ["Unobtainium"])


def test_srd_sre_srme_on_hand_checkable_numbers():
    assert metrics.srd(3.0, 1.0) == pytest.approx(1.0)  # 2 (3 - 1) / 4
    assert metrics.srd(math.nan, 1.0) == -2.0
    # two modes at two q-points, weights 1 + 3: error Σ|Δ| / W = (1 + 3) / 4 = 1
    ml, dft = np.array([[1.0, 2.0], [0.0, 5.0]]), np.array([[0.0, 2.0], [0.0, 8.0]])
    assert metrics.srme(ml, [1, 3], 2.0, dft, 2.5) == pytest.approx(2 * 1.0 / 4.5)
    assert metrics.srme(ml, [1, 3], 2.0, dft[:, :1], 2.5) == 2.0  # modes that do not match
    assert metrics.srme(ml * np.nan, [1, 3], 2.0, dft, 2.5) == 2.0
    assert metrics.kappa_average([[1, 2, 3, 9, 9, 9]]) == pytest.approx(2.0)
    assert metrics.kappa_average(np.diag([1.0, 2.0, 6.0])) == pytest.approx(3.0)


def _reference():
    doc = json.loads(gzip.decompress(REFERENCE.read_bytes()))
    i = next(k for k, v in doc["mp_id"].items() if v == "mp-1265")
    return {key: doc[key][i] for key in ("kappa_TOT_ave", "mode_kappa_TOT_ave", "weights")}


def test_srme_of_the_reference_against_itself_and_twice_itself():
    ref = _reference()
    same = {"failure": None, **ref}
    s = metrics.score(same, ref)
    assert s["SRME"] == pytest.approx(0.0) and s["SRD"] == pytest.approx(0.0) and not s["failed"]
    assert s["DFT_kappa_TOT_ave"] == pytest.approx(47.93114, abs=1e-4)
    # every mode doubled: Σ|Δ| / W = κ, so SRME = 2 κ / (2 κ + κ) = 2/3 and SRD = 2/3 too
    doubled = {
        "failure": None,
        "weights": ref["weights"],
        "kappa_TOT_ave": [2 * ref["kappa_TOT_ave"][0]],
        "mode_kappa_TOT_ave": (2 * np.asarray(ref["mode_kappa_TOT_ave"])).tolist(),
    }
    s = metrics.score(doubled, ref)
    assert s["SRME"] == pytest.approx(2 / 3) and s["SRD"] == pytest.approx(2 / 3)
    failed = metrics.score({"failure": "imaginary modes", "has_imaginary_modes": True}, ref)
    assert (failed["SRME"], failed["SRE"], failed["SRD"], failed["failed"]) == (2.0, 2.0, -2.0, True)
    m = metrics.means([s, failed])
    assert m["SRME"] == pytest.approx((2 / 3 + 2) / 2) and m["failure_rate"] == 0.5 and m["imaginary_mode_rate"] == 0.5


def test_the_coherence_term_is_split_by_heat_capacity():
    a, b, d = 1.0, 4.0, 2.0
    matrix = np.zeros((1, 1, 2, 2, 6))
    matrix[0, 0, :, :, 0] = [[a, b], [b, d]]
    c = np.array([[[1.0, 3.0]]])
    out = mode_kappa_total(matrix, c)[0, 0, :, 0]
    # mode 0 takes 2·C₁/(C₀+C₁) = 3/2 of the pair's b, mode 1 takes 2·C₀/(C₀+C₁) = 1/2
    assert out == pytest.approx([a + 1.5 * b, d + 0.5 * b])
    assert out.sum() == pytest.approx(a + d + 2 * b)
    none = mode_kappa_total(matrix, np.zeros((1, 1, 2)))  # no heat capacity: no conductivity
    assert (none == 0).all()


def test_the_imaginary_mode_test():
    ok = np.array([[-0.005, 0.0, 0.0, 5.0], [1.0, 2.0, 3.0, 4.0]])
    assert not has_imaginary_modes(ok)
    assert has_imaginary_modes(np.array([[-0.02, 0, 0, 5.0], [1, 2, 3, 4.0]]))  # acoustic at Γ below -0.01
    assert has_imaginary_modes(np.array([[0, 0, 0, -1e-3], [1, 2, 3, 4.0]]))  # optical at Γ
    assert has_imaginary_modes(np.array([[0, 0, 0, 5.0], [1, -1e-4, 3, 4.0]]))  # elsewhere
    assert has_imaginary_modes(np.full((2, 4), np.nan))


def test_a_non_finite_force_is_named():
    from ase import Atoms
    from ase.calculators.calculator import Calculator, all_changes

    from crucible.discovery.phonons.forces import NonFiniteForce, forces_of

    class Broken(Calculator):
        implemented_properties = ["energy", "forces"]

        def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
            super().calculate(atoms, properties, system_changes)
            f = np.zeros((len(self.atoms), 3))
            f[1, 2] = np.nan
            self.results = {"energy": 0.0, "forces": f}

    atoms = Atoms("Mg2", positions=[[0, 0, 0], [2, 0, 0]], cell=[5, 5, 5], pbc=True)
    assert forces_of(Broken(), [None]).shape == (1, 0, 3)
    with pytest.raises(NonFiniteForce, match="structure 1: non-finite forces"):
        forces_of(Broken(), [None, atoms])


def test_the_published_run_is_read_per_material():
    from crucible.discovery.phonons.report import read_published_run

    rows = read_published_run(PUBLISHED)
    assert len(rows) == 103
    mgo = rows["mp-1265"]
    assert (mgo["desc"], mgo["SRME"], mgo["kappa_TOT_ave"], mgo["failed"]) == ("MgO-rs", 0.7958, 22.2164, False)
    assert rows["mp-8884"]["failed"] and math.isnan(rows["mp-8884"]["kappa_TOT_ave"])
    # its mean SRME is the one metrics.txt prints
    assert np.mean([r["SRME"] for r in rows.values()]) == pytest.approx(1.71699, abs=1e-4)


def test_the_plan_counts_chunks_from_the_shipped_displacement_counts():
    from crucible.dag.config import check_schema
    from crucible.discovery.phonons import workflow as wf

    config = {
        "discovery": {"phonons": {"potentials": ["chgnet-0.3.0"], "materials": ["MgO-rs", "ZnS"], "chunk_size": 50}}
    }
    check_schema(config)
    assert set(wf.materials(config)) == {"mp-1265", "mp-10695", "mp-561286"}  # MgO, ZnS zb and wz
    assert wf.counts()["mp-1265"]["fc3"] == 146
    assert len(wf.counts()) == 103
    assert wf.chunk_files(config, "chgnet-0.3.0", "mp-1265")[-1].endswith("mp-1265/fc3_2.json")  # 146 / 50: 3 chunks
    assert "results/discovery/phonons/chgnet-0.3.0.json.gz" in wf.final_outputs(config)
    # the force rules' variants: a CPU potential's jobs in the plain rules, a network's in *_neural
    both = {"discovery": {"phonons": {**config["discovery"]["phonons"], "potentials": ["emt", "chgnet-0.3.0"]}}}
    check_schema(both)
    assert wf.potential_pattern(both, "cpu") == "emt" and wf.potential_pattern(both, "gpu") == r"chgnet\-0\.3\.0"
    assert wf.potential_pattern(config, "cpu") == "(?!x)x"  # matches no potential
    with pytest.raises(ConfigError, match="discovery.phonons.materials"):
        wf.materials({"discovery": {"phonons": {"materials": ["nope"], "potentials": [], "chunk_size": 1}}})


@pytest.mark.parametrize("threads", [1, 3])
def test_the_phonon_jobs_hold_phono3py_to_their_threads(threads):
    """phono3py's Rust kernels (phonors) size their rayon pool from RAYON_NUM_THREADS, read at their
    first parallel call, not from the OMP_NUM_THREADS the rule sets: the jobs set it from --threads
    (1 and 3: no machine's core count makes both hold by default)."""
    pytest.importorskip("phonors")
    import subprocess
    import sys

    code = (
        "from crucible.discovery.phonons.jobs import _thread_budget; import phonors; "
        f"_thread_budget({threads}); print(phonors.rayon_max_threads())"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAYON_NUM_THREADS"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == [str(threads)]


@pytest.mark.slow
def test_tiny_end_to_end_on_mgo_with_chgnet(tmp_path, monkeypatch):
    """Every job of one material in order, on MgO's conventional cell as its own supercell and a
    4×4×4 mesh (seconds, not the benchmark's 64/512-atom cells and 19³ mesh); then a chunk whose
    potential returns a non-finite force turns the material into a recorded failure."""
    pytest.importorskip("chgnet")
    pytest.importorskip("phono3py")
    from dataclasses import replace

    from crucible.core.io import read_json
    from crucible.discovery.phonons import jobs, scoring
    from crucible.discovery.phonons.structures import by_id

    mgo = by_id(read_structures(STRUCTURES), "mp-1265")
    small = replace(
        mgo,
        fc2_supercell=((1, 0, 0), (0, 1, 0), (0, 0, 1)),
        fc3_supercell=((1, 0, 0), (0, 1, 0), (0, 0, 1)),
        q_mesh=(4, 4, 4),
    )
    monkeypatch.setattr(jobs, "_material", lambda structures, material: small)
    d = tmp_path / "chgnet-0.3.0" / "mp-1265"
    common = dict(potential="chgnet-0.3.0", material="mp-1265", structures=str(STRUCTURES), device="cpu", threads=1)
    jobs.relax(out=str(d / "relaxed.json"), **common)
    relaxed = read_json(d / "relaxed.json")
    assert relaxed["failure"] is None and relaxed["final_spacegroup"] == 225 and relaxed["stage1_converged"]
    jobs.fc2(relaxed=str(d / "relaxed.json"), out=str(d / "fc2.json"), **common)
    second = read_json(d / "fc2.json")
    assert second["failure"] is None and second["has_imaginary_modes"] is False
    size = 2
    from crucible.discovery.phonons.forces import build_phono3py, count
    from crucible.discovery.phonons.relaxation import atoms_of

    n3 = count(build_phono3py(atoms_of(relaxed), small.fc2_supercell, small.fc3_supercell, small.q_mesh), 3)
    chunks = [str(d / f"fc3_{c}.json") for c in range(-(-n3 // size) + 1)]  # one past the end: empty
    for c, path in enumerate(chunks):
        jobs.fc3(relaxed=str(d / "relaxed.json"), fc2=str(d / "fc2.json"), chunk=c, chunk_size=size, out=path, **common)
    assert read_json(chunks[-1])["forces"] is None and read_json(chunks[-1])["failure"] is None

    def conductivity(out: Path) -> dict:
        jobs.conductivity(
            material="mp-1265",
            structures=str(STRUCTURES),
            relaxed=str(d / "relaxed.json"),
            fc2=str(d / "fc2.json"),
            chunks=chunks,
            out=str(out),
            threads=1,
        )
        return read_json(out)

    result = conductivity(d / "kappa.json")
    assert result["failure"] is None and result["kappa_TOT_ave"][0] > 0 and result["mode_sum_residual"] < 1e-6
    # a chunk with a non-finite force: the material fails with the reason, SRME 2, no crash
    bad = json.loads(Path(chunks[0]).read_text())
    bad.update(forces=None, shape=None, failure="non-finite force from the potential: structure 0")
    Path(chunks[0]).write_text(json.dumps(bad))
    assert conductivity(tmp_path / "failed.json")["failure"].startswith("non-finite force")
    scoring.score(
        "chgnet-0.3.0",
        [str(d / "kappa.json"), str(tmp_path / "failed.json")],
        str(REFERENCE),
        str(tmp_path / "pred.json.gz"),
        str(tmp_path / "scores.json"),
    )
    scores = read_json(tmp_path / "scores.json")
    ok, failed = scores["materials"]
    assert failed["failure"].startswith("non-finite force") and failed["SRME"] == 2.0 and failed["failed"]
    # the 4×4×4 mesh's modes are not the reference's 19³: scored 2, but κ is a number
    assert ok["kappa_TOT_ave"] == pytest.approx(result["kappa_TOT_ave"][0]) and ok["SRME"] == 2.0
    rows = json.loads(gzip.decompress((tmp_path / "pred.json.gz").read_bytes()))
    assert rows[0]["material_id"] == "mp-1265" and np.shape(rows[0]["kappa_tot_rta"]) == (1, 6)
    assert rows[1]["errors"] and rows[1]["conductivity_skipped"]


def test_the_shipped_displacement_counts_are_phono3pys():
    """The DAG's chunk plan against phono3py itself, on a rock salt, a zinc blende and a wurtzite
    (python -m crucible.discovery.phonons.counts rewrites the file after a phono3py upgrade)."""
    pytest.importorskip("phono3py")
    import phono3py

    from crucible.discovery.phonons import workflow as wf
    from crucible.discovery.phonons.counts import counts_of
    from crucible.discovery.phonons.structures import by_id

    doc = json.loads(wf.COUNTS.read_text())
    assert doc["phono3py"] == phono3py.__version__
    materials = read_structures(STRUCTURES)
    for mp_id in ("mp-1265", "mp-10695", "mp-2133"):
        assert counts_of(by_id(materials, mp_id)) == wf.counts()[mp_id], mp_id
