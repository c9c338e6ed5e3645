"""The per-potential and summary commands of the κ task: ``crucible discovery kappa-score``,
``kappa-table`` and ``kappa-figures``."""

from __future__ import annotations

import gzip
import json
import logging
import math
from pathlib import Path
from typing import Any

from crucible.core.io import InFile, read_json, write_bytes, write_json

log = logging.getLogger(__name__)
SCORES = "results/discovery/phonons/{potential}.scores.json"


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def score(potential: str, inputs: list[InFile], reference: InFile, out_predictions: str, out_scores: str) -> None:
    """``crucible discovery kappa-score``: one potential's prediction file in the leaderboard's
    format, and its SRD, SRE, SRME per material with their means and rates.

    Args:
        potential: the potential the result files are of
        inputs: the per-material result files results/discovery/phonons/{potential}/{material}/kappa.json
        reference: the PBE conductivities (pinned: discovery/phonons/pbe-reference)
        out_predictions: results/discovery/phonons/{potential}.json.gz
        out_scores: results/discovery/phonons/{potential}.scores.json
    """
    from crucible.discovery.phonons.metrics import means
    from crucible.discovery.phonons.metrics import score as score_one
    from crucible.discovery.phonons.report import prediction_row, read_reference

    ref = read_reference(reference)
    results = [read_json(p) for p in inputs]
    rows, scored = [], []
    for res in results:
        rows.append(prediction_row(res))
        s = score_one(res, ref[res["mp_id"]])
        cpu = (res.get("cpu_s") or {}).get("total")
        scored.append({"mp_id": res["mp_id"], "desc": res["desc"], "failure": res.get("failure"), "cpu_s": cpu, **s})
    write_bytes(gzip.compress(json.dumps(_json_safe(rows)).encode(), mtime=0), out_predictions)
    summary = means(scored)
    cpus = [r["cpu_s"] for r in scored if r["cpu_s"] is not None]
    summary["cpu_s_per_material"] = sum(cpus) / len(cpus) if cpus else math.nan
    write_json(_json_safe({"potential": potential, "means": summary, "materials": scored}), out_scores)
    log.info(
        "%s: %d materials, SRME %.4f, failure rate %.3f",
        potential,
        len(scored),
        summary["SRME"],
        summary["failure_rate"],
    )


def _scores(inputs: list[InFile]) -> dict[str, dict]:
    out = {}
    for p in inputs:
        doc = read_json(p)
        for r in doc["materials"]:
            for k in ("kappa_TOT_ave", "SRME", "SRE", "SRD", "DFT_kappa_TOT_ave", "cpu_s"):
                r[k] = math.nan if r.get(k) is None else r[k]
        out[doc["potential"]] = doc
    return out


def table(
    inputs: list[InFile],
    cards: list[InFile],
    published_run: InFile,
    out_csv: str,
    out_md: str,
    out_tex: str,
    out_materials_csv: str,
    out_materials_md: str,
) -> None:
    """``crucible discovery kappa-table``: our κ_SRME rows beside the published ``kappa_103`` rows
    of the model cards, and our per-material numbers beside the authors' CHGNet run.

    Args:
        inputs: the scores files results/discovery/phonons/{potential}.scores.json
        cards: the leaderboard's model cards (pinned: discovery/cards/<model>)
        published_run: the authors' CHGNet metrics.txt (pinned: discovery/phonons/chgnet-published)
        out_csv: the table as CSV
        out_md: the table as Markdown
        out_tex: the table as LaTeX
        out_materials_csv: the per-material table as CSV
        out_materials_md: the per-material table as Markdown
    """
    import pandas as pd

    from crucible.discovery.phonons.report import HEADERS, TITLE, material_table, published_rows, read_published_run
    from crucible.report.tables import write_table

    scores = _scores(inputs)
    ours = [{"model": pot, "source": "crucible", **doc["means"]} for pot, doc in sorted(scores.items())]
    df = pd.DataFrame(ours + published_rows(cards), columns=list(HEADERS))
    n = ", ".join(f"{r['model']} {r['materials']}" for r in ours)
    write_table(
        df,
        out_csv,
        out_md,
        out_tex,
        title=TITLE,
        headers=HEADERS,
        caption=f"Means over the materials run (ours: {n}; published: all 103), lower is better; failures score SRME 2.",
        notes="A slice's means are not comparable with the published rows over 103 materials.",
    )
    published = read_published_run(published_run)
    rows = []
    for pot, doc in sorted(scores.items()):
        rows += [{"potential": pot, **r} for r in material_table(doc, published if pot.startswith("chgnet") else {})]
    headers = {
        "potential": "potential",
        "mp_id": "mp id",
        "material": "material",
        "kappa": "κ ours (W/m/K)",
        "kappa_published": "κ published",
        "kappa_diff_pct": "κ difference (%)",
        "kappa_DFT": "κ PBE",
        "SRME": "SRME ours",
        "SRME_published": "SRME published",
        "SRME_diff": "SRME difference",
        "failure": "failure ours",
        "failed_published": "failed published",
        "cpu_s": "CPU-s ours",
    }
    mdf = pd.DataFrame(rows, columns=list(headers))
    write_table(
        mdf,
        out_materials_csv,
        out_materials_md,
        None,
        title="κ per material: ours beside the authors' CHGNet 0.3.0 run",
        caption="κ_TOT average (W/m/K) and SRME at 300 K; published: k_SRME's models/CHGNet/metrics.txt; NaN κ: a failure.",
        headers=headers,
    )
    log.info(
        "kappa table: %d of ours beside %d published rows; %d material rows", len(ours), len(df) - len(ours), len(mdf)
    )


def figures(inputs: list[InFile], out_kappa_png: str, out_srme_png: str) -> None:
    """``crucible discovery kappa-figures``: κ ours against PBE (log–log) and SRME per material.

    Args:
        inputs: the scores files results/discovery/phonons/{potential}.scores.json
        out_kappa_png: the κ parity figure
        out_srme_png: the SRME-per-material figure
    """
    import matplotlib.pyplot as plt

    from crucible.core.io import atomic_path
    from crucible.discovery.phonons.report import kappa_figure, srme_figure

    scores = _scores(inputs)
    for make, out in ((kappa_figure, out_kappa_png), (srme_figure, out_srme_png)):
        fig = make(scores)
        with atomic_path(out, suffix=Path(out).suffix) as tmp:
            fig.savefig(tmp, dpi=150)
        plt.close(fig)
