"""Crystal sets: the AFLOW prototypes out of the pinned wheel, the CDVAE CSVs through the
upstream fetch path (local HTTP server on 127.0.0.1 serving real perov-5 rows; git blob pins,
lock file, no-pin refusal), user CSV/JSONL/ASE db, the split, and the prompt items."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from crucible.core.errors import DataValidationError, HashMismatchError
from crucible.core.hashes import file_sha256
from crucible.crystal import data, items
from crucible.sources import downloads as sources
from crucible.sources import pinned_files

from helpers import REPO, StaticFileServer

PEROV = REPO / "tests" / "data" / "cdvae" / "perov_5"
TEMPLATES = items.load_templates(REPO / "config" / "crystal_prompts.yaml")


@pytest.fixture
def www(tmp_path):
    """Static files on 127.0.0.1 with the CDVAE layout; records the paths requested."""
    root = tmp_path / "www"
    shutil.copytree(PEROV, root / "perov_5")
    server = StaticFileServer(root)
    yield server.url, root, server.hits
    server.close()


# ---- AFLOW prototypes ----------------------------------------------------------------------


def test_aflow_prototypes_from_the_pinned_wheel(aflow_file):
    rows = data.load_aflow(aflow_file)
    assert len(rows) == 288
    assert sum(len(s) <= 20 for _, s, _ in rows) == 250
    assert len({i for i, _, _ in rows}) == 288  # labels repeat; ids do not


def test_split_is_deterministic_disjoint_and_seeded(aflow_file):
    train, test = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0)
    again = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0)
    assert [i for i, _ in test] == [i for i, _ in again[1]]
    assert len(train) + len(test) == 250 and len(test) == 125
    assert not {i for i, _ in train} & {i for i, _ in test}
    other = data.load_dataset("aflow", [str(aflow_file)], 0.5, 1)[1]
    assert [i for i, _ in other] != [i for i, _ in test]


def test_items_follow_opencompass_record_and_llm_contract(aflow_file):
    train, test = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0)
    prompts, train_rec = items.build_items(
        "aflow-prototypes", train, test, "composition-v1", TEMPLATES["composition-v1"]
    )
    item = prompts[0]
    assert {"id", "messages", "meta", "id_ddm", "system_prompt", "user_input", "ground_truth"} <= set(item)
    assert [m["role"] for m in item["messages"]] == ["system", "user"]
    assert item["messages"][1]["content"] == item["user_input"]
    gt = item["ground_truth"]
    assert len(gt["lattice"]) == 3 and all(len(r) == 3 for r in gt["lattice"])
    assert len(gt["sites"]) == item["meta"]["nsites"]
    # sites grouped in the order the prompt states
    assert [s["element"] for s in gt["sites"]] == [
        el for el, n in zip(item["meta"]["elements"], item["meta"]["element_counts"]) for _ in range(n)
    ]
    assert "space group" not in item["user_input"]
    for key in ("formula", "nsites", "spacegroup_number", "crystal_system", "formula_in_train"):
        assert key in item["meta"]
    assert [p["id"] for p in prompts] == sorted(p["id"] for p in prompts)
    seen = {r["meta"]["anonymized_formula"] for r in train_rec}
    assert all(p["meta"]["formula_in_train"] == (p["meta"]["anonymized_formula"] in seen) for p in prompts)
    assert 0 < sum(p["meta"]["formula_in_train"] for p in prompts) < len(prompts)  # both subsets exist


def test_reference_in_the_item_is_the_prototype(aflow_file):
    from pymatgen.analysis.structure_matcher import StructureMatcher

    from crucible.crystal.scoring import reference_structure

    rows = {i: s for i, s, _ in data.load_aflow(aflow_file)}
    train, test = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0)
    prompts, _ = items.build_items("a", train, test[:10], "composition-v1", TEMPLATES["composition-v1"])
    for p in prompts:
        assert StructureMatcher(primitive_cell=False, scale=False).fit(
            reference_structure(p["ground_truth"]), rows[p["id"]]
        )


def test_spacegroup_template_states_the_group(aflow_file):
    train, test = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0)
    prompts, _ = items.build_items(
        "a", train, test[:3], "composition-spacegroup-v1", TEMPLATES["composition-spacegroup-v1"]
    )
    for p in prompts:
        assert f"(No. {p['meta']['spacegroup_number']})" in p["user_input"]
        assert p["meta"]["prompt_gives_spacegroup"] is True


# ---- CDVAE upstream through a local server -------------------------------------------------


def _cdvae_sources(tmp_path, url, pins: dict[str, dict]) -> Path:
    arts = {}
    for split in ("train", "test"):
        arts[f"perov-{split}"] = {
            "role": f"crystal/perov-5/{split}",
            "kind": "http",
            "url": f"{url}/perov_5/{split}.csv",
            "mirror_path": f"perov_5/{split}.csv",
            "filename": f"perov-{split}.csv",
            **pins.get(split, {}),
        }
    path = tmp_path / "sources.yaml"
    path.write_text(yaml.safe_dump({"artifacts": arts}))
    return path


def test_git_blob_id_is_what_git_computes():
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    path = PEROV / "test.csv"
    expected = subprocess.run(
        ["git", "hash-object", str(path)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert sources.git_blob_id(path) == expected


def test_blob_pinned_download_records_sha256_then_checks_it(tmp_path, www):
    url, root, hits = www
    blob = sources.git_blob_id(PEROV / "test.csv")
    srcs = pinned_files.load_sources(_cdvae_sources(tmp_path, url, {"test": {"git_blob": blob}}))
    spec = srcs["artifacts"]["perov-test"]
    lock = tmp_path / "sources.lock.json"
    dest = tmp_path / "dl" / "perov-test.csv"
    sources.fetch("perov-test", spec, dest, lock=lock)
    assert dest.read_bytes() == (PEROV / "test.csv").read_bytes()
    recorded = {"sha256": file_sha256(PEROV / "test.csv"), "git_blob": blob, "url": spec["url"]}
    assert json.loads(lock.read_text()) == {"perov-test": recorded}
    sources.fetch("perov-test", spec, dest, lock=lock)
    assert hits == ["/perov_5/test.csv"]  # present and matching: not fetched again
    # upstream changes the file; a blob pin that somehow still matched would not help: SHA-256 is locked
    dest.unlink()
    (root / "perov_5" / "test.csv").write_bytes((PEROV / "test.csv").read_bytes() + b"\n")
    with pytest.raises(HashMismatchError, match="lock file"):
        sources.fetch("perov-test", spec, dest, lock=lock)
    assert not dest.exists() and not list(dest.parent.glob(".fetch-*"))


def test_wrong_blob_pin_stops_and_leaves_nothing(tmp_path, www):
    url, _, _ = www
    srcs = pinned_files.load_sources(_cdvae_sources(tmp_path, url, {"test": {"git_blob": "0" * 40}}))
    dest = tmp_path / "dl" / "x.csv"
    with pytest.raises(HashMismatchError, match="git blob id mismatch"):
        sources.fetch("perov-test", srcs["artifacts"]["perov-test"], dest, lock=tmp_path / "l.json")
    assert not dest.exists() and not (tmp_path / "l.json").exists()


def test_no_pin_refuses_naming_hash_and_line(tmp_path, www, venv_env):
    url, _, _ = www
    path = _cdvae_sources(tmp_path, url, {})
    out = tmp_path / "dl" / "perov-test.csv"
    proc = subprocess.run(
        [
            "crucible",
            "sources",
            "fetch",
            "--artifact",
            "perov-test",
            "--sources",
            str(path),
            "--lock",
            str(tmp_path / "lock.json"),
            "--out",
            str(out),
        ],
        env=venv_env,
        capture_output=True,
        text=True,
    )
    sha = file_sha256(PEROV / "test.csv")
    assert proc.returncode == 2
    assert f"Received SHA-256 {sha}" in proc.stderr and f"sha256: {sha}" in proc.stderr
    assert "perov-test" in proc.stderr and str(path) in proc.stderr
    assert not out.exists() and not (tmp_path / "lock.json").exists()


def test_mirror_prefix_keeps_upstream_layout_then_items_build(tmp_path, www, venv_env):
    url, _, hits = www
    pins = {s: {"git_blob": sources.git_blob_id(PEROV / f"{s}.csv")} for s in ("train", "test")}
    path = _cdvae_sources(tmp_path, "https://raw.githubusercontent.com/never-fetched", pins)
    outs = []
    for split in ("train", "test"):
        out = tmp_path / "dl" / f"perov-{split}.csv"
        subprocess.run(
            [
                "crucible",
                "sources",
                "fetch",
                "--artifact",
                f"perov-{split}",
                "--sources",
                str(path),
                "--url-prefix",
                url,
                "--lock",
                str(tmp_path / "lock.json"),
                "--out",
                str(out),
            ],
            env=venv_env,
            check=True,
            capture_output=True,
        )
        outs.append(str(out))
    assert sorted(hits) == ["/perov_5/test.csv", "/perov_5/train.csv"]
    assert set(json.loads((tmp_path / "lock.json").read_text())) == {"perov-train", "perov-test"}
    train, test = data.load_dataset("cdvae", outs, dataset="perov-5", sources=path)
    assert (len(train), len(test)) == (40, 20)
    prompts, _ = items.build_items("perov-5", train, test, "composition-v1", TEMPLATES["composition-v1"])
    assert all(p["meta"]["nsites"] == 5 for p in prompts)
    assert prompts[0]["id"] == sorted(r[0] for r in data.load_cif_table(outs[1]))[0]


# ---- user sets -----------------------------------------------------------------------------


def _cifs(n=6):
    from pymatgen.core import Lattice, Structure

    out = []
    for i in range(n):
        s = Structure(Lattice.cubic(4.0 + 0.1 * i), ["Cs", "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
        out.append((f"u{i}", s))
    return out


def test_user_csv_jsonl_and_ase_db_load_the_same(tmp_path):
    import pandas as pd
    from ase.db import connect
    from pymatgen.io.ase import AseAtomsAdaptor

    rows = _cifs()
    pd.DataFrame({"id": [i for i, _ in rows], "cif": [s.to(fmt="cif") for _, s in rows]}).to_csv(
        tmp_path / "u.csv", index=False
    )
    with open(tmp_path / "u.jsonl", "w") as fh:
        for i, s in rows:
            fh.write(
                json.dumps({"id": i, "cif": s.to(fmt="cif"), "split": "test" if i in ("u0", "u3") else "train"}) + "\n"
            )
    with connect(str(tmp_path / "u.db")) as db:
        for _id, s in rows:
            db.write(AseAtomsAdaptor.get_atoms(s))
    for name in ("u.csv", "u.db"):
        train, test = data.load_dataset("user", [str(tmp_path / name)], 0.5, 0)
        assert len(train) == len(test) == 3
        assert all(len(s) == 2 for _, s in train + test)
    train, test = data.load_dataset("user", [str(tmp_path / "u.jsonl")], 0.5, 0)
    assert [i for i, _ in test] == ["u0", "u3"]  # the rows' own split wins


def test_user_errors_name_file_row_and_field(tmp_path):
    from pymatgen.core import Lattice, Structure

    disordered = Structure(Lattice.cubic(4), [{"Cs": 0.5, "K": 0.5}, "Cl"], [[0, 0, 0], [0.5, 0.5, 0.5]])
    good = _cifs(1)[0][1].to(fmt="cif")
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "a", "cif": good}) + "\n" + json.dumps({"id": "b", "cif": "not a cif"}) + "\n")
    with pytest.raises(DataValidationError, match=r"bad.jsonl: row 2, field 'cif'"):
        data.load_dataset("user", [str(path)])
    path.write_text(json.dumps({"id": "a", "cif": disordered.to(fmt="cif")}) + "\n")
    with pytest.raises(DataValidationError, match=r"row 1: disordered"):
        data.load_dataset("user", [str(path)])
    (tmp_path / "x.txt").write_text("")
    with pytest.raises(DataValidationError, match="csv or .jsonl"):
        data.load_dataset("user", [str(tmp_path / "x.txt")])


def test_lattice_system_template_agrees_with_pymatgen_and_tells_more_items_apart(aflow_file):
    """The composition-lattice-v1 prompt states the lattice system as pymatgen's
    SpacegroupAnalyzer names it (all 288 AFLOW prototypes) and the formula units; it never
    states the space group, and it tells at least as many items apart as composition-v1."""
    from crucible.crystal.items import spacegroup_analyzer

    rows = data.load_aflow(aflow_file)
    name = "composition-lattice-v1"
    built = {
        t: [items.make_item("aflow-prototypes", i, st, t, TEMPLATES[t], set()) for i, st, _ in rows] for t in TEMPLATES
    }
    for (i, st, _), it in zip(rows, built[name]):
        meta = it["meta"]
        assert meta["lattice_system"] == spacegroup_analyzer(st, symprec=items.SYMPREC).get_lattice_type(), i
        text = it["messages"][-1]["content"]
        assert f"with a {meta['lattice_system']} lattice" in text
        assert f"{meta['formula_units']} formula unit(s)" in text
        assert "space group" not in text.lower() and meta["spacegroup_symbol"] not in text
        assert not meta["prompt_gives_spacegroup"] and meta["prompt_gives_lattice_system"]
    for t in ("composition-v1", "composition-spacegroup-v1"):
        assert "prompt_gives_lattice_system" not in built[t][0]["meta"]

    def distinct(t):
        return len({tuple(m["content"] for m in it["messages"]) for it in built[t]})

    assert distinct(name) > distinct("composition-v1")


def test_polymorph_grouped_split_keeps_each_formula_on_one_side(aflow_file):
    """split_by formula (arXiv 2509.12178's fix for sets with many polymorphs): the AFLOW
    prototypes, whose formulas repeat across prototypes, split with no reduced formula in both
    splits; about half in test; seeded; the random split does share formulas."""
    by_formula = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0, split_by="formula")
    random_split = data.load_dataset("aflow", [str(aflow_file)], 0.5, 0)

    def shared(train, test):
        return {s.composition.reduced_formula for _, s in train} & {s.composition.reduced_formula for _, s in test}

    train, test = by_formula
    assert not shared(train, test) and shared(*random_split)
    assert abs(len(test) - len(train)) <= 0.1 * (len(train) + len(test))
    assert data.load_dataset("aflow", [str(aflow_file)], 0.5, 0, split_by="formula")[1] == test
    assert [i for i, _ in data.load_dataset("aflow", [str(aflow_file)], 0.5, 1, split_by="formula")[1]] != [
        i for i, _ in test
    ]
    with pytest.raises(DataValidationError, match="unknown split 'sites'"):
        data.load_dataset("aflow", [str(aflow_file)], 0.5, 0, split_by="sites")


def _table(path, ids, cifs, split=None):
    import pandas as pd

    cols = {"id": ids, "cif": cifs, **({"split": split} if split is not None else {})}
    pd.DataFrame(cols).to_csv(path, index=False)
    return str(path)


@pytest.mark.parametrize(
    "ids, split, edit, match",
    [
        # each of these was read without a word: a row drawn at random, an id "", a mirrored cell
        (None, ["train", "", "test", "train", "test", ""], None, r"field 'split' empty in 2 of 6 rows \(rows 2, 6\)"),
        (None, ["train", "val", "test", "train", "test", "test"], None, r"row 2, field 'split': 'val' is neither"),
        (["u0", "", "u2", "u3", "u4", "u5"], None, None, r"row 2, field 'id': empty id"),
        (None, None, ("_cell_length_a   4.00000000", "_cell_length_a   -4.0"), r"row 1, field 'cif': a negative cell"),
        # a NaN cell length crashed the symmetry analysis with a segmentation fault
        (None, None, ("_cell_length_a   4.00000000", "_cell_length_a   nan"), r"row 1: the cell .* no finite volume"),
        # a second block was dropped without a word: pymatgen reads the first
        (
            None,
            None,
            ("# generated", "data_extra\n_cell_length_a 3\n# generated"),
            r"row 1, field 'cif': 2 data_ blocks",
        ),
    ],
)
def test_user_table_mistakes_name_file_row_and_field(tmp_path, ids, split, edit, match):
    cifs = [s.to(fmt="cif") for _, s in _cifs()]
    if edit:
        assert edit[0] in cifs[0]
        cifs[0] = cifs[0].replace(*edit)
    path = _table(tmp_path / "u.csv", ids or [i for i, _ in _cifs()], cifs, split)
    with pytest.raises(DataValidationError, match=match) as err:
        data.load_dataset("user", [path])
    assert "u.csv" in str(err.value)


def test_user_sets_refuse_ids_across_files_and_an_empty_test_split(tmp_path):
    cifs = [s.to(fmt="cif") for _, s in _cifs()]
    a = _table(tmp_path / "a.csv", [i for i, _ in _cifs()], cifs)
    with pytest.raises(DataValidationError, match=r"a.csv: id 'u0' is also in .*a.csv"):
        data.load_dataset("user", [a, a])
    empty = _table(tmp_path / "e.csv", [], [])
    with pytest.raises(DataValidationError, match=r"e.csv: no test crystals \(0 crystal\(s\)"):
        data.load_dataset("user", [empty])
    with pytest.raises(DataValidationError, match=r"a.csv: no test crystals .* site limit 1"):
        data.load_dataset("user", [a], max_sites=1)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        # NaN was a bare ValueError; 1.5 put every crystal in test; -1 left every crystal out
        ({"test_fraction": float("nan")}, r"test_fraction must be in \(0, 1\], got nan"),
        ({"test_fraction": 1.5}, r"test_fraction must be in \(0, 1\], got 1.5"),
        ({"max_sites": -1}, r"max_sites must be 0 \(no limit\) or more, got -1"),
        # one formula: the polymorph-grouped split left train empty at test_fraction 0.1
        ({"test_fraction": 0.1, "split_by": "formula"}, r"grouped split put all 6 crystals in test \(1 group"),
    ],
)
def test_split_settings_out_of_range_are_refused(tmp_path, kwargs, match):
    path = _table(tmp_path / "a.csv", [i for i, _ in _cifs()], [s.to(fmt="cif") for _, s in _cifs()])
    with pytest.raises(DataValidationError, match=match):
        data.load_dataset("user", [path], **kwargs)


def test_a_negative_subset_size_is_named():
    with pytest.raises(DataValidationError, match="max_test_items must be 0 \\(all\\) or more, got -2"):
        data.subsample(list(range(5)), -2, 0, "max_test_items")
