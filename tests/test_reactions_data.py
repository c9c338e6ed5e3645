"""Clean stage of the reaction tables: real rows, canonical SMILES, units, replicates, errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from crucible.core.errors import ConfigError, DataValidationError
from crucible.reactions import data

from helpers import clean_reaction_table, reaction_members

# (raw rows, substrates, values per condition key) from the sources' own documentation
# (../shared/specs/data-sources.md and the issue), each full factorial except Buchwald-Hartwig.
EXPECTED = {
    "buchwald-hartwig": (3955, 15, {"ligand": 4, "base": 3, "additive": 22}),
    "suzuki-miyaura": (5760, 15, {"ligand": 12, "reagents": 8, "solvents": 4}),
    "direct-arylation": (
        1728,
        1,
        {"base": 4, "ligand": 12, "solvents": 4, "concentration": 3, "reaction_temperature": 3},
    ),
    "thiol-addition": (1075, 25, {"catalysts": 43}),
    "cernak": (1536, 16, {"catalysts": 16, "base": 6}),
    "borylation": (1518, 33, {"ligand": 23, "solvents": 2}),
    "deoxyfluorination": (740, 37, {"base": 4, "reagents": 5}),
}


@pytest.mark.parametrize("dataset", sorted(EXPECTED))
def test_every_real_table_cleans_to_its_documented_shape(dataset):
    df, card = clean_reaction_table(dataset)
    rows, substrates, values = EXPECTED[dataset]
    assert card["raw_rows"] == rows and len(df) == rows  # no replicate in any of them
    assert card["replicate_groups_averaged"] == 0
    assert card["substrates"] == substrates == df["substrate"].nunique()
    assert card["values_per_condition_key"] == values
    assert not df.duplicated(["substrate", *values]).any()
    assert df["n_runs"].eq(1).all()


def test_buchwald_hartwig_misses_exactly_five_combinations():
    df, card = clean_reaction_table("buchwald-hartwig")
    assert card["full_factorial_per_substrate"] == 264
    assert 15 * 264 - len(df) == 5
    assert card["yield"]["max"] <= 100


def test_suzuki_substrate_drops_the_internal_standard_and_keeps_no_ligand_as_a_level():
    df, card = clean_reaction_table("suzuki-miyaura")
    assert not df["substrate_smiles"].str.contains("CCc1cccc(CC)c1", regex=False).any()
    assert df["substrate_smiles"].str.count(r"\.").ge(1).all()  # aryl (pseudo)halide . boron partner (a salt has more)
    assert (df["ligand"] == data.NONE_VALUE).sum() == 480 and (df["reagents"] == data.NONE_VALUE).sum() == 720
    assert card["constant_conditions"] == {"catalysts": "CC(=O)O~CC(=O)O~[Pd]"}
    assert df["yield"].between(0, 100).all()


def test_yields_in_fractions_become_percent_and_values_above_100_are_kept():
    df, card = clean_reaction_table("deoxyfluorination")
    assert card["yield"]["max"] == pytest.approx(106.0)
    assert card["yield"]["rows_above_100"] == 5


def test_thiol_addition_ee_from_ddg_is_whole_percent_at_298_K():
    df, card = clean_reaction_table("thiol-addition")
    check = card["ee_from_ddg"]
    assert check["temperature_K"] == 298.0 and check["max_abs_deviation_from_integer"] < 1e-3
    assert df["yield"].isna().all()
    assert df["ee"].eq(df["ee"].round()).all() and df["ee"].max() == 99 and df["ee"].min() == -34
    # 298.15 K would not give whole numbers: the check is not vacuous.
    raw = pd.read_csv(reaction_members()["reactions/thiol-addition"])
    ee_15 = data.ee_from_ddg(raw["Delta_Delta_G"].to_numpy(), 298.15)
    assert np.abs(ee_15 - ee_15.round()).max() > 0.02


def test_direct_arylation_keeps_names_and_numeric_conditions_with_units():
    df, card = clean_reaction_table("direct-arylation")
    assert set(df["reaction_temperature"]) == {"90 °C", "105 °C", "120 °C"}
    assert set(df["concentration"]) == {"0.057 M", "0.1 M", "0.153 M"}
    assert "BrettPhos" in set(df["ligand_name"])
    assert card["condition_kinds"]["concentration"] == "number"


def test_canonical_smiles_unify_spellings():
    assert data.canonical_smiles("C1=CC=CC=C1") == data.canonical_smiles("c1ccccc1") == "c1ccccc1"


def _user_spec(csv, **extra):
    return data.dataset_spec(
        "mine",
        {
            "mine": {
                "csv": str(csv),
                "substrate_columns": ["sub"],
                "yield_column": "y",
                "yield_unit": "percent",
                "conditions": [{"key": "ligand", "column": "lig"}],
                **extra,
            }
        },
    )


def test_user_table_replicates_are_averaged_and_counted(tmp_path):
    csv = tmp_path / "mine.csv"
    csv.write_text("sub,lig,y\nc1ccccc1Br,CP(C)C,10\nBrc1ccccc1,CP(C)C,30\nc1ccccc1Br,CCP(CC)CC,50\n")
    df, card = data.clean_table(_user_spec(csv), csv)
    assert len(df) == 2 and card["raw_rows"] == 3
    assert card["replicate_groups_averaged"] == 1 and card["source_rows_in_replicate_groups"] == 2
    row = df[df["ligand"] == "CP(C)C"].iloc[0]
    assert row["yield"] == 20.0 and row["n_runs"] == 2


def test_bad_smiles_and_bad_yield_name_file_row_and_field(tmp_path):
    csv = tmp_path / "mine.csv"
    csv.write_text("sub,lig,y\nc1ccccc1Br,CP(C)C,10\nc1ccccc1Br,C1CC,30\n")
    with pytest.raises(DataValidationError, match=r"row 1, field 'lig'.*C1CC"):
        data.clean_table(_user_spec(csv), csv)
    csv.write_text("sub,lig,y\nc1ccccc1Br,CP(C)C,ten\n")
    with pytest.raises(DataValidationError, match=r"row 0, field 'y'"):
        data.clean_table(_user_spec(csv), csv)
    csv.write_text("sub,ligand,y\nc1ccccc1Br,CP(C)C,10\n")
    with pytest.raises(DataValidationError, match="missing column"):
        data.clean_table(_user_spec(csv), csv)


@pytest.mark.parametrize(
    "yields, extra, match",
    [
        # both were accepted: questions then held a best yield of 250 and an option worth -0.16
        (("10", "250", "30"), {}, r"mine.csv: row 1, field 'y': yield '250' is outside 0-100 %$"),
        (
            ("10", "-40", "250"),
            {},
            r"row 1, field 'y': yield '-40' is outside 0-100 %; 2 rows out of range \(rows 1, 2\)",
        ),
        (
            ("0.1", "1.5", "0.3"),
            {"yield_unit": "fraction"},
            r"row 1, field 'y': yield '1.5' is outside 0-1 \(yield_unit fraction\)",
        ),
        (("10", "104", "30"), {"max_yield": 103}, r"row 1, field 'y': yield '104' is outside 0-103 %"),
    ],
)
def test_yields_outside_their_range_are_refused_by_row_and_field(tmp_path, yields, extra, match):
    csv = tmp_path / "mine.csv"
    rows = [f"c1ccccc1Br,{lig},{y}" for lig, y in zip(("CP(C)C", "CCP(CC)CC", "CCCP(CCC)CCC"), yields)]
    csv.write_text("sub,lig,y\n" + "\n".join(rows) + "\n")
    with pytest.raises(DataValidationError, match=match):
        data.clean_table(_user_spec(csv, **extra), csv)
    csv.write_text("sub,lig,y\nc1ccccc1Br,CP(C)C,0\nc1ccccc1Br,CCP(CC)CC,100\nc1ccccc1Br,CCCP(CCC)CCC,102\n")
    assert data.clean_table(_user_spec(csv, max_yield=102), csv)[0]["yield"].max() == 102  # the bounds are in


def test_unknown_dataset_is_a_config_error():
    with pytest.raises(ConfigError, match="unknown reaction dataset"):
        data.dataset_spec("buchwald")
