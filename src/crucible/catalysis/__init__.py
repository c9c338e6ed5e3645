"""Catalysis benchmark for interatomic potentials with CatBench's semantics.

Modules: ``adsorption`` (the reaction records every reader gives and the rules they share),
``catbench_files`` (CatBench's dataset file read and written, its result file written),
``cathub`` (Catalysis-Hub raw reactions, filtered as CatBench filters them), ``vasp_tree`` (a
user's VASP folders), ``clean`` (any format → ``reactions.parquet`` + an ASE database + card,
the dataset's pin checked through ``crucible.sources.pinned_files``), ``fetch`` (download with pin / no-pin
behaviour), ``calculation`` (K-seed relaxations of one reaction), ``chunks`` (a chunk of them,
resumable per reaction), ``analysis`` (anomaly classes, rates, MAEs, ADwT/AMDwT, gas shift),
``relative`` (surface and bulk-formation energies), ``report`` (tables, Excel workbook),
``figures`` (parity and sensitivity plots), ``demo`` (small EMT-labelled datasets in every
format), ``workflow`` (pure functions the Snakemake rules call), ``stages`` (the ``crucible catalysis``
commands, declared).

The words every command and reader shares are defined here, where the command declarations can
read them without importing a reader.
"""

FORMATS = ("catbench-json", "cathub-raw", "vasp-tree")
FILTERINGS = ("catbench", "strict")
RELATIVE_TASKS = ("surface", "bulk_formation")
DEFAULT_ENERGY_SOURCE = "DFT, as given by the source"
