"""A registered baseline answers question files (``crucible reactions predict``)."""

from __future__ import annotations

import os
from typing import Any

from crucible.core.io import InFile


def write_baseline_predictions(
    model: str,
    data: InFile,
    card: InFile,
    questions: list[InFile],
    out: list[str | os.PathLike],
    params: dict[str, Any] | None = None,
) -> None:
    """Fit baseline ``model`` on the clean table and its card, then write one prediction file per
    question file (same order).

    Args:
        model: registered baseline: random, popularity, nearest-substrate, yield-model, oracle
        params: JSON of model parameters
        data: as in :func:`crucible.reactions.questions.write_question_files`
        card: as in :func:`crucible.reactions.questions.write_question_files`
        questions: question files (RxnOptBench schema)
        out: prediction files to write, one per questions file, same order
    """
    from crucible.core.io import read_json, read_parquet, write_json
    from crucible.reactions import baselines, scoring

    fitted = baselines.make_model(model, params or {})
    fitted.fit(read_parquet(data), read_json(card))
    for questions_path, out_path in zip(questions, out, strict=True):
        predictions = fitted.predict(scoring.load_questions(questions_path))
        write_json(scoring.prediction_record(model, questions_path, predictions), out_path)
