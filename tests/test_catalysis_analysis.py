"""CatBench's analysis on hand-built reactions: every class, threshold edges, rates, MAEs,
ADwT/AMDwT grids and the gas shift (CatBench 1.1.6, ``catbench/adsorption/analysis/analysis.py``; vectors from CatBench's own test suite and by hand)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crucible.catalysis import analysis as A
from crucible.catalysis import scoring
from crucible.catalysis.calculation import median_seed, seed_range
from crucible.catalysis.catbench_files import catbench_result


def record(
    rid="r",
    ads="H",
    dft=-0.20,
    ads_eng=(-1.00, -1.05, -0.90),
    bond=15.0,
    substrate=0.1,
    slab_steps=(10, 10, 10),
    adslab_steps=(10, 10, 10),
    slab_disp=(0.1, 0.1, 0.1),
    slab_range=0.15,
    ads_range=0.15,
    eng_range=None,
    pos=0.05,
    single=None,
):
    idx, med = median_seed(ads_eng)
    seeds = [
        {
            "ads_eng": e,
            "slab_tot_eng": -10.0,
            "adslab_tot_eng": -11.0,
            "slab_steps": ss,
            "adslab_steps": st,
            "slab_max_disp": sd,
            "adslab_max_disp": 0.2,
            "slab_pos_mae": pos,
            "adslab_pos_mae": pos,
            "max_bond_change": bond,
            "substrate_displacement": substrate,
        }
        for e, ss, st, sd in zip(ads_eng, slab_steps, adslab_steps, slab_disp)
    ]
    return {
        "reaction_id": rid,
        "adsorbate": ads,
        "dft_ads_eng": dft,
        "error": None,
        "seeds": seeds,
        "final": {
            "ads_eng_median": med,
            "median_num": idx,
            "slab_seed_range": slab_range,
            "ads_seed_range": ads_range,
            "ads_eng_seed_range": seed_range(ads_eng) if eng_range is None else eng_range,
        },
        "single_calculation": {"ads_eng": med if single is None else single},
        "time_total_slab": 0.3,
        "time_total_adslab": 0.3,
        "steps_total_slab": 30,
        "steps_total_adslab": 30,
    }


def cls(rec, **thr):
    return A.reaction_table([rec], A.Thresholds(**thr))["class"].iloc[0]


def test_median_seed_vectors():
    assert median_seed([5, 1, 3]) == (2, 3.0)
    assert median_seed([9, 1, 5]) == (2, 5.0)
    assert median_seed([1, math.nan, 3])[1] == 3.0
    assert median_seed([2.0] * 5)[0] == 2
    assert median_seed([4, 1, 3, 2]) == (3, 2.0)  # lower median for even K
    with pytest.raises(ValueError):
        median_seed([])


def test_classifier_priority_vectors():
    T, F = True, False
    assert A.classify(T, T, T, T) == "reproduction_failure"
    assert A.classify(F, T, T, T) == "unphysical_relaxation"
    assert A.classify(F, F, T, T) == "adsorbate_migration"
    assert A.classify(F, F, F, T) == "energy_anomaly"
    assert A.classify(F, F, F, F) == "normal"
    assert A.classify(F, T, F, F) == "unphysical_relaxation"


def test_hand_vector_5_every_class():
    base = record()
    assert base["final"]["ads_eng_median"] == -1.00
    assert cls(base) == "normal"  # |Δ| 0.8
    assert cls(record(bond=25.0)) == "adsorbate_migration"
    assert cls(record(substrate=0.6)) == "unphysical_relaxation"
    assert cls(record(substrate=0.6, bond=25.0)) == "unphysical_relaxation"  # migration not checked
    assert cls(record(adslab_steps=(10, 999, 10))) == "unphysical_relaxation"
    assert cls(record(slab_steps=(10, 10, 999))) == "unphysical_relaxation"
    assert cls(record(slab_disp=(0.1, 0.51, 0.1))) == "unphysical_relaxation"
    assert cls(record(slab_range=0.25)) == "reproduction_failure"
    assert cls(record(ads_range=0.25, substrate=0.6)) == "reproduction_failure"
    assert cls(record(dft=1.5)) == "energy_anomaly"  # |Δ| 2.5
    assert cls(record(dft=1.5, bond=25.0)) == "adsorbate_migration"


def test_threshold_edges_are_strict_except_steps():
    assert cls(record(slab_range=0.2, ads_range=0.2, eng_range=0.2)) == "normal"
    assert cls(record(slab_range=0.2000001)) == "reproduction_failure"
    assert cls(record(substrate=0.5, slab_disp=(0.5, 0.5, 0.5))) == "normal"
    assert cls(record(bond=20.0)) == "normal"  # 100 · 0.2 exactly
    assert cls(record(bond=20.0001)) == "adsorbate_migration"
    # |Δ| exactly 2.0 (chosen so the float difference is exact)
    assert cls(record(ads_eng=(-1.0, -1.0, -1.0), dft=1.0)) == "normal"
    assert cls(record(ads_eng=(-1.0, -1.0, -1.0), dft=1.0000001)) == "energy_anomaly"
    # steps: equal to n_crit flags, one fewer does not
    assert cls(record(adslab_steps=(998, 998, 998))) == "normal"
    assert cls(record(adslab_steps=(50, 50, 50)), n_crit_relax=50) == "unphysical_relaxation"


def test_ads_move_uses_the_median_seed_only():
    r = record()
    r["seeds"][0]["substrate_displacement"] = 5.0  # not the median seed (index 0 is −1.00? check)
    med = r["final"]["median_num"]
    other = [i for i in range(3) if i != med]
    for i in range(3):
        r["seeds"][i]["substrate_displacement"] = 5.0 if i in other else 0.1
    assert cls(r) == "normal"
    r["seeds"][med]["substrate_displacement"] = 0.6
    assert cls(r) == "unphysical_relaxation"


def test_oc20_mode_forces_slab_flags_off():
    r = record(slab_steps=(999, 999, 999), slab_range=5.0, slab_disp=(3, 3, 3))
    for s in r["seeds"]:
        s["slab_tot_eng"] = None
    assert cls(r) == "normal"


def test_rates_maes_and_detail_counters():
    recs = [record(f"n{i}", ads="H" if i < 4 else "O", dft=-0.2 + 0.1 * i) for i in range(7)]
    recs.append(record("m", bond=25.0))
    recs.append(record("e", dft=1.5))
    recs.append(record("u", adslab_steps=(999, 999, 999), slab_range=0.25))  # seed flag wins: repro, not unphysical
    recs[-1]["final"]["slab_seed_range"] = 0.1  # now only unphysical
    s = A.summarize(recs, A.Thresholds(), "toy")
    m = s["mlip"]
    assert (m["Normal_rate"], m["Adsorbate_migration_rate"], m["Anomaly_rate_total"]) == (70.0, 10.0, 20.0)
    assert m["Num_total"] == 10
    errors = [abs(-1.0 - (-0.2 + 0.1 * i)) for i in range(7)]
    assert m["MAE_normal"] == pytest.approx(np.mean(errors))
    assert m["MAE_total"] == pytest.approx(np.mean(errors + [0.8, 2.5, 0.8]))
    assert s["anomaly"]["Unphysical_ads_conv"] == 1
    assert s["anomaly"]["Reproduction_slab_seed"] == 0
    # per adsorbate pooled, not mean of means
    by = {r["Adsorbate_name"]: r for r in s["per_adsorbate"]}
    assert by["O"]["Num_total"] == 3 and by["H"]["Num_total"] == 7
    assert m["Time_per_step"] == pytest.approx(1000 * 0.6 / 60)  # ms


def test_seed_flag_and_step_flag_counted_once_as_reproduction():
    r = record(adslab_steps=(999, 999, 999), ads_range=0.3)
    s = A.summarize([r], A.Thresholds(), "x")
    assert s["anomaly"]["Anomaly_reproduction_failure"] == 1
    assert s["anomaly"]["Unphysical_ads_conv"] == 0  # no leak across classes
    assert s["anomaly"]["Reproduction_ads_seed"] == 1


def test_energy_cutoff_drops_reactions_from_everything():
    recs = [record("a", dft=-0.2), record("b", dft=0.7)]
    s = A.summarize(recs, A.Thresholds(energy_cutoff=0.5), "x")
    assert s["mlip"]["Num_total"] == 1
    assert s["mlip"]["MAE_total"] == pytest.approx(0.8)


def test_failed_calculations_are_counted_not_classified():
    bad = {
        "reaction_id": "z",
        "adsorbate": "H",
        "dft_ads_eng": 0.0,
        "error": "ValueError: no EMT parameters",
        "seeds": [],
        "final": None,
        "single_calculation": None,
    }
    s = A.summarize([record(), bad], A.Thresholds(), "x")
    assert s["mlip"]["Num_failed"] == 1 and s["mlip"]["Num_total"] == 1


def test_adwt_amdwt_exact_decimal_grids():
    assert len(A.ADWT_THRESHOLDS) == 490 and A.ADWT_THRESHOLDS[-1] == 0.499
    assert len(A.AMDWT_THRESHOLDS) == 1490 and A.AMDWT_THRESHOLDS[-1] == 1.499
    assert A.ADWT_THRESHOLDS[90] == 0.1  # exact, unlike numpy.arange's 0.09999999999999992
    assert A.within_threshold_percent([0.005, 0.1, 0.6], A.ADWT_THRESHOLDS) == pytest.approx(60.4762, abs=1e-4)
    assert A.within_threshold_percent([0.1], A.ADWT_THRESHOLDS) == pytest.approx(81.4286, abs=1e-4)
    assert A.within_threshold_percent([0.25], A.ADWT_THRESHOLDS) == pytest.approx(50.8163, abs=1e-4)
    assert A.within_threshold_percent([0.005, 1.0, 2.0], A.AMDWT_THRESHOLDS) == pytest.approx(44.4966, abs=1e-4)
    assert math.isnan(A.within_threshold_percent([], A.ADWT_THRESHOLDS))


def test_gas_shift_median_vector():
    errors = [0.3, 0.35, 0.4, 0.45, 2.6]
    recs = [record(f"r{i}", ads_eng=(e, e, e), dft=0.0) for i, e in enumerate(errors)]
    s = A.summarize(recs, A.Thresholds(), "x")
    block = s["gas_shift"][0]
    assert block["applied"] and block["N_fit"] == 5 and block["shift_eV"] == pytest.approx(0.4)
    shifted = s["shifted"].set_index("reaction_id")
    assert shifted.loc["r4", "mlip_ads_eng"] == pytest.approx(2.2)
    assert shifted.loc["r4", "class"] == "energy_anomaly"  # the mean (0.82) would have made it normal
    # four valid reactions: no shift
    s4 = A.summarize(recs[:4], A.Thresholds(), "x")
    assert not s4["gas_shift"][0]["applied"]
    assert (s4["shifted"]["mlip_ads_eng"].to_numpy() == s4["reactions"]["mlip_ads_eng"].to_numpy()).all()


def test_gas_shift_can_turn_an_energy_anomaly_normal():
    errors = [2.1, 2.2, 2.3, 2.4, 2.5]
    recs = [record(f"r{i}", ads_eng=(e, e, e), dft=0.0) for i, e in enumerate(errors)]
    s = A.summarize(recs, A.Thresholds(), "x")
    assert set(s["reactions"]["class"]) == {"energy_anomaly"}
    assert set(s["shifted"]["class"]) == {"normal"}
    row = A.shifted_mlip_row(s["shifted"], s["mlip"])
    assert row["Normal_rate"] == 100.0 and row["MAE_total"] == pytest.approx(0.12)


def test_gas_shift_moves_single_points_too_and_counts_shifted_classes():
    # CatBench 1.1.6 subtracts the shift from the single-point energies for MAE_single shifted
    errors = [2.1, 2.2, 2.3, 2.4, 2.5]
    recs = [record(f"r{i}", ads_eng=(e, e, e), dft=0.0, single=e + 0.1) for i, e in enumerate(errors)]
    s = A.summarize(recs, A.Thresholds(), "x")
    row = A.shifted_mlip_row(s["shifted"], s["mlip"])
    assert s["mlip"]["MAE_single"] == pytest.approx(2.4) and row["MAE_single"] == pytest.approx(0.14)
    block = s["gas_shift"][0]
    assert (block["Num_normal_shifted"], block["Num_energy_anomaly_shifted"]) == (5, 0)


def test_oc20_reproduction_detail_has_no_adslab_seed_range():
    # OC20 mode: the adslab energy is the adsorption energy; CatBench counts only ads_eng_seed
    r = record(ads_eng=(-1.0, -0.5, -0.9), ads_range=0.5)
    for seed in r["seeds"]:
        seed["slab_tot_eng"] = None
    s = A.summarize([r], A.Thresholds(), "x")
    assert s["anomaly"]["Anomaly_reproduction_failure"] == 1
    assert (s["anomaly"]["Reproduction_ads_eng_seed"], s["anomaly"]["Reproduction_ads_seed"]) == (1, 0)


def test_coverage_row_counts_input_succeeded_failed_not_run():
    recs = [record("a"), record("b"), {**record("c"), "error": "X: y", "stage": "relax:slab", "seeds": []}]
    row = A.coverage_row(recs, "m", n_input=5, input_md5="abc")
    assert (row["Num_input"], row["Num_succeeded"], row["Num_failed"], row["Num_not_run"]) == (5, 2, 1, 2)
    assert row["Coverage_pct"] == 40.0 and row["Failed_by_stage"] == "relax:slab: 1" and row["input_md5"] == "abc"


def test_catbench_result_layout():
    recs = [record("a"), {**record("b"), "error": "X: y", "stage": "relax:slab"}]
    doc = catbench_result(recs, {"max_steps": 50, "chemical_bond_cutoff": 6.0})
    assert doc["calculation_settings"]["n_crit_relax"] == 50 and doc["_failures"]["b"]["stage"] == "relax:slab"
    entry = doc["a"]
    assert sorted(k for k in entry if k.isdigit()) == ["0", "1", "2"]
    assert "Hstar_tot_eng" in entry["reference"] and entry["final"]["steps_total_slab"] == 30
    assert entry["final"]["slab_max_disp"] == 0.1 and entry["0"]["slab_steps"] == 10


def test_threshold_sensitivity_grids():
    recs = [record("a", substrate=0.35), record("b", substrate=1.25, bond=30.0)]
    sweep = A.threshold_sensitivity(recs, A.Thresholds())
    disp = sweep[sweep["threshold"] == "disp_thrs"].set_index("value")
    assert list(disp.index) == [round(0.1 * i, 1) for i in range(21)]
    assert disp.loc[0.3, "unphysical_relaxation"] == 100.0
    assert disp.loc[0.4, "unphysical_relaxation"] == 50.0
    assert disp.loc[1.3, "adsorbate_migration"] == 50.0 and disp.loc[1.3, "normal"] == 50.0
    bond = sweep[sweep["threshold"] == "bond_length_change_threshold"]
    assert len(bond) == 21 and bond["value"].max() == 0.5


def test_score_files_write_the_analysis_the_anomaly_lists_and_the_reactions(tmp_path):
    import json

    import pandas as pd

    normal, energy = record(rid="n"), record(rid="e", dft=1.5)  # |Δ| = 2.5 eV: energy anomaly
    unphys = record(rid="u", substrate=0.6, adslab_steps=(999, 10, 10))
    repro = record(rid="p", slab_range=0.25)
    migr = record(rid="m", ads="O", bond=25.0)
    bad = {
        "reaction_id": "z",
        "adsorbate": "H",
        "dft_ads_eng": 0.0,
        "error": "ValueError: x",
        "seeds": [],
        "final": None,
        "single_calculation": None,
    }
    chunks = [tmp_path / "chunk_0.json", tmp_path / "chunk_1.json"]
    chunks[0].write_text(json.dumps({"reactions": [normal, energy, unphys]}))
    chunks[1].write_text(json.dumps({"reactions": [repro, migr, bad]}))
    out, out_rx, out_anomaly = tmp_path / "a.json", tmp_path / "r.parquet", tmp_path / "anomaly.json"
    rec = scoring.score_calculation_files(chunks, {"energy_thrs": 2.0}, "emt", out, out_rx, out_anomaly)
    written = json.loads(out.read_text())
    assert written["model"] == "emt" and written["thresholds"]["energy_thrs"] == 2.0
    det = written["anomaly_detection"]
    assert {c: det[c] for c in A.CLASSES} == {
        "reproduction_failure": ["p"],
        "unphysical_relaxation": ["u"],
        "adsorbate_migration": ["m"],
        "energy_anomaly": ["e"],
        "normal": ["n"],
    }
    assert det["unphysical_issues"] == {"u": ["ads_conv", "ads_move"]} and det["calculation_error"] == ["z"]
    assert json.loads(out_anomaly.read_text()) == {"thresholds": written["thresholds"], **det}
    # Anomaly total = reproduction + unphysical + energy (migration apart); after the shift (H has
    # fewer than gas_shift_min_n valid reactions: no shift) the counts are the same.
    assert rec["anomaly"]["Anomaly_total"] == 3 and rec["anomaly_shifted"] == rec["anomaly"]
    assert len(written["sensitivity"]) == len(A.DISP_GRID) + len(A.BOND_GRID)
    rx = pd.read_parquet(out_rx)
    assert list(rx.columns) == scoring.REACTION_COLUMNS + ["model", "mlip_ads_eng_shifted", "class_shifted"]
    assert sorted(rx["reaction_id"]) == ["e", "m", "n", "p", "u", "z"] and set(rx["model"]) == {"emt"}
    assert rx["mlip_ads_eng_shifted"].equals(rx["mlip_ads_eng"])  # NaN for the failed one too


def test_shifted_anomaly_row_recounts_only_the_energy_test():
    import pandas as pd

    base = {
        "Num_normal": 1,
        "Num_adsorbate_migration": 2,
        "Anomaly_total": 4,
        "Anomaly_reproduction_failure": 1,
        "Anomaly_unphysical_relaxation": 1,
        "Anomaly_energy_anomaly": 2,
    }
    shifted = pd.DataFrame({"class": ["normal", "normal", "normal", "energy_anomaly", "calculation_error"]})
    row = scoring.shifted_anomaly_row(base, shifted)
    assert row["Num_normal"] == 3 and row["Anomaly_energy_anomaly"] == 1 and row["Anomaly_total"] == 3
    assert row["Num_adsorbate_migration"] == 2 and base["Num_normal"] == 1  # the input is not changed
