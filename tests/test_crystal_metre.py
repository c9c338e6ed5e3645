"""METRe and cRMSE (arXiv 2509.12178) on real carbon-24 crystals (tests/data/cdvae/carbon_24): a
sample for item i that is item j's crystal (same composition) counts for j under METRe and for
nobody under the one-to-one rate; every METRe verdict and RMS equals pymatgen's StructureMatcher
called directly on every (sample, reference) pair; the pre-filters only skip pairs it cannot
match."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from crucible.crystal import csp, data, generation, items, metre, samples
from crucible.crystal.scoring import CIF, CONVENTIONS, TEXT, reference_structure, sample_as_structure

from helpers import REPO

CARBON = REPO / "tests" / "data" / "cdvae" / "carbon_24"
TEMPLATES = items.load_templates(REPO / "config" / "crystal_prompts.yaml")
# three cells of 4 primitive sites, two of 14, one of 16: the pre-filter has groups to keep apart
CHOSEN = ("C-113058-1288-32", "C-80144-1745-9", "C-9588-6827-42", "C-126153-9712-41", "C-130505-1819-19")
CHOSEN += ("C-107721-8342-15",)


@pytest.fixture(scope="module")
def carbon():
    rows = {i: s for i, s, _ in data.load_cif_table(CARBON / "test.csv")}
    test = [(i, rows[i]) for i in CHOSEN]
    return items.build_items("carbon-24", [], test, "composition-v1", TEMPLATES["composition-v1"])[0]


def _rewritten(structure):
    """The same crystal written otherwise: sites reversed, origin shifted."""
    from pymatgen.core import Structure

    return Structure(
        structure.lattice, structure.species[::-1], (structure.frac_coords[::-1] + [0.11, 0.23, 0.37]) % 1.0
    )


def _sheared(structure):
    from pymatgen.core import Lattice, Structure

    a, b, c, al, be, ga = structure.lattice.parameters
    return Structure(Lattice.from_parameters(a, b, c, al + 20, be, ga), structure.species, structure.frac_coords)


@pytest.fixture(scope="module")
def drawn(carbon):
    """Two samples per item: sample 0 the next item's crystal (a CIF), sample 1 its own sheared
    out of reach; except that C-80144's sample 1 is an answer text giving C-9588's crystal (both 8
    sites: a text takes its own item's species and site count)."""
    refs = [reference_structure(it["ground_truth"]) for it in carbon]
    out = {}
    for n, it in enumerate(carbon):
        nxt = _rewritten(refs[(n + 1) % len(carbon)]).to(fmt="cif")
        out[it["id"]] = [
            samples.Sample(it["id"], 0, CIF, nxt),
            samples.Sample(it["id"], 1, CIF, _sheared(refs[n]).to(fmt="cif")),
        ]
    text = generation.answer_from_structure(refs[CHOSEN.index("C-9588-6827-42")], ["C"])
    out["C-80144-1745-9"][1] = samples.Sample("C-80144-1745-9", 1, TEXT, text)
    return out


@pytest.fixture(scope="module")
def scored(carbon, drawn):
    df = csp.score_samples(drawn, carbon, 2)
    pairs, counts = metre.cross_matches(drawn, carbon, 2, workers=2)
    return df, pairs, counts


def _direct(carbon, drawn, convention, k):
    """{reference: lowest RMS over every sample of rank < k of every item}, pymatgen called on every pair."""
    from pymatgen.analysis.structure_matcher import StructureMatcher

    sm = StructureMatcher(**CONVENTIONS[convention])
    truth = {it["id"]: it["ground_truth"] for it in carbon}
    built = [sample_as_structure(s.kind, s.payload, truth[i]) for i, smp in drawn.items() for s in smp[:k]]
    best = {}
    for j, gt in truth.items():
        ref = reference_structure(gt)
        found = [r[0] for st in built if (r := sm.get_rms_dist(st, ref)) is not None]
        best[j] = min(found) if found else math.nan
    return best


@pytest.mark.parametrize("convention", sorted(CONVENTIONS))
def test_metre_equals_pymatgen_on_every_pair(carbon, drawn, scored, convention):
    df, pairs, counts = scored
    for k in (1, 2):
        expect = _direct(carbon, drawn, convention, k)
        got = metre.metre_items(df, pairs, k).set_index(["id", "convention"]).xs(convention, level="convention")
        at = "1" if k == 1 else "k"
        for j, rms in expect.items():
            assert got.loc[j, f"metre_at_{at}"] == (not math.isnan(rms)), (j, k)
            if not math.isnan(rms):
                assert got.loc[j, f"metre_rms_at_{at}"] == pytest.approx(rms, abs=1e-9)
    # the pre-filter compared fewer pairs than every sample against every other reference
    assert counts["pairs_compared"] < counts["all_pairs"] == 12 * 5 and counts["timeouts"] == 0


def test_metre_counts_what_the_one_to_one_rate_does_not(carbon, drawn, scored):
    """Every reference is some item's sample 0, so METRe@1 is 100 %; the one-to-one rate counts
    only items whose neighbour's crystal is their own too. cRMSE puts stol where nothing matched."""
    df, pairs, _ = scored
    summary = csp.summarize_csp(df, carbon, 2, "neighbour", pairs=pairs)
    for name, block in summary["conventions"].items():
        s = block["all"]
        assert s["metre@1"] == 100.0 and s["metre@k"] == 100.0 and s["metre_crmse@1"] == s["metre_rmse@1"]
        assert s["match_rate@1"] < s["metre@1"] and s["match_rate@k"] <= s["metre@k"]
        per_item = csp.item_results(df, 2)
        rms = per_item.loc[per_item["convention"] == name, "rms_at_1"]
        stol = CONVENTIONS[name]["stol"]
        assert s["crmse@1"] == pytest.approx(round(rms.fillna(stol).mean(), 4))
        assert s["crmse@1"] >= (s["rmse@1"] or 0.0)
    # the answer text of C-80144 (its sample 1) matches C-9588's reference, a cross match at k only
    text_hits = pairs[(pairs["id"] == "C-80144-1745-9") & (pairs["rank"] == 1)]
    assert "C-9588-6827-42" in set(text_hits["reference"])


def test_the_deduplicated_set_limits_references_and_generated_set(carbon, scored):
    """Over a subset, a reference counts only the samples of the subset's own items: leaving out
    the item whose sample matched it leaves it unmatched, unless another sample of the subset does."""
    df, pairs, _ = scored
    whole = metre.metre_items(df, pairs, 2).set_index(["id", "convention"])
    assert whole["metre_at_k"].all()
    for left_out in CHOSEN:
        keep = set(CHOSEN) - {left_out}
        sub = metre.metre_items(df, pairs, 2, keep).set_index(["id", "convention"])
        assert {i for i, _ in sub.index} == keep
        for (j, name), row in sub.iterrows():
            own = df[(df["id"] == j) & (df["convention"] == name) & df["matched"]]
            cross = pairs[(pairs["reference"] == j) & (pairs["convention"] == name) & pairs["id"].isin(keep)]
            assert row["metre_at_k"] == (len(own) + len(cross) > 0)


def test_crmse_and_metre_by_hand():
    """Three references, stol 0.5 (cdvae): one matched by its own sample (0.1), one only by another
    item's sample (0.2), one by nobody: match rate 1/3, RMSE 0.1, cRMSE (0.1 + 0.5 + 0.5)/3;
    METRe 2/3, its RMSE 0.15, its cRMSE (0.1 + 0.2 + 0.5)/3."""
    own = pd.DataFrame(
        {
            "id": ["a", "b", "c"],
            "rank": [0, 0, 0],
            "sample": pd.array([0, 0, 0], dtype="Int64"),
            "convention": "cdvae",
            "matched": [True, False, False],
            "rms_dist": [0.1, math.nan, math.nan],
            "reason": [None, "no_match", "no_match"],
            "detail": "",
        }
    )
    pairs = pd.DataFrame(
        {"reference": ["b"], "id": ["c"], "rank": [0], "sample": [0], "convention": ["cdvae"], "rms_dist": [0.2]}
    )
    per_item = metre.with_metre(csp.item_results(own, 1), metre.metre_items(own, pairs, 1))
    m = csp.csp_metrics(per_item, "cdvae")
    assert (m["match_rate@1"], m["rmse@1"], m["crmse@1"]) == (pytest.approx(100 / 3, abs=1e-4), 0.1, 0.3667)
    assert (m["metre@1"], m["metre_rmse@1"], m["metre_crmse@1"]) == (pytest.approx(200 / 3, abs=1e-4), 0.15, 0.2667)
