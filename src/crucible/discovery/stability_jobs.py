"""The discovery scorer's jobs: one model's stability metrics from the leaderboard's own files,
and the table of ours beside the published rows of the model cards."""

from __future__ import annotations

import logging
import math
from pathlib import Path
from typing import Any

from crucible.core.io import InFile

log = logging.getLogger(__name__)

SCORES_FORMAT = 1  # the meaning of a scores file: a change reruns the scoring jobs


def score_stability(
    model: str, wbm_summary: InFile, predictions: InFile, card: InFile, out: str, column: str | None = None
) -> None:
    """``crucible discovery stability``: one model's stability metrics on the WBM test set
    (full_test_set, unique_prototypes, most_stable_10k), from its predictions file as the
    leaderboard publishes it.

    Args:
        model: a leaderboard model with a pinned predictions file (discovery/predictions/<model>)
        wbm_summary: the WBM summary (pinned: discovery/wbm-summary)
        predictions: the model's *-discovery.csv.gz (pinned: discovery/predictions/<model>)
        card: the model's card (pinned: discovery/cards/<model>), which must name the same file
        out: the scores file to write: results/discovery/stability/{model}.json
        column: the formation-energy column (default: the file's one e_form_per_atom* column)
    """
    from crucible.core.hashes import file_sha256
    from crucible.core.io import write_json
    from crucible.discovery.data import CARD_ROLE_PREFIX
    from crucible.discovery.stability import discovery_metrics
    from crucible.discovery.wbm import check_card_names_pin, predictions_role, read_predictions, read_wbm_summary
    from crucible.sources.pinned_files import pinned

    check_card_names_pin(pinned(CARD_ROLE_PREFIX + model, card), model)
    wbm = read_wbm_summary(wbm_summary)
    preds = read_predictions(model, predictions, column)
    scores = discovery_metrics(wbm, preds, where=str(predictions))
    scores["model"] = model
    scores["files"] = {
        "wbm_summary": {"role": "discovery/wbm-summary", "sha256": file_sha256(wbm_summary)},
        "predictions": {"role": predictions_role(model), "sha256": file_sha256(predictions)},
    }
    write_json(scores, out)
    full = scores["full_test_set"]
    log.info(
        "%s: F1 %.3f, DAF %.3f, MAE %.3f on the full test set; %d of %d materials without a prediction, "
        "%d unrealistic (counted unstable) -> %s",
        model,
        full["F1"],
        full["DAF"],
        full["MAE"],
        scores["absent"],
        scores["n_materials"],
        scores["unrealistic"],
        out,
    )


def _ours(inputs: list[InFile]) -> list[dict[str, Any]]:
    from crucible.core import strict_json
    from crucible.discovery.stability import SUBSETS

    rows = []
    for path in inputs:
        doc = strict_json.read_json(path)
        for subset in SUBSETS:
            rows.append({"model": doc["model"], "subset": subset, "date": "", **doc[subset]})
    return rows


def write_stability_table(inputs: list[InFile], cards: list[InFile], out_csv: str, out_md: str, out_tex: str) -> None:
    """``crucible discovery stability-table``: the discovery table, a row per model and subset of
    ours beside the published rows of the model cards.

    Args:
        inputs: scores files results/discovery/stability/{model}.json
        cards: the leaderboard's model cards (pinned: discovery/cards/<model>), in any order
        out_csv: the table as CSV
        out_md: the table as Markdown
        out_tex: the table as LaTeX
    """
    from crucible.discovery.data import CARD_ROLE_PREFIX
    from crucible.discovery.report import STABILITY_HEADERS, STABILITY_TITLE, stability_caption, stability_table
    from crucible.discovery.wbm import published_rows
    from crucible.report.tables import write_table as write
    from crucible.sources.pinned_files import pinned, roles

    by_file = {Path(pin.location).name: role for role, pin in roles(prefix=CARD_ROLE_PREFIX).items()}
    published = []
    for card in cards:
        role = by_file.get(Path(card).name)
        published += published_rows(pinned(role, card) if role else card)
    df = stability_table(_ours(inputs), published)
    write(
        df,
        csv=out_csv,
        md=out_md,
        tex=out_tex,
        title=STABILITY_TITLE,
        caption=stability_caption(df),
        headers=STABILITY_HEADERS,
        digits=3,
    )
    for row in df[df["source"] != "published"].itertuples():
        if math.isnan(row.F1):
            log.warning("%s %s: F1 undefined (no stable material predicted or present)", row.model, row.subset)
