"""``crucible features ...``: build the Magpie and structure feature files of task tables, print the featurizer version."""

from __future__ import annotations

from crucible.stage import In, Opt, Out, Stage

_DATA = In("data", "results/matbench/data/{task}.parquet files (the DAG: one task's)", many=True)

STAGES = (
    Stage(
        "build",
        "Magpie features of every distinct formula of the task tables, once",
        "crucible.features.cache:build_cache",
        (_DATA, Out("out")),
    ),
    Stage(
        "version",
        "print the Magpie featurizer version (part of the cache file name)",
        "crucible.features.magpie:print_version",
        (),
    ),
    # Structure features (issue 16): one row per distinct structure, keyed by its canonical hash.
    Stage(
        "build-structures",
        "Sine Coulomb matrix eigenvalues of every distinct structure, once",
        "crucible.features.structure_cache:build_scm_cache",
        (_DATA, Out("out")),
    ),
    Stage(
        "build-embeddings",
        "pretrained-potential embedding of every distinct structure, once",
        "crucible.features.mlip_embed:build_embedding_cache",
        (
            _DATA,
            Opt("model", default="chgnet-0.3.0"),
            Opt("device", default=None),
            Opt("threads", type=int, default=0),
            Out("out"),
        ),
    ),
)
