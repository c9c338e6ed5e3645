"""``crucible discovery ...``: Matbench Discovery's diatomics task and its discovery scorer."""

from crucible.stages.declaration import Stage

HELP = "Matbench Discovery: diatomics curves and table, the discovery scorer"  # the group's line in `crucible --help`
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
)
