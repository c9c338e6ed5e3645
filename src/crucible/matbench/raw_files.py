"""Where each Matbench task's raw file comes from, and the pins its jobs check: the pinned
composition mirror (``config/sources.yaml``, extracted by ``workflow/rules/fetch.smk``) or
matminer's own download (the ``fetch_matminer_dataset`` rule of ``workflow/rules/matbench.smk``),
plus the official metadata and validation splits. Pure functions of the config (and the sources
file), like :mod:`crucible.matbench.workflow`.
"""

from __future__ import annotations

from typing import Any

from crucible.dag.config import section
from crucible.matbench.tasks import METADATA_ROLE, VALIDATION_ROLE, mirror_role
from crucible.sources import pinned_files


def _section(config: dict[str, Any]) -> dict[str, Any]:
    return section(config, "matbench")


def metadata_file() -> str:
    """The official dataset metadata, as a rule's input (where the fetch stage extracts it)."""
    return str(pinned_files.resource_path(METADATA_ROLE))


def validation_file() -> str:
    """The official validation splits, as a rule's input."""
    return str(pinned_files.resource_path(VALIDATION_ROLE))


def raw_task_file(config: dict[str, Any], task: str) -> str:
    if _section(config)["source"] == "matminer":
        return f"resources/downloads/{task}.json.gz"
    return str(pinned_files.resource_path(mirror_role(task)))


def raw_provenance(config: dict[str, Any], sources: dict[str, Any], task: str) -> str:
    """``filename=sha256`` of the artifact the task's raw file came from, for its task card."""
    mb = _section(config)
    if mb["source"] == "matminer":
        from crucible.sources.pinned_files import matminer_artifact

        mirror = mb["matminer"]
        spec = matminer_artifact(task, mirror.get("url_prefix"), mirror.get("sha256", {}).get(task))
    else:
        spec = sources["artifacts"][pinned_files.find_pin(mirror_role(task), sources).artifact]
    return f"{spec['filename']}={spec['sha256']}"


def raw_pin(config: dict[str, Any], sources: dict[str, Any], task: str) -> str:
    """The pinned SHA-256 of the task's raw file: checked where it is read, and the task card must record it."""
    if _section(config)["source"] == "matminer":
        return raw_provenance(config, sources, task).rsplit("=", 1)[1]
    return pinned_files.find_pin(mirror_role(task), sources).sha256


def matminer_url_prefix(config: dict[str, Any]) -> str:
    """The matminer downloads' mirror (``--url-prefix``), "" for upstream."""
    return _section(config)["matminer"].get("url_prefix") or ""


def matminer_sha256(config: dict[str, Any], task: str) -> str:
    """The pin of a mirror's copy of ``task``'s matminer download (``--sha256``), "" for none."""
    return _section(config)["matminer"].get("sha256", {}).get(task) or ""
