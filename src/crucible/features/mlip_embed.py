"""Per-structure embeddings from a pretrained interatomic potential (no fine-tuning).

``chgnet-0.3.0``: CHGNet 0.3.0's crystal feature vector (64 floats: the pooled atom features
after the last interaction block, the input of its energy head), from
``CHGNet.predict_structure(..., return_crystal_feas=True)`` with the weights shipped inside the
chgnet wheel: the network of ``crucible mlip``'s ``chgnet-0.3.0`` potential, loaded the same way
(:func:`crucible.potentials.registry.load_potential`: torch configured, device resolved).

CHGNet batches graphs, and float32 sums change in the last bit with the batch composition, so
structures are always embedded in hash order with a fixed batch size: a rebuild gives the same
numbers on the same device. The version (file name and metadata of the cache) covers the
chgnet and torch versions, the batch size and our code.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import logging
import os
from typing import Sequence

import numpy as np
import pyarrow as pa

from crucible.core.io import InFile

log = logging.getLogger(__name__)

EMBED_MODELS = ("chgnet-0.3.0",)
EMBED_COLUMN = "embedding"
BATCH_SIZE = 16
# Bump when our code changes in a way that can change output.
_REVISION = "1"


def _installed_version(package: str) -> str:
    # The workflow names the cache file while it plans the DAG, also where chgnet/torch are absent
    # (e.g. the Python 3.12 leg); such a file name is never built there, the embedding job would fail.
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "not-installed"


def embed_version(model: str = "chgnet-0.3.0") -> str:
    _check_model(model)
    key = (
        f"{_REVISION}|{model}|chgnet {_installed_version('chgnet')}|"
        f"torch {_installed_version('torch')}|batch {BATCH_SIZE}"
    )
    return f"{model}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def embed_cache_prefix() -> str:
    return "mlip-embed"


def embed_cache_filename(model: str = "chgnet-0.3.0") -> str:
    return f"{embed_cache_dirname(model)}.parquet"


def embed_cache_dirname(model: str = "chgnet-0.3.0") -> str:
    """The directory of the per-task files: ``mlip-embed-<model>-<version>``."""
    return f"{embed_cache_prefix()}-{embed_version(model)}"


def _check_model(model: str) -> None:
    from crucible.core.errors import ConfigError

    if model not in EMBED_MODELS:
        raise ConfigError(f"no embedding for potential {model!r}; known: {', '.join(EMBED_MODELS)}")


def chgnet_embeddings(
    structure_jsons: Sequence[str], device: str | None = None, batch_size: int = BATCH_SIZE
) -> np.ndarray:
    """(n, 64) float64 crystal feature vectors of CHGNet 0.3.0, one row per structure."""
    import torch
    from pymatgen.core import Structure
    from tqdm import tqdm

    from crucible.features.structure_cache import _RowError
    from crucible.potentials.registry import load_potential

    potential = load_potential("chgnet-0.3.0", device)
    device = potential.device
    model = potential.calculator.model
    # The ASE calculator only warns on a structure with an isolated atom; an embedding of such a
    # graph is not one (CHGNet.load's own setting refuses it, and the row error names it).
    model.graph_converter.set_isolated_atom_response("error")
    model.eval()
    out = []
    for start in tqdm(
        range(0, len(structure_jsons), batch_size), desc="chgnet embeddings", mininterval=5, disable=None
    ):
        chunk = structure_jsons[start : start + batch_size]
        structures = []
        for i, text in enumerate(chunk):
            try:
                structures.append(Structure.from_str(text, fmt="json"))
            except Exception as exc:  # pymatgen raises many types on bad input
                raise _RowError(start + i, f"not a readable structure: {exc}") from None
        try:
            preds = model.predict_structure(structures, task="e", return_crystal_feas=True, batch_size=batch_size)
        except Exception as exc:  # CHGNet's graph builder refuses e.g. isolated atoms
            raise _RowError(start, f"CHGNet failed on the batch starting here: {exc}") from None
        if isinstance(preds, dict):
            preds = [preds]
        out.extend(np.asarray(p["crystal_fea"], dtype=np.float64) for p in preds)
        del preds
        if device.startswith("cuda"):
            torch.cuda.empty_cache()
    return np.stack(out) if out else np.zeros((0, 64))


def build_embedding_cache(
    data: Sequence[InFile],
    out: str | os.PathLike,
    model: str = "chgnet-0.3.0",
    device: str | None = None,
    threads: int = 0,
) -> None:
    """The embedding of every distinct structure of the tables ``data``, written to ``out``;
    torch is set up first (``threads``: its CPU threads, 0 its default).

    Args:
        out: results/features/mlip-embed-<version>/{task}.parquet
        model: the potential (chgnet-0.3.0)
        device: cuda or cpu (default: cuda when torch sees a GPU)
        threads: torch CPU threads (0: torch's default)
        data: as in :func:`crucible.features.cache.build_cache`
    """
    from crucible.core.torch_setup import configure_torch
    from crucible.features.structure_cache import build_feature_cache

    configure_torch(threads)
    _check_model(model)

    def featurize(structure_jsons: list[str]) -> dict[str, pa.Array]:
        values = chgnet_embeddings(structure_jsons, device)
        width = values.shape[1]
        return {EMBED_COLUMN: pa.array([row.tolist() for row in values], pa.list_(pa.float64(), width))}

    build_feature_cache(data, out, embed_cache_prefix(), embed_version(model), featurize)


def load_embeddings(path: str | os.PathLike, hashes: Sequence[str], model: str = "chgnet-0.3.0") -> np.ndarray:
    from pathlib import Path

    from crucible.features.structure_cache import load_structure_cache

    # The DAG names the cache after the version of the environment that built it; the job that
    # reads it (a gradient-boosting head) may run where chgnet and torch are not installed, so
    # the version expected is the one in the file name, checked against the file's own metadata.
    prefix = f"{embed_cache_prefix()}-{model}-"
    named = [n.removesuffix(".parquet") for n in (Path(path).name, Path(path).parent.name) if n.startswith(prefix)]
    expected = named[0][len(embed_cache_prefix()) + 1 :] if named else embed_version(model)
    rows = load_structure_cache(path, hashes, EMBED_COLUMN, expected)
    return np.asarray(rows, dtype=np.float64).reshape(len(hashes), -1)
