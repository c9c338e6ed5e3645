"""CLI path relax → score → tables/figures on the EMT demo; the Excel workbook's sheets and
two-row headers read back with openpyxl; fetch's pin / no-pin behaviour on a local HTTP server."""

from __future__ import annotations

import hashlib
import json

import pytest

from crucible.catalysis import demo
from crucible.catalysis.catbench_files import read_catbench_json
from crucible.catalysis.clean import clean
from crucible.catalysis.fetch import UnpinnedSourceError, fetch_dataset
from crucible.cli import main
from crucible.core.errors import HashMismatchError

from helpers import StaticFileServer


@pytest.fixture(scope="module")
def scored(catalysis_demo, tmp_path_factory):
    out = tmp_path_factory.mktemp("cat_report")
    reactions = read_catbench_json(catalysis_demo / "emt-demo_adsorption.json")
    clean(reactions, out / "r.parquet", out / "s.db", out / "card.json", source={}, energy_source=demo.ENERGY_SOURCE)
    for model in ("emt", "emt-b"):
        assert (
            main(
                [
                    "catalysis",
                    "relax",
                    "--reactions",
                    str(out / "r.parquet"),
                    "--db",
                    str(out / "s.db"),
                    "--model",
                    "emt",
                    "--params",
                    '{"seeds": 2}',
                    "--out",
                    str(out / f"{model}_chunk.json"),
                ]
            )
            == 0
        )
        assert (
            main(
                [
                    "catalysis",
                    "score",
                    "--inputs",
                    str(out / f"{model}_chunk.json"),
                    "--model",
                    model,
                    "--out",
                    str(out / f"{model}.json"),
                    "--out-reactions",
                    str(out / f"{model}.parquet"),
                    "--out-anomaly",
                    str(out / f"{model}_anomaly_detection.json"),
                ]
            )
            == 0
        )
    assert (
        main(
            [
                "catalysis",
                "tables",
                "--inputs",
                str(out / "emt.json"),
                str(out / "emt-b.json"),
                "--out-prefix",
                str(out / "tables" / "catalysis_demo"),
                "--out-xlsx",
                str(out / "demo.xlsx"),
            ]
        )
        == 0
    )
    return out


def test_workbook_sheets_and_two_row_headers(scored):
    from openpyxl import load_workbook

    wb = load_workbook(scored / "demo.xlsx")
    # CatBench 1.1.6's order (test_catalysis_catbench compares every cell with CatBench's writer)
    assert wb.sheetnames == ["MLIP_Data", "MLIP_Data_shifted", "anomaly", "anomaly_shifted", "Coverage", "emt", "emt-b"]
    ws = wb["MLIP_Data"]
    top = [ws.cell(1, c).value for c in range(1, 17)]
    sub = [ws.cell(2, c).value for c in range(1, 17)]
    assert top[:4] == ["MLIP_name", "Normal rate (%)", "Adsorbate migration rate (%)", "Anomaly rate (%)"]
    assert sub[3:7] == ["total", "reproduction failure", "unphysical relaxation", "energy anomaly"]
    assert top[7:] == [
        "MAE_total (eV)",
        "MAE_normal (eV)",
        "MAE_single (eV)",
        "ADwT (%)",
        "AMDwT (%)",
        "Num_total",
        "Time_total (ms)",
        "Time_per_step (ms)",
        "Steps_total",
    ]
    merged = {str(r) for r in ws.merged_cells.ranges}
    assert "D1:G1" in merged and "A1:A2" in merged
    assert [ws.cell(r, 1).value for r in (3, 4)] == ["emt", "emt-b"]
    assert ws.cell(3, 2).value == 100.0 and ws.cell(3, 2).number_format == "0.00"
    assert ws.cell(3, 8).number_format == "0.000" and ws.cell(3, 13).number_format == "#,##0"
    an = wb["anomaly"]
    assert [an.cell(1, c).value for c in (4, 8, 11)] == [
        "Anomaly count",
        "Reproduction failure",
        "Unphysical relaxation",
    ]
    assert [an.cell(2, c).value for c in range(8, 15)] == [
        "ads_eng_seed",
        "ads_seed",
        "slab_seed",
        "ads_conv",
        "ads_move",
        "slab_conv",
        "slab_move",
    ]
    per = wb["emt"]
    assert per.cell(1, 1).value == "Adsorbate_name"
    assert [per.cell(r, 1).value for r in (3, 4, 5)] == ["CO", "H", "O"]
    assert per.cell(1, 14).value == "Gas shift correction"  # beside the per-adsorbate rows
    assert [per.cell(2, c).value for c in range(14, 20)] == [
        "Shift (eV)",
        "N_fit",
        "MAE_total_shifted (eV)",
        "MAE_normal_shifted (eV)",
        "Num_normal_shifted",
        "Num_energy_anomaly_shifted",
    ]
    # 3 reactions per adsorbate < gas_shift_min_n (5): no shift, shown as a blank cell
    assert per.cell(3, 14).value is None and per.cell(3, 15).value == 3 and per.cell(3, 18).value == 3
    cov = wb["Coverage"]
    assert [cov.cell(1, c).value for c in range(1, 5)] == ["MLIP_name", "Num_input", "Num_succeeded", "Num_failed"]
    assert [cov.cell(2, c).value for c in range(1, 5)] == ["emt", 9, 9, 0]
    assert cov.cell(5, 1).value.startswith("Num_succeeded counts every computed reaction")


def test_anomaly_detection_file(scored):
    doc = json.loads((scored / "emt_anomaly_detection.json").read_text())
    assert doc["thresholds"]["disp_thrs"] == 0.5 and doc["thresholds"]["energy_thrs"] == 2.0
    assert len(doc["normal"]) == 9 and doc["energy_anomaly"] == [] and doc["calculation_error"] == []


def test_tables_have_catbench_columns(scored):
    import pandas as pd

    t = pd.read_csv(scored / "tables" / "catalysis_demo.csv")
    assert list(t["MLIP_name"]) == ["emt", "emt-b"]
    assert (t["Normal_rate"] == 100).all() and (t["MAE_total"] < 0.02).all()
    assert (t["MAE_single"] < 1e-6).all()  # EMT single points reproduce EMT references
    md = (scored / "tables" / "catalysis_demo.md").read_text()
    assert md.startswith("# CatBench adsorption energies on demo\n\nPer potential, over up to 9 adsorption reactions")
    # CatBench's names stay in the CSV and the workbook; the printed table words them
    assert "| potential | Normal rate (%) |" in md and "Anomaly rate (%): energy anomaly" in md
    assert "MAE, all reactions (eV)" in md and "total steps" in md
    # timings differ between runs: out of the printed tables (byte-identical between runs), kept
    # in the workbook (CatBench's own format, checked above) and the analysis files
    for suffix in ("", "_shifted"):
        for ext in ("csv", "md", "tex"):
            text = (scored / "tables" / f"catalysis_demo{suffix}.{ext}").read_text()
            assert "Time_" not in text and "time per step" not in text and "total time" not in text, (suffix, ext)
    ads = pd.read_csv(scored / "tables" / "catalysis_demo_adsorbates.csv")
    assert len(ads) == 6 and set(ads["Adsorbate_name"]) == {"CO", "H", "O"}
    for suffix in ("_anomaly", "_shifted"):
        # The .tex says first which package it needs (issue 10), then the captioned table float.
        tex_lines = (scored / "tables" / f"catalysis_demo{suffix}.tex").read_text().splitlines()
        assert tex_lines[0] == r"% requires \usepackage{booktabs}" and tex_lines[1] == r"\begin{table}"
        assert tex_lines[3].startswith(r"\begin{tabular}") and tex_lines[-2].startswith(r"\caption{CatBench ")


def test_workbook_bytes_do_not_depend_on_the_clock(scored, tmp_path):
    args = ["catalysis", "tables", "--inputs", str(scored / "emt.json"), "--out-prefix", str(tmp_path / "t")]
    assert main(args + ["--out-xlsx", str(tmp_path / "a.xlsx")]) == 0
    import time

    time.sleep(1.1)
    assert main(args + ["--out-xlsx", str(tmp_path / "b.xlsx")]) == 0
    assert (tmp_path / "a.xlsx").read_bytes() == (tmp_path / "b.xlsx").read_bytes()


def test_figures(scored, tmp_path):
    out = [str(tmp_path / n) for n in ("p.png", "p.pdf", "s.png", "s.pdf", "m1.png", "m2.png", "sh.png")]
    assert (
        main(
            [
                "catalysis",
                "figures",
                "--inputs",
                str(scored / "emt.json"),
                str(scored / "emt-b.json"),
                "--reactions",
                str(scored / "emt.parquet"),
                str(scored / "emt-b.parquet"),
                "--dataset",
                "demo",
                "--out-parity",
                *out[:2],
                "--out-sensitivity",
                *out[2:4],
                "--out-model-parity",
                *out[4:6],
                "--out-parity-shifted",
                out[6],
            ]
        )
        == 0
    )
    for p in out:
        assert (tmp_path / p).stat().st_size > 5000


@pytest.fixture()
def http_root(tmp_path):
    server = StaticFileServer(tmp_path)
    yield tmp_path, server.url
    server.close()


def test_fetch_unpinned_refuses_and_prints_the_pin(http_root, catalysis_demo, tmp_path):
    root, base = http_root
    body = (catalysis_demo / "emt-demo_adsorption.json").read_bytes()
    (root / "X_adsorption.json").write_bytes(body)
    dest = tmp_path / "dl" / "X_adsorption.json"
    with pytest.raises(UnpinnedSourceError) as err:
        fetch_dataset("X", f"{base}/X_adsorption.json", None, dest)
    digest = hashlib.sha256(body).hexdigest()
    assert f"sha256: {digest}" in str(err.value) and "datasets:\n      X:" in str(err.value)
    assert not dest.exists() and list(dest.parent.iterdir()) == []
    with pytest.raises(HashMismatchError):
        fetch_dataset("X", f"{base}/X_adsorption.json", "0" * 64, dest)
    assert not dest.exists()
    fetch_dataset("X", f"{base}/X_adsorption.json", digest, dest)
    assert dest.read_bytes() == body


def test_cli_fetch_error_exit_code(http_root, tmp_path, capsys):
    root, base = http_root
    (root / "Y.json").write_text(json.dumps({}))
    assert (
        main(["catalysis", "fetch", "--dataset", "Y", "--url", f"{base}/Y.json", "--out", str(tmp_path / "y.json")])
        == 2
    )
    assert "Received sha256" in capsys.readouterr().err
