"""Magpie features against matminer (the peer) and the shared feature cache."""

from __future__ import annotations

import shutil
import warnings

import numpy as np
import pandas as pd
import pytest

from crucible.core.errors import DataValidationError
from crucible.core.io import write_parquet
from crucible.features import MAGPIE_COLUMNS, MAGPIE_VERSION
from crucible.features import cache as fcache
from crucible.features import magpie as fmagpie
from crucible.features import magpie_features as magpie
from crucible.features.formulas import parse_formulas

# Formulas that exercise the parser beyond the Matbench data.
EDGE_FORMULAS = [
    "Ag(AuS)2",
    "((FeO)2Li)3",
    "Li3Fe2(PO4)3",
    "Ca(OH)2",
    "K4[Fe(CN)6]",
    "Y3N@C80",
    "Fe2 O3",
    "Fe0.620C0.000953Mn0.000521",
    "Fe.5O",
    "Fe0.5O1.",
    "Fe2O3Fe",
    "HD2O",
    "D2O",
    "T2O",
    "Fe0.0O",
    "Fe1e-3O",
    "Fe1Ni1.00001",
    "Fe1Ni1.000009",
    "Fe1.0000000001Ni1",
    "FeCoNiCrMnAlTiVCuZnMoWNb",
    "O",
    "(NaCl)0.5",
    "Fe\nO",
]


@pytest.fixture(scope="session")
def sample(task_formulas) -> list[str]:
    """2,400 distinct formulas, seeded: every task contributes, rare shapes always included."""
    rng = np.random.default_rng(20240521)
    chosen: set[str] = set()
    for fs in task_formulas.values():
        distinct = sorted(set(fs))
        chosen.update(distinct[i] for i in rng.choice(len(distinct), min(150, len(distinct)), replace=False))
    everything = sorted({f for fs in task_formulas.values() for f in fs})
    rest = sorted(set(everything) - chosen)
    chosen.update(rest[i] for i in rng.choice(len(rest), 2400 - len(chosen), replace=False))
    return sorted(chosen)


def _matminer(formulas: list[str]) -> np.ndarray:
    from matminer.featurizers.composition import ElementProperty
    from pymatgen.core import Composition

    featurizer = ElementProperty.from_preset("magpie")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.array([featurizer.featurize(Composition(f)) for f in formulas], dtype=float)


def test_columns_are_matminers():
    from matminer.featurizers.composition import ElementProperty

    assert list(MAGPIE_COLUMNS) == ElementProperty.from_preset("magpie").feature_labels()
    assert list(magpie(["NaCl"]).columns) == list(MAGPIE_COLUMNS)
    assert len(MAGPIE_COLUMNS) == 132


def test_equal_to_matminer_on_sample(sample):
    assert len(sample) >= 2000
    formulas = sample + EDGE_FORMULAS
    ours = magpie(formulas)
    assert ours.dtypes.eq(np.float64).all()
    ref = _matminer(formulas)
    # The contract is 1e-9 relative; the implementation is in fact bit-identical.
    np.testing.assert_allclose(ours.to_numpy(), ref, rtol=1e-9, atol=0, equal_nan=True)
    assert np.array_equal(ours.to_numpy(), ref, equal_nan=True)


def test_parser_agrees_with_pymatgen(task_formulas):
    from pymatgen.core import Composition

    formulas = sorted({f for fs in task_formulas.values() for f in fs}) + EDGE_FORMULAS
    parsed = parse_formulas(formulas)
    offsets = np.concatenate([[0], np.cumsum(parsed.counts)])
    mismatches = []
    for i, f in enumerate(formulas):
        ref = [(el.Z, amount) for el, amount in Composition(f).element_composition.items()]
        lo, hi = offsets[i], offsets[i + 1]
        ours = list(zip(parsed.z[lo:hi].tolist(), parsed.amount[lo:hi].tolist()))
        if ours != ref:
            mismatches.append((f, ours, ref))
    assert not mismatches, mismatches[:5]


def test_rows_follow_input_order_and_repeat():
    df = magpie(["NaCl", "Fe2O3", "NaCl", "Ag(AuS)2"])
    assert len(df) == 4
    assert df.iloc[0].equals(df.iloc[2])
    assert df.iloc[1].equals(magpie(["Fe2O3"]).iloc[0])
    assert magpie(pd.Series(["Fe2O3"], index=[7])).index.tolist() == [0]
    assert magpie([]).shape == (0, 132)


@pytest.mark.parametrize(
    "bad, reason",
    [
        ("", "empty"),
        ("   ", "empty"),
        ("Xx2O", "unknown element"),
        ("Abcd", "unknown element"),
        ("Fe2O-3", "negative"),
        ("Fe(O", "unbalanced"),
        ("Fe0", "non-zero"),
        (None, "not a string"),
    ],
)
def test_malformed_formula_names_row(bad, reason):
    with pytest.raises(DataValidationError) as info:
        magpie(["NaCl", "Fe2O3", bad, "SiO2"])
    message = str(info.value)
    assert f"row 2: formula {bad!r}" in message
    assert reason in message


def test_version_tracks_matminer_and_tables_are_pinned(tmp_path, monkeypatch):
    """The version names matminer and the tables' hash; an edited table is refused (its pin in
    config/sources.yaml), not turned into other features under another version."""
    import matminer

    from crucible.core.errors import HashMismatchError
    from crucible.sources import pinned_files

    assert MAGPIE_VERSION.startswith(matminer.__version__ + "-")
    real = pinned_files.package_dir("matminer")
    root = tmp_path / "matminer"
    shutil.copytree(
        real / "utils" / "data_files" / "magpie_elementdata", root / "utils" / "data_files" / "magpie_elementdata"
    )
    original = pinned_files.package_dir
    monkeypatch.setattr(pinned_files, "package_dir", lambda p: root if p == "matminer" else original(p))
    fmagpie._tables.cache_clear()
    try:
        assert fmagpie._version() == MAGPIE_VERSION
        path = root / "utils" / "data_files" / "magpie_elementdata" / "Electronegativity.table"
        path.write_text(path.read_text().replace("0.98", "0.99", 1))
        fmagpie._tables.cache_clear()
        with pytest.raises(HashMismatchError, match="Electronegativity.table.*features/magpie/Electronegativity"):
            fmagpie._version()
    finally:
        fmagpie._tables.cache_clear()


# --------------------------------------------------------------------------------------------
# cache


@pytest.fixture(scope="module")
def data_files(tmp_path_factory, task_formulas):
    """Small task tables in the results/matbench/data layout (mbid, formula)."""
    root = tmp_path_factory.mktemp("data")
    paths = []
    for task in ("matbench_steels", "matbench_expt_gap", "matbench_jdft2d"):
        fs = task_formulas[task]
        path = root / f"{task}.parquet"
        write_parquet(pd.DataFrame({"mbid": [f"{task}-{i}" for i in range(len(fs))], "formula": fs}), path)
        paths.append(path)
    return paths


def test_cache_matches_fresh_features(tmp_path, data_files, task_formulas):
    out = fcache.features_path("matbench_steels", tmp_path)
    assert out == tmp_path / "features" / f"magpie-{MAGPIE_VERSION}" / "matbench_steels.parquet"
    fcache.build_cache(data_files, out)  # None: the stage's exit status is 0
    stored = pd.read_parquet(out)
    assert list(stored.columns) == ["formula", *MAGPIE_COLUMNS]
    assert stored["formula"].tolist() == sorted(stored["formula"])
    distinct = set(pd.concat([pd.read_parquet(p) for p in data_files])["formula"])
    assert len(stored) == stored["formula"].nunique() == len(distinct)
    assert fcache.cache_version(out) == MAGPIE_VERSION

    wanted = task_formulas["matbench_expt_gap"][:300] + task_formulas["matbench_steels"][:5]
    loaded = fcache.load_features(out, wanted)
    pd.testing.assert_frame_equal(loaded, magpie(wanted), check_exact=True)

    first = out.read_bytes()
    fcache.build_cache(list(reversed(data_files)), out)
    assert out.read_bytes() == first  # deterministic bytes


def test_cache_refuses_other_version(tmp_path, data_files, monkeypatch):
    out = tmp_path / "cache.parquet"
    fcache.build_cache(data_files[:1], out)
    with pytest.raises(fcache.StaleCacheError, match="rebuild"):
        fcache.load_features(out, ["Fe"], expected_version="0.0.0-deadbeef")
    # A new featurizer version (new matminer, tables or code) refuses the old file...
    monkeypatch.setattr(fcache, "MAGPIE_VERSION", "9.9.9-0123456789abcdef")
    with pytest.raises(fcache.StaleCacheError):
        fcache.load_features(out, ["Fe"])
    # ...and writes to a different, versioned path: a file or directory named after the old
    # version is refused.
    assert fcache.features_path("t", tmp_path).parent.name == "magpie-9.9.9-0123456789abcdef"
    with pytest.raises(fcache.StaleCacheError, match="file name"):
        fcache.build_cache(data_files[:1], tmp_path / f"magpie-{MAGPIE_VERSION}.parquet")
    with pytest.raises(fcache.StaleCacheError, match="file name"):
        fcache.build_cache(data_files[:1], tmp_path / f"magpie-{MAGPIE_VERSION}" / "matbench_steels.parquet")


def test_cache_without_version_is_refused(tmp_path):
    path = tmp_path / "foreign.parquet"
    df = magpie(["NaCl"])
    df.insert(0, "formula", ["NaCl"])
    write_parquet(df, path)
    with pytest.raises(fcache.StaleCacheError):
        fcache.load_features(path, ["NaCl"])


def test_cache_names_missing_formulas(tmp_path, data_files):
    out = tmp_path / "cache.parquet"
    fcache.build_cache(data_files[:1], out)
    with pytest.raises(DataValidationError, match=r"2 formulas are not in the feature cache: 'Xe9', 'NaCl'"):
        fcache.load_features(out, ["Xe9", "NaCl", "Xe9"])


def test_cache_names_file_and_row_of_bad_formula(tmp_path):
    path = tmp_path / "task.parquet"
    write_parquet(pd.DataFrame({"mbid": ["a", "b", "c"], "formula": ["NaCl", "Fe2O3", "Qq2"]}), path)
    with pytest.raises(DataValidationError, match=r"task\.parquet: row 2: field 'formula' 'Qq2'"):
        fcache.build_cache([path], tmp_path / "out.parquet")


def test_cli(tmp_path, data_files, capsys):
    from crucible.cli import main

    assert main(["features", "version"]) == 0
    assert capsys.readouterr().out.strip() == MAGPIE_VERSION
    out = tmp_path / "features" / f"magpie-{MAGPIE_VERSION}.parquet"
    assert main(["features", "build", "--data", *map(str, data_files), "--out", str(out)]) == 0
    assert fcache.cache_version(out) == MAGPIE_VERSION
    assert main(["features", "build", "--data", str(data_files[0]), "--out", str(tmp_path / "magpie-x.parquet")]) == 2
    assert "file name" in capsys.readouterr().err


def test_a_tasks_features_do_not_depend_on_the_other_tasks(tmp_path, data_files, task_formulas):
    """Each task's file is built from its own table: it holds exactly its distinct formulas, and
    the same numbers as a file built over every task, so adding or removing tasks never changes
    a task's features (nor, through them, its predictions)."""
    from crucible.cli import main

    together = tmp_path / "all.parquet"
    assert main(["features", "build", "--data", *map(str, data_files), "--out", str(together)]) == 0
    full = pd.read_parquet(together)
    for data in data_files:
        task = data.stem
        own = fcache.features_path(task, tmp_path)
        assert main(["features", "build", "--data", str(data), "--out", str(own)]) == 0
        part = pd.read_parquet(own)
        assert part["formula"].tolist() == sorted(set(task_formulas[task]))
        assert fcache.cache_version(own) == MAGPIE_VERSION
        expected = full.set_index("formula").loc[part["formula"]].reset_index()
        pd.testing.assert_frame_equal(part, expected, check_exact=True)
        wanted = task_formulas[task]
        pd.testing.assert_frame_equal(
            fcache.load_features(own, wanted), fcache.load_features(together, wanted), check_exact=True
        )
