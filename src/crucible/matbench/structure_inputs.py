"""What a model reads from a task (formulas, structures), checked before anything runs.

A task gives structures only when it is a structure task read from the upstream matminer files
(or a user dataset with a structure column); the composition mirror carries formulas only.
Asking a structure model to run where there are no structures stops with a message saying how
to get them, instead of quietly running composition-only.
"""

from __future__ import annotations

import os
from typing import Any

import pandas as pd

from crucible.core.errors import ConfigError, DataValidationError
from crucible.models.registry import ModelSpec

STRUCTURE_KINDS = ("scm-magpie", "mlip-embedding")


def uses_structures(spec: ModelSpec, task_input_type: str) -> bool:
    """Whether ``spec`` reads crystal structures on a task whose input is ``task_input_type``."""
    return "structure" in spec.inputs and task_input_type == "structure"


def check_inputs(spec: ModelSpec, task: str, task_input_type: str, structures_available: bool) -> bool:
    """Raise :class:`ConfigError` if the model cannot run on the task; return ``uses_structures``."""
    if "formula" not in spec.inputs and task_input_type != "structure":
        raise ConfigError(
            f"model {spec.name!r} needs crystal structures, but {task} is a composition task "
            f"(formulas only); remove {task} from matbench.tasks or {spec.name!r} from matbench.models"
        )
    uses = uses_structures(spec, task_input_type)
    if uses and not structures_available:
        raise ConfigError(
            f"model {spec.name!r} uses crystal structures, but {task} was read from the composition "
            f"mirror (formulas only); set `matbench.source: matminer` in config/config.yaml to fetch "
            f"the upstream matminer files, which carry the structures"
        )
    return uses


def check_card(spec: ModelSpec, card: dict[str, Any]) -> bool:
    return check_inputs(
        spec, card["task"], card.get("input_type", "composition"), card.get("inputs_available") == "structure"
    )


def structure_model_inputs(
    spec: ModelSpec,
    rows: pd.DataFrame,
    features_path: str | os.PathLike | None,
    structure_features_path: str | os.PathLike | None,
    uses_structure: bool,
) -> pd.DataFrame:
    """``X`` of a structure model for ``rows`` of a task table (see the registry's input kinds)."""
    from crucible.features.structure_cache import structure_hashes

    if spec.input_kind == "scm-magpie":
        if features_path is None:
            raise DataValidationError(f"model {spec.name!r} needs the Magpie feature cache (--features)")
        from crucible.features.cache import load_features

        X = load_features(features_path, rows["formula"].tolist())
        if uses_structure:
            from crucible.features.structure_cache import load_scm

            if structure_features_path is None:
                raise DataValidationError(f"model {spec.name!r} needs the Sine Coulomb cache (--structure-features)")
            hashes = structure_hashes(rows["structure"].tolist(), "task table")
            X["sine_coulomb_eigenvalues"] = pd.Series(load_scm(structure_features_path, hashes), dtype=object)
        return X
    if spec.input_kind == "mlip-embedding":
        from crucible.features.mlip_embed import load_embeddings

        if structure_features_path is None:
            raise DataValidationError(f"model {spec.name!r} needs the embedding cache (--structure-features)")
        hashes = structure_hashes(rows["structure"].tolist(), "task table")
        values = load_embeddings(structure_features_path, hashes)
        return pd.DataFrame(values, columns=[f"embedding_{i}" for i in range(values.shape[1])])
    raise ConfigError(f"model {spec.name!r}: input kind {spec.input_kind!r} is not a structure input")
