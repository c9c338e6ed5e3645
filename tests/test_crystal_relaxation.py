"""Relax-then-match with EMT: a sample out of the matcher's reach relaxes back onto its reference
(unmatched before, matched after), an answer text relaxes with its item's species, a sample the
potential cannot relax is written without a structure and unmatched after, and the relaxed
samples file is scored by score-samples with the scores before relaxation beside its own."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from crucible.crystal import csp, generation, relaxation, samples
from crucible.crystal.items import ground_truth, write_jsonl
from crucible.crystal.scoring import CIF, TEXT, score_sample


def _item(ident, structure):
    return {
        "id": ident,
        "messages": [{"role": "user", "content": ident}],
        "meta": {"dataset": "tiny"},
        "ground_truth": ground_truth(structure),
    }


@pytest.fixture(scope="module")
def case():
    """fcc Cu and rock-salt NaCl (elements EMT does not know); Cu's samples: its cubic cell
    stretched by 15 % in volume with one atom moved by 0.62 Å (no match under either convention:
    the moved atom breaks the primitive cell the matcher reduces to), and the same as an answer
    text; NaCl's sample: itself."""
    from ase.build import bulk
    from pymatgen.io.ase import AseAtomsAdaptor

    cu = AseAtomsAdaptor.get_structure(bulk("Cu", "fcc", a=3.61, cubic=True))
    nacl = AseAtomsAdaptor.get_structure(bulk("NaCl", "rocksalt", a=5.64))
    off = cu.copy()
    off.scale_lattice(cu.volume * 1.15)
    off.translate_sites([0], [0.5, 0.3, 0.2], frac_coords=False)
    items = [_item("cu", cu), _item("nacl", nacl)]
    drawn = {
        "cu": [
            samples.Sample("cu", 0, CIF, off.to(fmt="cif")),
            samples.Sample("cu", 1, TEXT, generation.answer_from_structure(off, ["Cu"])),
        ],
        "nacl": [samples.Sample("nacl", 0, CIF, nacl.to(fmt="cif")), samples.Sample("nacl", 1, CIF, None, "no sample")],
    }
    return items, drawn


@pytest.fixture(scope="module")
def relaxed(case):
    from threadpoolctl import threadpool_limits

    from crucible.potentials.registry import load_potential

    items, drawn = case
    with threadpool_limits(1):  # as the rule's OMP_NUM_THREADS: 3x3 matrices need no BLAS threads
        return relaxation.relax_samples(drawn, items, 2, load_potential("emt"))


def test_a_sample_out_of_reach_relaxes_onto_its_reference(case, relaxed):
    items, drawn = case
    lines, counts = relaxed
    assert [(line["id"], line["sample"]) for line in lines] == [("cu", 0), ("cu", 1), ("nacl", 0), ("nacl", 1)]
    gt = items[0]["ground_truth"]
    for n in (0, 1):  # the CIF and the answer text of the same distorted cell
        before = drawn["cu"][n]
        assert score_sample(before.kind, before.payload, gt, "cdvae")[0] is None
        rms, reason, _ = score_sample(CIF, lines[n]["cif"], gt, "pymatgen-default")
        assert reason is None and rms < 0.05
    assert counts == {**counts, "samples": 4, "relaxed": 2, "failed": 1, "no_sample": 1, "not_converged": 0}
    assert lines[2]["cif"] is None and "elements the potential does not know: Cl, Na" in lines[2]["error"]
    assert lines[3] == {"id": "nacl", "sample": 1, "cif": None, "error": "no sample"}


def test_the_relaxed_file_is_scored_beside_the_samples_as_drawn(tmp_path, case, relaxed):
    items, drawn = case
    lines, _ = relaxed
    prompts, before_file, after_file = tmp_path / "prompts.jsonl", tmp_path / "s.jsonl", tmp_path / "r.jsonl"
    write_jsonl(items, prompts)
    write_jsonl(
        [
            {"id": s.id, "sample": s.number, **({"response": s.payload} if s.kind == TEXT else {"cif": s.payload})}
            for smp in drawn.values()
            for s in smp
        ],
        before_file,
    )
    write_jsonl(lines, after_file)
    (tmp_path / "r.json").write_text(json.dumps({"relaxation": {"potential": "emt", "samples": 4, "failed": 1}}))
    out = {n: tmp_path / n for n in ("b.parquet", "b.json", "bp.parquet", "a.parquet", "a.json", "ap.parquet")}
    before = csp.score_samples_file(
        prompts, before_file, "m", 2, out["b.parquet"], out["b.json"], out_pairs=out["bp.parquet"], progress=False
    )
    after = csp.score_samples_file(
        prompts,
        after_file,
        "m",
        2,
        out["a.parquet"],
        out["a.json"],
        out_pairs=out["ap.parquet"],
        info=tmp_path / "r.json",
        unrelaxed=out["b.json"],
        progress=False,
    )
    assert after["relaxed_with"] == "emt" and "relaxed_with" not in before
    for name in ("cdvae", "pymatgen-default"):
        assert after["before_relaxation"][name]["all"] == before["conventions"][name]["all"]
    # Cu matches only after relaxation, NaCl (its own crystal) only before, where EMT cannot relax it
    for path, matched in ((out["b.parquet"], {"nacl"}), (out["a.parquet"], {"cu"})):
        scores = pd.read_parquet(path)
        assert set(scores.loc[scores["matched"], "id"]) == matched
    assert after["unmatched_samples"]["no_response"] == 2  # NaCl's: not relaxed, and no sample at all
    # another responder's (or k's) summary was repeated as these samples' before relaxation
    from crucible.core.errors import DataValidationError

    for responder, k, field in (("other", 2, "responder"), ("m", 1, "k")):
        with pytest.raises(DataValidationError, match=f"b.json: field '{field}' is .*not the CSP summary of these"):
            csp.score_samples_file(
                prompts,
                after_file,
                responder,
                k,
                out["a.parquet"],
                out["a.json"],
                unrelaxed=out["b.json"],
                progress=False,
            )


@pytest.mark.parametrize("k", [0, -1])
def test_k_below_one_is_refused_not_a_short_or_empty_file(case, k):
    """k=0 relaxed nothing and wrote an empty file; k=-1 dropped each item's last sample (a
    slice); score-samples' k=0 was a bare ValueError."""
    from crucible.core.errors import DataValidationError

    items, drawn = case
    with pytest.raises(DataValidationError, match=f"k must be at least 1, got {k}"):
        relaxation.relax_samples(drawn, items, k, None)
    with pytest.raises(DataValidationError, match=f"k must be at least 1, got {k}"):
        csp.score_samples(drawn, items, k)


@pytest.mark.parametrize("fmax, steps", [(-1, 100), (float("nan"), 100), (0.1, -1)])
def test_fmax_and_steps_out_of_range_are_refused(case, fmax, steps):
    from crucible.core.errors import DataValidationError

    items, drawn = case
    with pytest.raises(DataValidationError, match="fmax must be a positive number and steps 0 or more"):
        relaxation.relax_samples(drawn, items, 2, None, fmax=fmax, steps=steps)
