"""Catalysis benchmark for interatomic potentials with CatBench's semantics.

Modules: ``data`` (read CatBench JSON, Catalysis-Hub raw reactions and VASP trees; clean into
``reactions.parquet`` + an ASE database), ``fetch`` (download with pin / no-pin behaviour),
``calculation`` (K-seed relaxations, resumable per reaction), ``analysis`` (anomaly classes,
rates, MAEs, ADwT/AMDwT, gas shift), ``relative`` (surface and bulk-formation energies),
``report`` (tables, Excel workbook, figures), ``demo`` (small EMT-labelled datasets in every
format), ``workflow`` (pure functions the Snakemake rules call).
"""
