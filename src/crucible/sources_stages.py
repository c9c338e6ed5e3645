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
            Opt("artifact", "artifact name in the sources file", default=None),
            Opt("matminer_task", "upstream matminer dataset of this Matbench task", default=None),
            _SOURCES,
            Opt("url_prefix", "mirror replacing the upstream URL's folder", default=None),
            Opt("sha256", "pinned hash of a mirror's own copy", default=None),
            Opt("lock", "lock file recording the SHA-256 of artifacts pinned by git blob id", default=None),
            Out("out", "destination file"),
        ),
        one_of=(("artifact", "matminer_task"),),
        identified=False,
    ),
    Stage(
        "extract",
        "take hash-checked members out of a downloaded archive",
        "crucible.artifacts:extract_members",
        (
            Opt("artifact", "artifact name in the sources file"),
            _SOURCES,
            In("archive", "the downloaded archive (its SHA-256 is checked first)"),
            Opt("out_dir", "folder the members are written into"),
            Opt("members", "default: every pinned member", many=True, default=None),
        ),
        identified=False,
    ),
    Stage(
        "provide",
        "fetch and extract the file of a role unless it is there with its pin; print its path",
        "crucible.artifacts:provide_role",
        (
            Opt("role", "e.g. reactions/cernak (see config/sources.yaml)"),
            Opt("sources", "the pinned sources file (default: config/sources.yaml)", default=None),
            Opt("resources", "the folder the workflow fills", default="resources"),
            Opt("url_prefix", "mirror replacing the upstream URL's folder (http artifacts)", default=None),
        ),
        identified=False,
    ),
)
