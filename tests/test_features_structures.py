"""Structure features: canonical hash, Sine Coulomb eigenvalues equal to matminer's on real
crystals (the 71 Delta-test elements and 47 Materials Project Li-O structures), the
per-structure cache and its version checks."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pyarrow.parquet as pq
import pytest

from crucible.core.errors import DataValidationError
from crucible.core.io import write_parquet
from crucible.features.cache import StaleCacheError
from crucible.features.sine_coulomb import ANG_TO_BOHR, sine_coulomb_eigenvalues, sine_coulomb_matrices
from crucible.features.structure_cache import (
    SCM_VERSION,
    build_scm_cache,
    load_scm,
    scm_cache_dirname,
    scm_cache_filename,
)
from crucible.features.structures import StructureError, parse_structure, structure_hash

from helpers import delta_structures, li_o_structures


def _real_structures():
    return [s for _, s in delta_structures()] + [s for _, s, _, _ in li_o_structures()]


def test_constant_is_matminers():
    from matminer.featurizers.structure import matrix

    assert ANG_TO_BOHR == matrix.ANG_TO_BOHR


def test_matrices_and_eigenvalues_are_bit_identical_to_matminer():
    from matminer.featurizers.structure import SineCoulombMatrix

    structures = _real_structures()
    assert len(structures) == 118
    reference = SineCoulombMatrix().fit(structures)
    as_matrix = SineCoulombMatrix(flatten=False)
    ours = sine_coulomb_eigenvalues([parse_structure(s.to_json()) for s in structures])
    width = max(s.num_sites for s in structures)
    assert width == 102  # the largest Li-O cell: a real test of padding and ordering
    for s, eig in zip(structures, ours):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # np.matrix PendingDeprecationWarning inside matminer
            expected = reference.featurize(s)
            matrix = as_matrix.featurize(s)[0]
        assert np.array_equal(sine_coulomb_matrices([parse_structure(s.to_json())])[0], matrix), s.formula
        n = s.num_sites
        assert len(eig) == n
        # Unsorted, exactly as matminer returns them; then zero padding to the fitted width.
        assert np.array_equal(eig, expected[:n]), s.formula
        assert not expected[n:].any()
        assert len(expected) == width


def test_hash_ignores_serialisation_details_but_not_the_crystal():
    _, s, _, _ = li_o_structures()[0]
    d = s.as_dict()
    key = structure_hash(s.to_json())
    assert key == structure_hash(json.dumps(d, indent=3))
    d2 = json.loads(s.to_json())
    for site in d2["sites"]:
        site["properties"] = {}
        site["xyz"] = [0, 0, 0]
        site["label"] = "x"
    d2["@version"] = "0"
    assert structure_hash(d2) == key
    moved = s.copy()
    moved.translate_sites([0], [1e-9, 0, 0])
    assert structure_hash(moved.to_json()) != key
    strained = s.copy()
    strained.apply_strain(1e-12)
    assert structure_hash(strained.to_json()) != key
    swapped = s.copy()
    swapped.replace(0, "Na")
    assert structure_hash(swapped.to_json()) != key


def test_bad_and_disordered_structures_are_named():
    from pymatgen.core import Lattice, Structure

    with pytest.raises(StructureError, match="not JSON"):
        structure_hash("{oops")
    with pytest.raises(StructureError, match="missing or bad"):
        structure_hash(json.dumps({"lattice": {}}))
    disordered = Structure(Lattice.cubic(4), [{"Li": 0.5, "Na": 0.5}], [[0, 0, 0]])
    with pytest.raises(StructureError, match="site 0 is disordered"):
        parse_structure(disordered.to_json())


def _table(path, structures):
    import pandas as pd

    write_parquet(
        pd.DataFrame(
            {
                "mbid": [f"x-{i}" for i in range(len(structures))],
                "structure": [None if s is None else s.to_json() for s in structures],
            }
        ),
        path,
    )
    return path


def test_cache_holds_each_distinct_structure_once_and_is_deterministic(tmp_path):
    li_o = [s for _, s, _, _ in li_o_structures()]
    a = _table(tmp_path / "a.parquet", li_o[:30] + [None])
    b = _table(tmp_path / "b.parquet", li_o[20:] + li_o[:5])
    out1 = tmp_path / "1" / scm_cache_filename()
    out2 = tmp_path / "2" / scm_cache_filename()
    build_scm_cache([a, b], out1)
    assert pq.read_metadata(out1).num_rows == 47
    build_scm_cache([b, a], out2)
    assert out1.read_bytes() == out2.read_bytes()
    hashes = [structure_hash(s.to_json()) for s in li_o]
    loaded = load_scm(out1, hashes[::-1])
    direct = sine_coulomb_eigenvalues([parse_structure(s.to_json()) for s in li_o[::-1]])
    assert all(np.array_equal(x, y) for x, y in zip(loaded, direct))
    stored = pq.read_table(out1)
    keys = stored.column("structure_hash").to_pylist()
    assert keys == sorted(set(hashes))
    n_sites = dict(zip(hashes, (len(s) for s in li_o)))
    assert stored.column("n_sites").to_pylist() == [n_sites[k] for k in keys]


def test_cache_refuses_other_versions_and_names_missing_structures(tmp_path):
    li_o = [s for _, s, _, _ in li_o_structures()]
    table = _table(tmp_path / "a.parquet", li_o[:3])
    with pytest.raises(StaleCacheError, match="does not carry this featurizer's version"):
        build_scm_cache([table], tmp_path / "scm-0-old.parquet")
    # the DAG's per-task files: the directory carries the version
    with pytest.raises(StaleCacheError, match="does not carry this featurizer's version"):
        build_scm_cache([table], tmp_path / "scm-0-old" / "matbench_jdft2d.parquet")
    build_scm_cache([table], tmp_path / scm_cache_dirname() / "matbench_jdft2d.parquet")
    assert pq.read_metadata(tmp_path / scm_cache_dirname() / "matbench_jdft2d.parquet").num_rows == 3
    out = tmp_path / scm_cache_filename()
    build_scm_cache([table], out)
    with pytest.raises(DataValidationError, match="1 structures are not in the cache"):
        load_scm(out, [structure_hash(li_o[5].to_json())])
    from crucible.features.structure_cache import load_structure_cache

    with pytest.raises(StaleCacheError, match="needs 'other'"):
        load_structure_cache(out, [], "sine_coulomb_eigenvalues", "other")
    assert SCM_VERSION in out.name


def test_bad_structure_in_a_table_names_file_and_row(tmp_path):
    import pandas as pd

    good = li_o_structures()[0][1].to_json()
    path = tmp_path / "t.parquet"
    write_parquet(pd.DataFrame({"structure": [good, "{not json"]}), path)
    with pytest.raises(DataValidationError, match=r"t.parquet: row 1: field 'structure': not JSON"):
        build_scm_cache([path], tmp_path / scm_cache_filename())


def test_embedding_cache_version_comes_from_its_name_and_must_match_the_file(tmp_path):
    import pyarrow as pa

    from crucible.features.mlip_embed import load_embeddings
    from crucible.features.structure_cache import write_structure_cache

    hashes = ["a" * 64, "b" * 64]
    column = {"embedding": pa.array([[1.0, 2.0], [3.0, 4.0]], pa.list_(pa.float64(), 2))}
    good = tmp_path / "mlip-embed-chgnet-0.3.0-0123456789abcdef.parquet"
    write_structure_cache(hashes, column, "chgnet-0.3.0-0123456789abcdef", good)
    assert load_embeddings(good, hashes[::-1]).tolist() == [[3.0, 4.0], [1.0, 2.0]]
    renamed = tmp_path / "mlip-embed-chgnet-0.3.0-fedcba9876543210.parquet"
    good.rename(renamed)
    with pytest.raises(StaleCacheError, match="written by version 'chgnet-0.3.0-0123456789abcdef'"):
        load_embeddings(renamed, hashes)
    # a per-task file of the DAG: the version is its directory's name
    per_task = tmp_path / "mlip-embed-chgnet-0.3.0-0123456789abcdef" / "matbench_jdft2d.parquet"
    per_task.parent.mkdir()
    renamed.rename(per_task)
    assert load_embeddings(per_task, hashes[::-1]).tolist() == [[3.0, 4.0], [1.0, 2.0]]
    moved = tmp_path / "mlip-embed-chgnet-0.3.0-fedcba9876543210" / "matbench_jdft2d.parquet"
    moved.parent.mkdir()
    per_task.rename(moved)
    with pytest.raises(StaleCacheError, match="written by version 'chgnet-0.3.0-0123456789abcdef'"):
        load_embeddings(moved, hashes)
