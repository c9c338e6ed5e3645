"""``crucible sources ...``: fetch and extract the artifacts pinned in config/sources.yaml.

A download's pinned SHA-256 is its identity: these jobs carry none (``identified=False``).
"""

from __future__ import annotations

from crucible.stages.declaration import Opt, Stage

HELP = "fetch raw artifacts and verify their SHA-256"  # the group's line in `crucible --help`
STAGES = (
    Stage(
        "fetch",
        "download one artifact and check its SHA-256",
        ".artifacts:fetch_artifact",
        one_of=(("artifact", "matminer_task"),),
        identified=False,
    ),
    Stage(
        "extract",
        "take hash-checked members out of a downloaded archive",
        ".artifacts:extract_members",
        Opt("out_dir"),
        identified=False,
    ),
    Stage(
        "provide",
        "fetch and extract the file of a role unless it is there with its pin; print its path",
        ".artifacts:provide_role",
        identified=False,
    ),
)
