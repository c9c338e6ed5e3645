"""Download a CatBench dataset from a URL template, with crucible's hash-checked fetch.

Pins for the public copies (Zenodo record behind DOI 10.5281/zenodo.17157085, the leaderboard's
gzip copies) are not known on this machine, so an unpinned dataset is refused *after* the
download: the error prints the SHA-256 received and the config line that pins it, and nothing is
kept. With a pin, :func:`crucible.sources.downloads.fetch` checks it and a mismatch stops the rule.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from crucible.core.errors import CrucibleError
from crucible.core.hashes import file_sha256


class UnpinnedSourceError(CrucibleError):
    """A download with no SHA-256 in config: refused, with the line that would pin it."""


def dataset_url(template: str, name: str) -> str:
    try:
        return template.format(name=name)
    except (KeyError, IndexError) as exc:
        raise CrucibleError(f"url template {template!r}: only {{name}} may be used ({exc})") from None


def fetch_dataset(dataset: str, url: str, sha256: str | None, out: str | os.PathLike) -> Path:
    """Download ``url`` to ``out`` when its SHA-256 is ``sha256``; without a pin download it,
    name its SHA-256 and write nothing.

    Args:
        dataset: the dataset's name in the config (catalysis.datasets), e.g. MamunHighT2019
        url: where to download the file from
        sha256: 64 hex digits the download must match; without it the file is downloaded, its SHA-256 printed
            and nothing written (pin it in the config to use it)
        out: the file to write: resources/catalysis/{dataset}/{filename}
    """
    from crucible.sources import downloads as sources

    dest = Path(out)
    filename = url.rstrip("/").rsplit("/", 1)[-1].split("?")[0] or f"{dataset}.json"
    if sha256:
        return sources.fetch(
            f"catalysis:{dataset}", {"kind": "http", "url": url, "filename": filename, "sha256": sha256}, dest
        )
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".fetch-{dataset}-", dir=dest.parent) as tmp:
        path = sources._http_download({"url": url, "filename": filename}, Path(tmp))
        received = file_sha256(path)
    raise UnpinnedSourceError(
        f"catalysis dataset {dataset!r}: {url} has no pinned SHA-256, so it is not used. "
        f"Received sha256 {received}. If you trust this copy, pin it in your config:\n"
        f"  catalysis:\n    datasets:\n      {dataset}:\n        sha256: {received}"
    )
