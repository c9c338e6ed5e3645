"""``crucible features ...``: build the Magpie and structure feature files of task tables, print the featurizer version."""

from __future__ import annotations

from crucible.stages.declaration import Stage

HELP = "composition and structure features, one file per task table"  # the group's line in `crucible --help`
STAGES = (
    Stage("build", "Magpie features of every distinct formula of the task tables, once", ".cache:build_cache"),
    Stage("version", "print the Magpie featurizer version (part of the cache file name)", ".magpie:print_version"),
    # Structure features (issue 16): one row per distinct structure, keyed by its canonical hash.
    Stage(
        "build-structures",
        "Sine Coulomb matrix eigenvalues of every distinct structure, once",
        ".structure_cache:build_scm_cache",
    ),
    Stage(
        "build-embeddings",
        "pretrained-potential embedding of every distinct structure, once",
        ".mlip_embed:build_embedding_cache",
    ),
)
