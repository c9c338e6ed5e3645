"""``crucible mlip ...``: EOS benchmark and s2ef scoring for interatomic potentials.

crucible mlip models
crucible mlip eos --model chgnet-0.3.0 --elements all --points 7 --volume-range 0.94 1.06 --out results/mlip/eos/chgnet-0.3.0.parquet
crucible mlip eos-table --inputs results/mlip/eos/*.parquet --out-csv t.csv --out-md t.md --out-tex t.tex
crucible mlip eos-figures --inputs results/mlip/eos/*.parquet --out-png d.png --out-pdf d.pdf --out-parity-png p.png --out-parity-pdf p.pdf
crucible mlip s2ef-predict --dataset ase-vasp-testdata --model emt --out results/mlip/s2ef/ase-vasp-testdata/emt.parquet
crucible mlip s2ef-table --inputs results/mlip/s2ef/*/*.parquet --out-csv t.csv --out-md t.md --out-tex t.tex
"""

from __future__ import annotations

from crucible.stage import In, Opt, Out, Stage, json_value

_POTENTIAL = (
    Opt("model", "registered potential (emt, chgnet-0.3.0, sevennet-0, ...) or a custom one"),
    Opt("device", "cpu or cuda (default: cuda when available)", default=None),
    Opt("threads", "torch CPU threads", type=int, default=None),
    Opt(
        "custom_potentials",
        "JSON of config's mlip.custom_potentials (a user's potential named by --model)",
        type=json_value,
        default=None,
    ),
)
_TABLE = (
    In(
        "inputs",
        "per-model files: results/mlip/eos/{model}.parquet or results/mlip/s2ef/{dataset}/{model}.parquet",
        many=True,
    ),
    Out("out_csv", "the table, CSV", default=None),
    Out("out_md", "the table, Markdown", default=None),
    Out("out_tex", "the table, LaTeX", default=None),
)

STAGES = (
    Stage(
        "models",
        "list registered potentials and whether their weights are here",
        "crucible.mlip.run:list_potentials",
        (),
    ),
    Stage(
        "eos",
        "EOS of the Delta-set elements with one potential",
        "crucible.mlip.run:write_eos",
        (
            *_POTENTIAL,
            Opt("elements", default="all"),
            Opt("points", type=int, default=7),
            Opt("volume_range", type=float, many=2, default=[0.94, 1.06], metavar=("LOW", "HIGH")),
            Out("out"),
        ),
    ),
    Stage("eos-table", "per-model EOS summary table", "crucible.mlip.report:write_eos_table_files", _TABLE),
    Stage(
        "eos-figures",
        "Δ periodic table and B0 parity figures",
        "crucible.mlip.report:write_eos_figures",
        (
            In("inputs", many=True),
            Out("out_png", default=None),
            Out("out_pdf", default=None),
            Out("out_parity_png", default=None),
            Out("out_parity_pdf", default=None),
        ),
    ),
    Stage(
        "s2ef-predict",
        "a potential's energies and forces on a dataset's frames",
        "crucible.mlip.run:write_s2ef_predictions",
        (*_POTENTIAL, Opt("dataset"), Out("out")),
    ),
    Stage(
        "s2ef-table",
        "s2ef metric table from prediction files .../{dataset}/{model}.parquet",
        "crucible.mlip.report:write_s2ef_table",
        _TABLE,
    ),
)
