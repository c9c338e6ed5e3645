"""crucible.mlip.report: the EOS and s2ef tables and figures: readable headers and axes,
per-model frames keyed by their model, and byte-identical files run to run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from crucible.core.errors import DataValidationError
from crucible.mlip.eos import run_eos
from crucible.potentials.registry import load_potential
from crucible.report.tables import to_markdown

VENV_BIN = Path(sys.executable).parent


@pytest.fixture(scope="module")
def emt():
    return load_potential("emt")


def _eos_frame(model, rows):
    return pd.DataFrame(
        [
            {"model": model, "element": el, "status": st, "delta_mev": d, "b0": 100.0, "wien2k_b0": 110.0}
            for el, st, d in rows
        ]
    )


def test_periodic_table_keeps_failed_symbols_readable_and_the_colour_bar_plain(monkeypatch):
    from crucible.mlip import report

    captured = {}
    monkeypatch.setattr(report, "_figure_save", lambda fig, png, pdf: captured.setdefault("fig", fig))
    frames = {
        "emt": _eos_frame("emt", [("Cu", "ok", 22.0), ("Al", "ok", 61.0), ("Na", "failed", np.nan), ("Ni", "ok", 35.0)])
    }
    report.delta_periodic_table(frames)
    fig = captured["fig"]
    fig.canvas.draw()
    ax = fig.axes[0]
    symbols = [t for t in ax.texts if t.get_text() in ("Cu", "Al", "Na", "Ni")]
    for patch in ax.patches:
        if patch.get_hatch():
            for text in symbols:
                x, y = text.get_position()
                assert not patch.contains_point(ax.transData.transform((x, y))), f"hatch over {text.get_text()}"
    colorbar = fig.axes[1]
    labels = [t.get_text() for t in colorbar.get_yticklabels() + colorbar.get_yticklabels(minor=True) if t.get_text()]
    assert labels, "the colour bar has tick labels"
    assert not any("times" in s or "^" in s or "$" in s for s in labels), labels


def test_b0_parity_log_axes_have_plain_labels(monkeypatch):
    from crucible.mlip import report

    captured = {}
    monkeypatch.setattr(report, "_figure_save", lambda fig, png, pdf: captured.setdefault("fig", fig))
    report.b0_parity(
        {
            "emt": _eos_frame("emt", [("Cu", "ok", 22.0), ("Al", "ok", 61.0)]).assign(
                b0=[140.0, 40.0], wien2k_b0=[141.0, 78.0]
            )
        }
    )
    fig = captured["fig"]
    fig.canvas.draw()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels() + ax.get_xticklabels(minor=True) if t.get_text()]
    assert labels and not any("times" in s or "$" in s for s in labels), labels


def test_b0_parity_labels_only_outliers_on_axes_shared_by_all_panels(monkeypatch, emt):
    """Real EMT fits on the whole Delta set (8 fitted) beside a copy whose Cu B0 is planted 3x
    off: each panel labels only its largest relative errors (the planted Cu among them), no two
    labels overlap, and every panel has the same axis limits (the narrow EMT panel used to get
    its own)."""
    from crucible.mlip import report

    captured = {}
    monkeypatch.setattr(report, "_figure_save", lambda fig, png, pdf: captured.setdefault("fig", fig))
    real = run_eos(emt, "all", progress=False)
    planted = real.assign(model="planted")
    planted.loc[planted["element"] == "Cu", "b0"] *= 3.0
    planted = planted[planted["element"].isin(["Cu", "Ag", "Au", "Pt", "Pd", "Ni", "Al", "H", "C"])]
    report.b0_parity({"emt": real, "planted": planted})
    fig = captured["fig"]
    fig.canvas.draw()
    axes = fig.axes[:2]
    assert axes[0].get_xlim() == axes[1].get_xlim() and axes[0].get_ylim() == axes[1].get_ylim()
    ok = real[real["status"] == "ok"]
    for ax, frame in zip(axes, (ok, planted[planted["status"] == "ok"])):
        labels = [t for t in ax.texts]
        expected = report.b0_outliers(frame)
        assert sorted(t.get_text() for t in labels) == sorted(expected) and len(labels) == 5 < len(frame)
        boxes = [t.get_window_extent() for t in labels]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1 :]:
                assert not a.overlaps(b), "two element labels overlap"
    assert report.b0_outliers(planted[planted["status"] == "ok"])[0] == "Cu"  # 3x off is the worst
    assert "not modelled" in axes[0].get_title() and "3 failed" in axes[0].get_title()


def test_s2ef_table_headers_carry_units():
    from crucible.mlip.report import S2EF_TABLE_HEADERS

    table = pd.DataFrame(
        {
            "dataset": ["vasp"],
            "model": ["emt"],
            "energy_mae": [55.4],
            "forces_mae": [0.35],
            "forces_cosine_similarity": [0.78],
            "n_frames": [3],
            "n_failed": [1],
        }
    )
    md = to_markdown(table, headers=S2EF_TABLE_HEADERS)
    assert "energy MAE (eV)" in md and "force MAE (eV/Å)" in md


def _cli(*args, cwd):
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([str(VENV_BIN / "crucible"), "mlip", *args], cwd=cwd, env=env, capture_output=True, text=True)


def test_tables_and_figures_are_deterministic(tmp_path, emt):
    from crucible.core.io import write_parquet
    from crucible.mlip.eos import EOS_FORMAT, EOS_FORMAT_KEY, EOS_SCHEMA

    df = run_eos(emt, "Al,Si,Cu,Au", progress=False)
    write_parquet(df, tmp_path / "emt.parquet", schema=EOS_SCHEMA, metadata={EOS_FORMAT_KEY: EOS_FORMAT})
    outs = []
    for run in ("a", "b"):
        res = _cli(
            "eos-table",
            "--inputs",
            "emt.parquet",
            "--out-csv",
            f"{run}/t.csv",
            "--out-md",
            f"{run}/t.md",
            "--out-tex",
            f"{run}/t.tex",
            cwd=tmp_path,
        )
        assert res.returncode == 0, res.stderr
        res = _cli(
            "eos-figures",
            "--inputs",
            "emt.parquet",
            "--out-png",
            f"{run}/d.png",
            "--out-pdf",
            f"{run}/d.pdf",
            "--out-parity-png",
            f"{run}/p.png",
            cwd=tmp_path,
        )
        assert res.returncode == 0, res.stderr
        outs.append({p.name: p.read_bytes() for p in sorted((tmp_path / run).iterdir())})
    assert outs[0] == outs[1] and set(outs[0]) == {"t.csv", "t.md", "t.tex", "d.png", "d.pdf", "p.png"}
    assert b"emt,4,1,Si," in outs[0]["t.csv"]


def test_eos_results_of_the_older_format_are_refused_naming_the_file_and_the_rerun(tmp_path, emt):
    """A file from before 'not modelled' was told from 'failed' (no format in its metadata): its
    unmodelled elements would count as failures beside new files' 'not modelled'."""
    from crucible.core.io import write_parquet
    from crucible.mlip.eos import EOS_SCHEMA

    write_parquet(run_eos(emt, "Cu", progress=False), tmp_path / "old.parquet", schema=EOS_SCHEMA)
    for args in (("eos-table", "--out-csv", "t.csv"), ("eos-figures", "--out-png", "d.png", "--out-pdf", "d.pdf")):
        res = _cli(args[0], "--inputs", "old.parquet", *args[1:], cwd=tmp_path)
        assert res.returncode != 0 and "old.parquet: EOS results of format 1" in res.stderr, res.stderr
        assert "snakemake --forcerun run_eos" in res.stderr
    assert not (tmp_path / "t.csv").exists() and not (tmp_path / "d.png").exists()


def test_frames_are_keyed_by_model_and_a_model_given_twice_is_refused(tmp_path):
    from crucible.core.io import write_parquet
    from crucible.mlip.report import load_frames

    write_parquet(_eos_frame("emt", [("Cu", "ok", 1.0)]), tmp_path / "a.parquet")
    write_parquet(_eos_frame("chgnet", [("Cu", "ok", 2.0)]), tmp_path / "b.parquet")
    write_parquet(pd.DataFrame({"x": [1]}), tmp_path / "named.parquet")
    frames = load_frames([tmp_path / "a.parquet", tmp_path / "b.parquet", tmp_path / "named.parquet"])
    assert list(frames) == ["emt", "chgnet", "named"] and frames["chgnet"]["delta_mev"].iloc[0] == 2.0
    with pytest.raises(DataValidationError, match=r"a.parquet: model 'emt' given twice"):
        load_frames([tmp_path / "a.parquet", tmp_path / "a.parquet"])
    write_parquet(
        pd.concat([_eos_frame("emt", [("Cu", "ok", 1.0)]), _eos_frame("x", [("Al", "ok", 1.0)])]),
        tmp_path / "two.parquet",
    )
    with pytest.raises(DataValidationError, match="expected one model per file"):
        load_frames([tmp_path / "two.parquet"])


def test_periodic_positions_of_the_delta_set():
    from ase.collections import dcdft

    from crucible.mlip.report import periodic_position

    assert periodic_position("H") == (1, 1) and periodic_position("He") == (1, 18)
    assert periodic_position("B") == (2, 13) and periodic_position("Cu") == (4, 11)
    assert (
        periodic_position("Lu") == (6, 3) and periodic_position("Hf") == (6, 4) and periodic_position("Rn") == (6, 18)
    )
    cells = [periodic_position(s) for s in dcdft.names]
    assert len(set(cells)) == len(cells)  # no two elements of the Delta set share a cell
    with pytest.raises(ValueError, match="beyond the sixth period"):
        periodic_position("U")


def test_s2ef_caption_gives_the_tables_units():
    """The report caption of the s2ef table names the units of its headers (eV, eV/Å), not others."""
    import re

    from crucible.mlip.report import S2EF_TABLE_HEADERS

    from helpers import REPO

    caption = (REPO / "workflow/report/mlip_s2ef.rst").read_text()
    units = {u for header in S2EF_TABLE_HEADERS.values() for u in re.findall(r"\((e?V[^,)]*)\)", header)}
    assert units == {"eV", "eV/Å"}
    assert all(unit in caption for unit in units) and "meV" not in caption


def test_mlip_md_tables_open_with_a_title_and_a_caption(tmp_path, emt):
    """A reader of mlip_eos.md / mlip_s2ef_<dataset>.md sees what the table is, over how many items,
    before its header row; the LaTeX table carries the same caption."""
    from crucible.mlip.eos import eos_summary_table
    from crucible.mlip.report import EOS_TITLE, s2ef_caption, s2ef_title, write_eos_table

    frames = {
        "emt": run_eos(emt, "Al,Si,Cu,Au,C", progress=False),
        "emt-cu": run_eos(emt, "Cu,Si", model="emt-cu", progress=False),
    }
    write_eos_table(eos_summary_table(frames), csv=tmp_path / "e.csv", md=tmp_path / "e.md", tex=tmp_path / "e.tex")
    md = (tmp_path / "e.md").read_text().splitlines()
    assert md[0] == f"# {EOS_TITLE}" and md[2].startswith("Per potential, 5 elemental crystals")
    assert "over the 1 elements every potential in the table fitted" in md[2] and md[4].startswith("| model |")
    heads = [h.strip() for h in md[4].strip("|").split("|")]
    assert heads[:7] == [
        "model",
        "elements",
        "not modelled",
        "failed",
        "failed elements",
        "fitted",
        "mean Δ, fitted (meV/atom)",
    ]
    assert "mean Δ, fitted by all (meV/atom)" in heads and "elements not modelled" not in heads
    cells = dict(zip(heads, (c.strip() for c in md[6].strip("|").split("|"))))  # the emt row
    assert (cells["not modelled"], cells["failed"], cells["failed elements"], cells["fitted"]) == ("1", "1", "C", "3")
    csv = pd.read_csv(tmp_path / "e.csv").set_index("model")
    assert csv.loc["emt", "unsupported_elements"] == "Si"  # the list the printed table leaves out
    assert f"\\caption{{{EOS_TITLE}. Per potential, 5 elemental crystals" in (tmp_path / "e.tex").read_text()
    s2ef = pd.DataFrame({"dataset": ["vasp", "vasp"], "model": ["emt", "chgnet-0.3.0"], "n_frames": [3, 3]})
    assert s2ef_title(s2ef) == "Structure to energy and forces on vasp"
    assert "of 3 frames" in s2ef_caption(s2ef) and "(eV)" in s2ef_caption(s2ef)
