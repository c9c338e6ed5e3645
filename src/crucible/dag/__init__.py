"""The DAG every family is declared against: the family registry (``families``), the config
checked against its sections (``config``) and the meanings of the names in it
(``config_names``), the helpers ``workflow/rules/common.smk`` calls (``workflow``) and the fix
to Snakemake's scheduler (``snakemake_scheduler``).
"""

LAYER = "framework"
