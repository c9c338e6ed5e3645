"""CatBench 1.1.6 itself as the peer (installed from PyPI in the test environment, like matbench
0.6 for Matbench): its preprocessing of Catalysis-Hub rows, its calculation on a dataset cleaned
here, and its analysis and Excel writer on crucible's results, against crucible's own.

CatBench writes everything under the working directory (raw_data/, result/, the workbook), so
every test runs it in its own temporary directory.
"""

from __future__ import annotations

import json
import math
import shutil

import numpy as np
import pytest
from ase.calculators.emt import EMT

from crucible.catalysis import analysis as A
from crucible.catalysis import calculation as C
from crucible.catalysis import chunks as CH
from crucible.catalysis import demo
from crucible.catalysis.catbench_files import catbench_result, read_catbench_json, write_catbench_json
from crucible.catalysis.cathub import read_cathub_raw
from crucible.catalysis.clean import clean, load_reactions
from crucible.cli import main

catbench = pytest.importorskip("catbench", reason="catbench==1.1.6 (the peer) is installed by the test extra")
pytestmark = pytest.mark.skipif(catbench.__version__ != "1.1.6", reason="the peer is pinned to catbench 1.1.6")


def _fixed(atoms) -> list[int]:
    return sorted(int(i) for c in atoms.constraints for i in c.get_indices())


def _catbench_preprocess(raw_file, tmp_path, monkeypatch, name="demo"):
    """CatBench's own ``cathub_preprocessing`` on a Catalysis-Hub file (placed where CatBench keeps
    its download, so nothing is fetched), and its output read back with its own loader."""
    from catbench.adsorption import cathub_preprocessing
    from catbench.utils.data_utils import load_catbench_json

    work = tmp_path / "catbench"
    (work / "raw_data").mkdir(parents=True)
    shutil.copy(raw_file, work / "raw_data" / f"{name}.json")
    monkeypatch.chdir(work)
    monkeypatch.setenv("CATBENCH_STATE_DIR", str(tmp_path / "state"))
    cathub_preprocessing(name, source="cathub")
    out = work / "raw_data" / f"{name}_adsorption.json"
    return out, load_catbench_json(str(out))


def _assert_same_as_catbench(ours, theirs):
    """Every reaction, energy, stoichiometry, index, fixed atom, position and pbc equal."""
    assert sorted(r.reaction_id for r in ours) == sorted(theirs)
    for r in ours:
        entry = theirs[r.reaction_id]
        assert entry["ref_ads_eng"] == r.dft_ads_eng, r.reaction_id
        assert entry["adsorbate_indices"] == r.adsorbate_indices, r.reaction_id
        assert entry.get("constraint_source") == r.constraint_source, r.reaction_id
        assert sorted(entry["raw"]) == sorted(s.key for s in r.structures), r.reaction_id
        for s in r.structures:
            peer = entry["raw"][s.key]
            assert float(peer["stoi"]) == s.stoi and peer["energy_ref"] == s.dft_energy, (r.reaction_id, s.key)
            a, b = peer["atoms"], s.atoms
            assert a.get_chemical_symbols() == b.get_chemical_symbols(), (r.reaction_id, s.key)
            assert np.array_equal(a.positions, b.positions) and np.array_equal(a.cell, b.cell)
            assert list(a.pbc) == list(b.pbc) == [True, True, True], (r.reaction_id, s.key)
            assert _fixed(a) == _fixed(b), (r.reaction_id, s.key)


def test_catbench_preprocessing_and_ours_agree_on_the_demo(catalysis_demo, tmp_path, monkeypatch):
    """(a) The demo as Catalysis-Hub rows: CatBench's cathub_preprocessing keeps the same nine
    reactions, energies and indices that crucible reads, under CatBench's reaction ids."""
    _, theirs = _catbench_preprocess(catalysis_demo / "emt-demo_cathub.json", tmp_path, monkeypatch)
    ours = read_cathub_raw(catalysis_demo / "emt-demo_cathub.json")
    assert len(ours) == 9 and ours.dropped == []
    assert "Cu12_0.5H2(g) + * -> H*" in {r.reaction_id for r in ours}
    assert {r.cathub_id for r in ours} == {f"{m}111_{a}" for m in demo.METALS for a in demo.ADSORBATES}
    _assert_same_as_catbench(ours, theirs)


def test_catbench_filtering_rules_agree_reaction_by_reaction(catalysis_demo, tmp_path, monkeypatch):
    """(a) Rows that hit each rule of CatBench's preprocessing: the same reactions kept, with the
    same ids (duplicate suffixes counted as CatBench counts them), coefficients, fixed atoms
    (inferred from geometry where missing) and energies; every other row listed with a reason."""
    raw = catalysis_demo / "emt-demo-filters_cathub.json"
    path, theirs = _catbench_preprocess(raw, tmp_path, monkeypatch, "filters")
    ours = read_cathub_raw(raw)
    _assert_same_as_catbench(ours, theirs)
    dropped = {d["cathub_id"]: d["rule"] for d in ours.dropped}
    assert dropped == {
        "Ni111_CO~mismatch": "stoichiometry_mismatch",
        "Cu111_H+O~multi": "multi_adsorbate",
        "Ni111_H~vacancy": "constraints_undetermined",
        "Cu111_H": "duplicate",
        "Pt111_CO~energy_correction": "stoichiometry_mismatch",
        "Cu111_CO~no_reaction_energy": "energy_missing",
    }
    n_rows = len(json.loads(raw.read_text())["raw_reactions"])
    assert len(ours) + len(ours.dropped) == n_rows == 20
    kept = {r.cathub_id: r for r in ours}
    assert kept["Pt111_O~adslab_coefficient"].reaction_id == "Pt12_0.5O2(g) + * -> O*_1"
    assert kept["Pt111_O~adslab_coefficient"].by_role("adslab")[0].stoi == 1.0
    # CatBench gives back the id of a reaction dropped for its energies, not of other drops
    assert kept["Ni111_CO~second_site"].reaction_id == "Ni12_CO(g) + * -> CO*_1"
    assert kept["Pt111_H~no_constraints"].constraint_source == "geometry_inferred"
    assert ours.notes["ignored_systems"] == [{"reaction_id": "Cu12_0.5O2(g) + * -> O*_1", "system": "N2gas"}]
    # the file CatBench wrote is the deduplicated layout, and crucible reads it back equal
    doc = json.loads(path.read_text())
    assert "_structures" in doc and "ref" in doc["Cu12_0.5H2(g) + * -> H*"]["raw"]["star"]
    again = read_catbench_json(path)
    assert [(r.reaction_id, r.dft_ads_eng, r.adsorbate_indices) for r in again] == [
        (r.reaction_id, r.dft_ads_eng, r.adsorbate_indices) for r in ours
    ]


def test_a_dataset_cleaned_here_loads_in_catbench(catalysis_demo, tmp_path, monkeypatch):
    """(1) crucible's cleaned set in CatBench's current format: CatBench's own loader gives back
    every structure, energy and constraint, equal to what CatBench makes of the raw rows."""
    from catbench.utils.data_utils import load_catbench_json

    raw = catalysis_demo / "emt-demo-filters_cathub.json"
    _, theirs = _catbench_preprocess(raw, tmp_path, monkeypatch, "filters")
    ours = read_cathub_raw(raw)
    out = tmp_path / "clean"
    clean(
        ours,
        out / "r.parquet",
        out / "s.db",
        out / "card.json",
        source={},
        out_catbench=out / "filters_adsorption.json",
    )
    written = json.loads((out / "filters_adsorption.json").read_text())
    assert "_structures" in written
    assert len(written["_structures"]) < sum(len(e["raw"]) for k, e in written.items() if k != "_structures")
    _assert_same_as_catbench(load_reactions(out / "r.parquet", out / "s.db"), theirs)
    _assert_same_as_catbench(ours, load_catbench_json(str(out / "filters_adsorption.json")))


def test_catbench_calculation_on_our_file_equals_ours(catalysis_demo, tmp_path, monkeypatch):
    """(2) CatBench's AdsorptionCalculation (EMT, two seeds) on the demo cleaned here gives the
    energies, steps, displacements and bond changes of crucible's relaxations, and the same
    Time/Steps bookkeeping of the slab cache: each clean slab relaxed once per seed, its reuse
    counted 0 steps."""
    from catbench.adsorption import AdsorptionCalculation

    reactions = read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")
    ours = CH.run_chunk(reactions, EMT(), {"seeds": 2}, tmp_path / "chunk.json", "emt", progress=False)
    work = tmp_path / "catbench"
    write_catbench_json(reactions, work / "raw_data" / "demo_adsorption.json")
    monkeypatch.chdir(work)
    AdsorptionCalculation([EMT(), EMT()], mlip_name="emt", benchmark="demo", save_files=False).run()
    theirs = json.loads((work / "result" / "emt" / "emt_result.json").read_text())
    worst = 0.0
    for rec in ours["reactions"]:
        peer = theirs[rec["reaction_id"]]
        for k in ("steps_total_slab", "steps_total_adslab"):
            assert peer["final"][k] == rec[k], (rec["reaction_id"], k)
        for seed in rec["seeds"]:
            block = peer[str(seed["seed"])]
            assert (block["slab_steps"], block["adslab_steps"]) == (seed["slab_steps"], seed["adslab_steps"])
            for k in (
                "ads_eng",
                "slab_tot_eng",
                "adslab_tot_eng",
                "slab_max_disp",
                "adslab_max_disp",
                "slab_pos_mae",
                "adslab_pos_mae",
                "max_bond_change",
                "substrate_displacement",
            ):
                worst = max(worst, abs(block[k] - seed[k]))
        worst = max(worst, abs(peer["single_calculation"]["ads_eng"] - rec["single_calculation"]["ads_eng"]))
        assert peer["final"]["median_num"] == rec["final"]["median_num"]
    assert worst < 1e-9
    cached = [s["slab_cached"] for r in ours["reactions"] for s in r["seeds"]]
    assert cached.count(False) == 2 * 3  # three distinct slabs, two seeds
    assert sum(r["steps_total_slab"] for r in ours["reactions"]) == sum(
        theirs[r["reaction_id"]]["final"]["steps_total_slab"] for r in ours["reactions"]
    )


# ---------------------------------------------------------------------------------------------
# analysis and workbook


class OffsetEMT(EMT):
    """EMT with an energy offset on structures that hold both a metal and oxygen (the O and CO
    adslabs): a gas-reference-like error, so that energy anomalies and the gas shift appear."""

    def __init__(self, offset):
        super().__init__()
        self.offset = offset

    def calculate(self, atoms=None, properties=("energy",), system_changes=()):
        super().calculate(atoms, properties, system_changes)
        symbols = set(self.atoms.get_chemical_symbols())
        if "O" in symbols and symbols & set(demo.METALS):
            self.results["energy"] += self.offset
            self.results["free_energy"] = self.results.get("free_energy", 0.0) + self.offset


class NoisyEMT(EMT):
    """EMT whose energy carries noise from numpy's global generator, which crucible seeds per seed:
    seeds differ, so reproduction failures appear."""

    def calculate(self, atoms=None, properties=("energy",), system_changes=()):
        super().calculate(atoms, properties, system_changes)
        self.results["energy"] += float(np.random.uniform(-0.3, 0.3))


class NoPlatinumEMT(EMT):
    def calculate(self, atoms=None, properties=("energy",), system_changes=()):
        if "Pt" in atoms.get_chemical_symbols():
            raise NotImplementedError("no parameters for Pt in this potential")
        super().calculate(atoms, properties, system_changes)


def synthetic_records(n: int, seed: int) -> list[dict]:
    """Records with every class, edge and blank: energy errors around energy_thrs, seed ranges
    around reproduction_thrs, step caps, slab and substrate moves around disp_thrs, bond changes
    around the migration threshold, reused slabs (0 time), failures with stages."""
    rng = np.random.default_rng(seed)
    adsorbates = ["H", "O", "OH", "CO", "CH3", "N", "OOH"]
    out = []
    for i in range(n):
        ads = adsorbates[int(rng.integers(len(adsorbates)))] if i > 6 else adsorbates[i]
        if i in (3, 11, 17):
            ads = "NNH"  # too few reactions for a gas shift
        rid = f"{ads}_{i:03d}"
        dft = float(rng.uniform(-3, 2))
        if rng.random() < 0.04:
            stage = ["relax:adslab", "relax:slab", "single_point:slab"][int(rng.integers(3))]
            out.append({"reaction_id": rid, "adsorbate": ads, "dft_ads_eng": dft, "error": "X: y", "stage": stage})
            continue
        err = float(rng.choice([rng.normal(0, 0.3), rng.normal(2.0, 0.6)], p=[0.8, 0.2]))
        spread = float(rng.choice([0.02, 0.3], p=[0.85, 0.15]))
        seeds = []
        for k in range(3):
            slab_cached = bool(rng.random() < 0.4)
            seeds.append(
                {
                    "seed": k,
                    "ads_eng": dft + err + float(rng.uniform(-spread, spread)),
                    "slab_tot_eng": -100.0 + float(rng.uniform(-spread, spread)),
                    "adslab_tot_eng": -104.0 + float(rng.uniform(-spread, spread)),
                    "slab_steps": int(rng.choice([3, 40, 999], p=[0.45, 0.5, 0.05])),
                    "adslab_steps": int(rng.choice([5, 60, 999], p=[0.45, 0.5, 0.05])),
                    "slab_max_disp": float(rng.choice([rng.uniform(0, 0.5), rng.uniform(0.5, 1.2)], p=[0.9, 0.1])),
                    "adslab_max_disp": float(rng.uniform(0, 1.6)),
                    "slab_pos_mae": float(rng.uniform(0, 0.3)),
                    "adslab_pos_mae": float(rng.uniform(0, 0.6)),
                    "slab_pos_rmsd": float(rng.uniform(0, 0.3)),
                    "adslab_pos_rmsd": float(rng.uniform(0, 0.6)),
                    "max_bond_change": float(rng.choice([rng.uniform(0, 20), rng.uniform(20, 60)], p=[0.8, 0.2])),
                    "substrate_displacement": float(
                        rng.choice([rng.uniform(0, 0.5), rng.uniform(0.5, 1.0)], p=[0.9, 0.1])
                    ),
                    "slab_time": 0.0 if slab_cached else float(rng.uniform(0.01, 2.0)),
                    "adslab_time": float(rng.uniform(0.01, 2.0)),
                    "slab_cached": slab_cached,
                    "adslab_cached": False,
                    "gas_energies": {},
                }
            )
        idx, med = C.median_seed([s["ads_eng"] for s in seeds])
        rec = {
            "reaction_id": rid,
            "adsorbate": ads,
            "dft_ads_eng": dft,
            "error": None,
            "seeds": seeds,
            "final": {
                "ads_eng_median": med,
                "median_num": idx,
                "slab_seed_range": C.seed_range([s["slab_tot_eng"] for s in seeds]),
                "ads_seed_range": C.seed_range([s["adslab_tot_eng"] for s in seeds]),
                "ads_eng_seed_range": C.seed_range([s["ads_eng"] for s in seeds]),
            },
            "single_calculation": {"ads_eng": dft + float(rng.normal(0, 0.5))},
        }
        C._count_work(rec)
        out.append(rec)
    return out


def _score_and_tabulate(chunks: dict[str, dict], thresholds: dict, out) -> dict[str, dict]:
    """crucible's CLI on chunk documents: score per potential (its step cap as n_crit_relax, as
    the workflow passes it), then the tables and the workbook ``ours.xlsx``."""
    analyses = {}
    for model, doc in chunks.items():
        chunk = out / f"{model}_chunk.json"
        chunk.write_text(json.dumps(doc))
        thr = {**thresholds, "n_crit_relax": doc["settings"]["max_steps"]}
        args = ["catalysis", "score", "--inputs", str(chunk), "--model", model, "--thresholds", json.dumps(thr)]
        assert main(args + ["--out", str(out / f"{model}.json"), "--out-reactions", str(out / f"{model}.parquet")]) == 0
        analyses[model] = json.loads((out / f"{model}.json").read_text())
    files = [str(out / f"{m}.json") for m in chunks]
    args = ["catalysis", "tables", "--inputs", *files, "--out-prefix", str(out / "t"), "--out-xlsx"]
    assert main(args + [str(out / "ours.xlsx")]) == 0
    return analyses


def _catbench_analysis(chunks: dict[str, dict], thresholds: dict, work, monkeypatch):
    """CatBench's AdsorptionAnalysis on our records, converted to its result layout."""
    from catbench.adsorption import AdsorptionAnalysis

    for model, doc in chunks.items():
        target = work / "result" / model / f"{model}_result.json"
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(catbench_result(doc["reactions"], doc["settings"])))
    monkeypatch.chdir(work)
    kwargs = {k: v for k, v in thresholds.items() if k != "n_crit_relax"}
    AdsorptionAnalysis(plot_enabled=False, benchmarking_name="peer", **kwargs).analysis()
    return work / "peer_Benchmarking_Analysis.xlsx"


PROVENANCE = {"catbench_version", "dispersion", "calculator", "device", "input_md5"}


def _compare_workbooks(ours_path, theirs_path) -> float:
    """Same sheets in the same order, the same header rows and merged cells, every value equal
    (numbers to 1e-9, blanks where CatBench leaves blanks), the same number formats; the
    Coverage sheet's provenance columns hold each program's own stamp and are not compared.
    Returns the largest numeric difference, relative to max(1, |CatBench's value|): absolute for
    rates and MAEs, relative for totals such as Time_total in ms."""
    from openpyxl import load_workbook

    ours, theirs = load_workbook(ours_path), load_workbook(theirs_path)
    assert ours.sheetnames == theirs.sheetnames
    worst = 0.0
    for name in theirs.sheetnames:
        a, b = ours[name], theirs[name]
        assert sorted(map(str, a.merged_cells.ranges)) == sorted(map(str, b.merged_cells.ranges)), name
        assert (a.max_row, a.max_column) == (b.max_row, b.max_column), name
        header_rows = 1 if name == "Coverage" else 2
        heads = [c.value for c in b[1]]
        for r in range(1, b.max_row + 1):
            for c in range(1, b.max_column + 1):
                x, y = a.cell(r, c), b.cell(r, c)
                if name == "Coverage" and r > header_rows and heads[c - 1] in PROVENANCE and r <= b.max_row - 2:
                    continue
                if r <= header_rows or isinstance(y.value, str) or y.value is None:
                    assert (x.value or None) == (y.value or None), (name, x.coordinate, x.value, y.value)
                    continue
                assert isinstance(x.value, (int, float)), (name, x.coordinate, x.value, y.value)
                assert math.isclose(x.value, y.value, rel_tol=1e-12, abs_tol=1e-9), (
                    name,
                    x.coordinate,
                    x.value,
                    y.value,
                )
                worst = max(worst, abs(x.value - y.value) / max(1.0, abs(y.value)))
                if y.number_format != "General":
                    assert x.number_format == y.number_format, (name, x.coordinate)
    return worst


def _compare_classes(analyses: dict[str, dict], work):
    for model, analysis in analyses.items():
        peer = json.loads((work / "result" / model / f"{model}_anomaly_detection.json").read_text())
        ours = analysis["anomaly_detection"]
        for cls in ("normal", "energy_anomaly", "adsorbate_migration", "reproduction_failure"):
            assert sorted(peer[cls]) == ours[cls], (model, cls)
        assert {u["reaction"]: sorted(u["issues"]) for u in peer["unphysical_relaxation"]} == {
            k: sorted(v) for k, v in ours["unphysical_issues"].items()
        }


@pytest.mark.slow
def test_catbench_analysis_of_our_relaxations_equals_ours(catalysis_demo, tmp_path, monkeypatch):
    """(b, c) Five potentials on the demo (plain EMT, an O offset that causes energy anomalies and
    a gas shift, seed noise that causes reproduction failures, a step cap that flags every
    relaxation, a potential that fails on Pt): CatBench's AdsorptionAnalysis on crucible's
    results gives crucible's workbook, sheet by sheet, and crucible's classes."""
    reactions = read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")
    runs = {
        "emt": (EMT(), {"seeds": 2}),
        "EMT-offset": (OffsetEMT(2.5), {"seeds": 2}),
        "emt-noisy": (NoisyEMT(), {"seeds": 3}),
        "emt-capped": (EMT(), {"seeds": 1, "max_steps": 1}),
        "no-pt": (NoPlatinumEMT(), {"seeds": 1}),
    }
    chunks = {
        model: CH.run_chunk(reactions, calc, params, tmp_path / f"{model}.json", model, progress=False)
        for model, (calc, params) in runs.items()
    }
    thresholds = {"gas_shift_min_n": 2}
    out = tmp_path / "ours"
    out.mkdir()
    analyses = _score_and_tabulate(chunks, thresholds, out)
    theirs = _catbench_analysis(chunks, thresholds, tmp_path / "cb", monkeypatch)
    assert _compare_workbooks(out / "ours.xlsx", theirs) < 1e-9
    _compare_classes(analyses, tmp_path / "cb")
    # the cases were reached: energy anomalies that the gas shift removes, reproduction
    # failures, step caps, failures counted in Coverage
    assert analyses["EMT-offset"]["mlip"]["Anomaly_rate_energy_anomaly"] > 0
    assert analyses["EMT-offset"]["mlip_shifted"]["Anomaly_rate_energy_anomaly"] == 0
    assert analyses["emt-noisy"]["anomaly"]["Anomaly_reproduction_failure"] > 0
    assert analyses["emt-capped"]["anomaly"]["Anomaly_unphysical_relaxation"] == 9
    assert analyses["no-pt"]["coverage"]["Num_failed"] == 3
    assert analyses["no-pt"]["mlip"]["Num_total"] == 6


@pytest.mark.parametrize("energy_cutoff", [None, 0.5])
def test_catbench_analysis_of_synthetic_records_equals_ours(tmp_path, monkeypatch, energy_cutoff):
    """(b, c) 400 records built to sit on both sides of every threshold (all five classes, step
    caps, moves, migrations, reused slabs, failures, adsorbates with and without a gas shift),
    with and without an energy cutoff."""
    settings = {**C.DEFAULTS}
    chunks = {
        "Synth-a": {"reactions": synthetic_records(400, 1), "settings": settings, "device": "cpu"},
        "synth-b": {"reactions": synthetic_records(150, 2), "settings": settings, "device": "cpu"},
    }
    # CatBench lists every sheet's adsorbates in the last potential's order: one potential
    # whose adsorbate set and counts differ from another's would be listed differently there.
    thresholds = {"energy_cutoff": energy_cutoff}
    for model, doc in chunks.items():
        out = tmp_path / model
        out.mkdir()
        analyses = _score_and_tabulate({model: doc}, thresholds, out)
        theirs = _catbench_analysis({model: doc}, thresholds, tmp_path / f"cb-{model}", monkeypatch)
        assert _compare_workbooks(out / "ours.xlsx", theirs) < 1e-9
        _compare_classes(analyses, tmp_path / f"cb-{model}")
        classes = {c: len(v) for c, v in analyses[model]["anomaly_detection"].items() if isinstance(v, list)}
        assert all(classes[c] > 0 for c in A.CLASSES), classes
        shifts = [g for g in analyses[model]["gas_shift"] if g["applied"]]
        assert shifts and len(shifts) < len(analyses[model]["gas_shift"])
