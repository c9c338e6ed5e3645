"""``crucible mlip ...``: EOS benchmark and s2ef scoring for interatomic potentials.

crucible mlip models
crucible mlip eos --model chgnet-0.3.0 --elements all --points 7 --volume-range 0.94 1.06 --out results/mlip/eos/chgnet-0.3.0.parquet
crucible mlip eos-table --inputs results/mlip/eos/*.parquet --out-csv t.csv --out-md t.md --out-tex t.tex
crucible mlip eos-figures --inputs results/mlip/eos/*.parquet --out-png d.png --out-pdf d.pdf --out-parity-png p.png --out-parity-pdf p.pdf
crucible mlip s2ef-predict --dataset ase-vasp-testdata --model emt --out results/mlip/s2ef/ase-vasp-testdata/emt.parquet
crucible mlip s2ef-table --inputs results/mlip/s2ef/*/*.parquet --out-csv t.csv --out-md t.md --out-tex t.tex
"""

from __future__ import annotations

from crucible.stages.declaration import Opt, Stage

HELP = "interatomic potentials: EOS benchmark, s2ef metrics"  # the group's line in `crucible --help`
STAGES = (
    Stage("models", "list registered potentials and whether their weights are here", ".run:list_potentials"),
    Stage(
        "eos",
        "EOS of the Delta-set elements with one potential",
        ".run:write_eos",
        Opt("volume_range", type=float, many=2, default=[0.94, 1.06], metavar=("LOW", "HIGH")),
    ),
    Stage("eos-table", "per-model EOS summary table", ".report:write_eos_table_files"),
    Stage("eos-figures", "Δ periodic table and B0 parity figures", ".report:write_eos_figures"),
    Stage(
        "s2ef-predict",
        "a potential's energies and forces on a dataset's frames",
        "crucible.mlip.run:write_s2ef_predictions",
    ),
    Stage(
        "s2ef-table",
        "s2ef metric table from prediction files .../{dataset}/{model}.parquet",
        "crucible.mlip.report:write_s2ef_table",
    ),
)
