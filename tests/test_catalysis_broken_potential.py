"""A potential that returns NaN energies (or NaN energies and forces) in the catalysis benchmark,
run as a user runs it: ``crucible catalysis clean / relax / score / tables`` on the demo data with
the potential given as ``mlip.custom_potentials`` (tests/custom_calculators.py). Each reaction
it touches is a calculation failure: counted in ``Num_failed`` (the Coverage sheet too), never
rated, never Normal; CatBench's own analysis of the converted results counts the same.

Before the guard (crucible.potentials.relax's failure status, issue 21 item 4a) NaN energies with
finite forces rated all 9 demo reactions Normal (Normal_rate 100 %, MAE nan) and NaN energies and
forces rated them 9 unphysical relaxations with Num_failed 0.
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from crucible.catalysis.catbench_files import catbench_result
from crucible.cli import main
from crucible.core.io import read_json


def _run(tmp_path, demo, entry, name="broken"):
    d = tmp_path / name
    d.mkdir()
    custom = json.dumps({name: entry})
    main(["catalysis", "clean", "--format", "catbench-json", "--input", str(demo / "emt-demo_adsorption.json"),
          "--out", str(d / "r.parquet"), "--out-db", str(d / "s.db"), "--out-card", str(d / "card.json")])  # fmt: skip
    assert main(["catalysis", "relax", "--reactions", str(d / "r.parquet"), "--db", str(d / "s.db"), "--model", name,
                 "--custom-potentials", custom, "--params", json.dumps({"seeds": 3}),
                 "--out", str(d / "chunk_0.json")]) == 0  # fmt: skip
    assert main(["catalysis", "score", "--inputs", str(d / "chunk_0.json"), "--card", str(d / "card.json"),
                 "--model", name, "--out", str(d / "a.json"), "--out-reactions", str(d / "a.parquet"),
                 "--out-anomaly", str(d / "anomaly.json")]) == 0  # fmt: skip
    assert main(["catalysis", "tables", "--inputs", str(d / "a.json"), "--out-prefix", str(d / "t"),
                 "--out-xlsx", str(d / "t.xlsx")]) == 0  # fmt: skip
    return d


@pytest.mark.parametrize("what", ["energy", "energy+forces"])
def test_a_nan_potential_fails_every_reaction_and_rates_none(tmp_path, catalysis_demo, what):
    d = _run(tmp_path, catalysis_demo, {"class": "custom_calculators:nan_potential", "params": {"what": what}})
    record = read_json(d / "a.json")
    assert record["coverage"]["Num_input"] == 9 and record["coverage"]["Num_failed"] == 9
    assert record["coverage"]["Num_succeeded"] == 0 and record["mlip"]["Num_total"] == 0
    assert record["anomaly"]["Num_normal"] == 0 and record["anomaly"]["Anomaly_total"] == 0
    assert not (record["mlip"]["Normal_rate"] > 0)  # NaN or 0, never a rate of Normal
    # the single points of the unrelaxed structures come first (as in CatBench): that is the stage
    assert record["coverage"]["Failed_by_stage"].startswith("single_point:")
    chunk = read_json(d / "chunk_0.json")
    assert all("NonFiniteError" in r["error"] and "non-finite energy (nan)" in r["error"] for r in chunk["reactions"])
    assert read_json(d / "anomaly.json")["normal"] == []
    coverage = pd.read_excel(d / "t.xlsx", sheet_name="Coverage").set_index("MLIP_name")
    assert coverage.loc["broken", "Num_failed"] == 9 and coverage.loc["broken", "Num_succeeded"] == 0
    table = pd.read_csv(d / "t.csv").set_index("MLIP_name")
    assert table.loc["broken", "Num_failed"] == 9 and table.loc["broken", "Num_total"] == 0
    assert math.isnan(table.loc["broken", "Normal_rate"]) and math.isnan(table.loc["broken", "MAE_total"])


def test_nan_on_some_structures_fails_exactly_their_reactions_and_catbench_agrees(
    tmp_path, catalysis_demo, monkeypatch
):
    """NaN energies (finite forces: the case that used to be rated Normal) only where Pt is: the 3
    Pt reactions fail at their first single point, the other 6 are rated as EMT rates them; CatBench's
    AdsorptionAnalysis on the converted result counts the same failures and the same Normal set."""
    from catbench.adsorption import AdsorptionAnalysis

    entry = {"class": "custom_calculators:nan_potential", "params": {"element": "Pt"}}
    d = _run(tmp_path, catalysis_demo, entry)
    record = read_json(d / "a.json")
    assert record["coverage"]["Num_failed"] == 3 and record["mlip"]["Num_total"] == 6
    chunk = read_json(d / "chunk_0.json")
    failed = sorted(r["reaction_id"] for r in chunk["reactions"] if r["error"])
    assert len(failed) == 3 and all("Pt" in rid for rid in failed)
    normal = read_json(d / "anomaly.json")["normal"]
    assert not set(normal) & set(failed) and math.isfinite(record["mlip"]["MAE_total"])
    # the same numbers as plain EMT on the reactions without Pt
    emt = _run(tmp_path, catalysis_demo, {"class": "custom_calculators:scaled_emt"}, name="emt-like")
    ours = pd.read_parquet(d / "a.parquet").set_index("reaction_id")
    plain = pd.read_parquet(emt / "a.parquet").set_index("reaction_id")
    kept = [rid for rid in plain.index if rid not in failed]
    assert ours.loc[kept, "mlip_ads_eng"].tolist() == plain.loc[kept, "mlip_ads_eng"].tolist()
    # CatBench's own analysis of these results
    work = tmp_path / "cb"
    target = work / "result" / "broken" / "broken_result.json"
    target.parent.mkdir(parents=True)
    target.write_text(json.dumps(catbench_result(chunk["reactions"], chunk["settings"])))
    monkeypatch.chdir(work)
    AdsorptionAnalysis(plot_enabled=False, benchmarking_name="peer").analysis()
    theirs = pd.read_excel(work / "peer_Benchmarking_Analysis.xlsx", sheet_name="Coverage").set_index("MLIP_name")
    assert theirs.loc["broken", "Num_failed"] == 3 and theirs.loc["broken", "Num_succeeded"] == 6
    peer = json.loads((work / "result" / "broken" / "broken_anomaly_detection.json").read_text())
    assert sorted(peer["normal"]) == sorted(normal)
