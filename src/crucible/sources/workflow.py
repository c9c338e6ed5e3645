"""What ``workflow/rules/fetch.smk`` builds, as pure functions of ``config/sources.yaml``: one
fetch rule for every artifact and one extract rule for every member, their wildcard
constraints and arguments. Nothing here names an artifact; the sources file is the one list.
"""

from __future__ import annotations

from typing import Any

from crucible.core.errors import ConfigError
from crucible.dag.rules import alternation
from crucible.sources.pins import config_value


def _artifacts(sources: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return sources["artifacts"]


def download_file(sources: dict[str, Any], artifact: str) -> str:
    """Where the fetch rule saves ``artifact``."""
    return f"resources/downloads/{_artifacts(sources)[artifact]['filename']}"


def artifact_saved_as(sources: dict[str, Any], filename: str) -> str:
    """The artifact the fetch rule saves as ``resources/downloads/<filename>``."""
    for name, spec in _artifacts(sources).items():
        if spec["filename"] == filename:
            return name
    raise ConfigError(f"no artifact in config/sources.yaml is saved as {filename}")


DOWNLOAD_FIELDS = ("kind", "url", "requirement", "pip_args", "sha256", "git_blob", "md5", "size")


def download_pin(sources: dict[str, Any], artifact: str) -> str:
    """What the fetch rule's download of ``artifact`` is (a param of the rule): where it comes
    from and its pins, so that a version bump (a new ``url``/``requirement`` and ``sha256``/
    ``git_blob``/``md5`` in the sources file) fetches it again, while an edit elsewhere refetches nothing."""
    import json

    spec = _artifacts(sources)[artifact]
    return json.dumps({k: spec[k] for k in DOWNLOAD_FIELDS if spec.get(k)}, sort_keys=True)


def filename_pattern(sources: dict[str, Any]) -> str:
    """The fetch rule's ``filename`` constraint: exactly the pinned downloads' names."""
    return alternation(spec["filename"] for spec in _artifacts(sources).values())


def archive_pattern(sources: dict[str, Any]) -> str:
    """The extract rule's ``artifact`` constraint: the artifacts that have members."""
    return alternation(name for name, spec in _artifacts(sources).items() if spec.get("members"))


def member_pattern(sources: dict[str, Any]) -> str:
    """The extract rule's ``member`` constraint: every pinned member's file name."""
    return alternation({m for spec in _artifacts(sources).values() for m in spec.get("members") or {}})


def mirror_url_prefix(config: dict[str, Any], sources: dict[str, Any], artifact: str) -> str:
    """The mirror (``--url-prefix``) when the config key the artifact's ``mirror_config`` names is set, else ""."""
    value = config_value(config, _artifacts(sources)[artifact].get("mirror_config"))
    return str(value) if value else ""


def fetch_upstream(config: dict[str, Any], sources: dict[str, Any], artifact: str) -> bool:
    """Whether a shipped artifact is downloaded (``--upstream``): the config key its
    ``upstream_config`` names is true. Always False for an artifact that does not ship."""
    spec = _artifacts(sources)[artifact]
    return bool(spec.get("shipped") and config_value(config, spec.get("upstream_config")) is True)


def origin_keys(sources: dict[str, Any], artifact: str) -> list[str]:
    """The config keys that say where ``artifact``'s bytes come from (its mirror and its
    shipped/upstream switch): what a failed fetch's message tells the user to set."""
    spec = _artifacts(sources)[artifact]
    return [spec[k] for k in ("upstream_config", "mirror_config") if spec.get(k)]


def download_families(sources: dict[str, Any], filename: str, family_names: list[str]) -> list[str]:
    """The families whose files the download ``resources/downloads/<filename>`` holds: the first
    part of its roles (``discovery/cards/...``) or of its members' roles, where that is a family."""
    spec = next((s for s in _artifacts(sources).values() if s["filename"] == filename), None)
    if spec is None:
        return []
    roles = [spec.get("role"), *((m or {}).get("role") for m in (spec.get("members") or {}).values())]
    found = {str(r).split("/", 1)[0] for r in roles if r}
    return [f for f in family_names if f in found]
