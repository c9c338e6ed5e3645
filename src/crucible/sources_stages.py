"""``crucible sources ...``: fetch and extract the artifacts pinned in config/sources.yaml.

A download's pinned SHA-256 is its identity: these jobs carry none (``identified=False``).
"""

from __future__ import annotations

from crucible.stage import In, Opt, Out, Stage

_SOURCES = Opt("sources", "the pinned sources file (default: config/sources.yaml)", default="config/sources.yaml")

STAGES = (
    Stage(
        "fetch",
        "download one artifact and check its SHA-256",
        "crucible.artifacts:fetch_artifact",
        (
            Opt("artifact", default=None),
            Opt("matminer_task", default=None),
            _SOURCES,
            Opt("url_prefix", default=None),
            Opt("sha256", default=None),
            Opt("lock", default=None),
            Out("out"),
        ),
        one_of=(("artifact", "matminer_task"),),
        identified=False,
    ),
    Stage(
        "extract",
        "take hash-checked members out of a downloaded archive",
        "crucible.artifacts:extract_members",
        (Opt("artifact"), _SOURCES, In("archive"), Opt("out_dir"), Opt("members", many=True, default=None)),
        identified=False,
    ),
    Stage(
        "provide",
        "fetch and extract the file of a role unless it is there with its pin; print its path",
        "crucible.artifacts:provide_role",
        (
            Opt("role"),
            Opt("sources", default=None),
            Opt("resources", default="resources"),
            Opt("url_prefix", default=None),
        ),
        identified=False,
    ),
)
