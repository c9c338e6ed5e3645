"""``crucible discovery ...``: Matbench Discovery's diatomics task.

crucible discovery curves --potential chgnet-0.3.0 --out results/discovery/diatomics/chgnet-0.3.0.json.gz
crucible discovery table --inputs results/discovery/diatomics/*.json.gz --reference R --cards C... --out-csv t.csv --out-md t.md --out-tex t.tex
crucible discovery curves-figure --curves results/discovery/diatomics/emt.json.gz --reference R --out-png c.png --out-pdf c.pdf
crucible discovery metrics-figure --table t.csv --out-png m.png --out-pdf m.pdf
"""

from __future__ import annotations

from crucible.stage import Stage

STAGES = (
    Stage("curves", "a potential's homonuclear dimer curves H…U, leaderboard format", ".run:write_curves"),
    Stage("table", "the diatomics table beside the published rows", ".run:write_table"),
    Stage("curves-figure", "one potential's dimer curves against PBE", ".run:write_curve_figure"),
    Stage("metrics-figure", "the diatomics metrics of ours beside the published ones", ".run:write_metrics_figure"),
)
