"""``crucible discovery ...``: Matbench Discovery's diatomics task and its discovery scorer."""

from crucible.stages.declaration import Stage

HELP = "Matbench Discovery: diatomics curves and table, the discovery scorer, κ_SRME"  # the group's line in `crucible --help`
STAGES = (
    Stage("curves", "a potential's homonuclear dimer curves H…U, leaderboard format", ".diatomics_jobs:write_curves"),
    Stage("table", "the diatomics table beside the published rows", ".diatomics_jobs:write_table"),
    Stage("curves-figure", "one potential's dimer curves against PBE", ".diatomics_jobs:write_curve_figure"),
    Stage(
        "metrics-figure",
        "the diatomics metrics of ours beside the published ones",
        ".diatomics_jobs:write_metrics_figure",
    ),
    Stage(
        "stability", "a model's WBM stability metrics from its published predictions", ".stability_jobs:score_stability"
    ),
    Stage("stability-table", "the stability table beside the published rows", ".stability_jobs:write_stability_table"),
    # the phonons task kappa_103 (κ_SRME): one job per step of one material, then per potential
    Stage("kappa-relax", "κ: a material's two-stage symmetric relaxation", ".phonons.jobs:relax"),
    Stage("kappa-fc2", "κ: second-order forces and the imaginary-mode test", ".phonons.jobs:fc2"),
    Stage("kappa-fc3", "κ: one chunk of the third-order displacement forces", ".phonons.jobs:fc3"),
    Stage(
        "kappa-conductivity",
        "κ: force constants and the Wigner conductivity",
        ".phonons.jobs:conductivity",
        omp_threads=True,
    ),
    Stage("kappa-score", "κ: a potential's prediction file and SRD/SRE/SRME", ".phonons.scoring:score"),
    Stage("kappa-table", "κ: our rows beside the published ones, and per material", ".phonons.scoring:table"),
    Stage("kappa-figures", "κ: ours against PBE, and SRME per material", ".phonons.scoring:figures"),
)
