"""``crucible discovery ...``: Matbench Discovery's diatomics task (curves, table, figures)."""

from crucible.stages.declaration import Stage

HELP = "Matbench Discovery diatomics: dimer curves, metrics, table"  # the group's line in `crucible --help`
STAGES = (
    Stage("curves", "a potential's homonuclear dimer curves H…U, leaderboard format", ".run:write_curves"),
    Stage("table", "the diatomics table beside the published rows", ".run:write_table"),
    Stage("curves-figure", "one potential's dimer curves against PBE", ".run:write_curve_figure"),
    Stage("metrics-figure", "the diatomics metrics of ours beside the published ones", ".run:write_metrics_figure"),
)
