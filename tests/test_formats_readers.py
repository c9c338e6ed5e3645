"""Every read of a file in the library goes through crucible.core.reading (bytes, text, CSV) and
crucible.core.strict_json, except the reads listed here with what they read: a new reader of a
user's file must declare its format in crucible.core.formats (and get a case in
test_formats_fuzz.py) instead of calling json/pandas/gzip/tarfile itself."""

from __future__ import annotations

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "crucible"
RAW_READ = re.compile(r"json\.loads?\(|pd\.read_(?:csv|json)\(|gzip\.open\(|tarfile\.open\(|\.read_text\(")

# module -> what its own reads parse (none of them a file a user hands in as it is)
NOT_USER_FILES = {
    "core/reading.py": "the one bounded reader of bytes, text and CSV",
    "core/strict_json.py": "the one JSON parser",
    "core/yaml_files.py": "the one YAML reader (its text through reading.read_text)",
    "core/io.py": "crucible's own stage files (written with NaN allowed) and parquet metadata",
    "dag/config.py": "the packaged schemas; a config section as JSON text",
    "sources/downloads.py": "the lock",
    "sources/pinned_files.py": "the pinned matminer catalogue",
    "core/archives.py": "pinned archives (SHA-256 checked before reading)",
    "catalysis/clean.py": "its own clean table's JSON columns",
    "catalysis/calculation.py": "a copy of a resumed record, through its own JSON text",
    "catalysis/chunks.py": "its own part files",
    "crystal/data.py": "the pinned AFLOW prototypes",
    "crystal/samples.py": "tar archives, opened here and read member by member through formats",
    "features/structures.py": "pymatgen JSON of its own tables",
    "llm/cache.py": "its own cache entries",
    "llm/openai_backend.py": "a server's HTTP response body",
    "matbench/clean.py": "the pinned composition mirror",
    "matbench/resultsfile.py": "the text it just wrote (a results file is read with strict_json.read_json)",
    "models/comp_transformer/estimator.py": "its own saved model",
    "reactions/report.py": "its own tables and question files",
    "reactions/scoring.py": "only to tell JSON from JSON lines; then formats parses",
    "report/run_facts.py": "Snakemake's benchmark files",
    "run_summary.py": "Snakemake's logs",
    "crystal/workflow.py": "the generator params JSON it wrote itself",
    "core/hashes.py": "its own digest cache",
    "llm/schema_check.py": "a model's reply text, checked against its prompt's schema",
    "identity/records.py": "its own identity records, CRUCIBLE_JOB",
    "identity/name_book.py": "its own record of names",
    "identity/code_closure.py": "crucible's own source files and a user's modules, parsed, never imported",
    "identity/job_code.py": "its own code digest cache",
    "identity/installed_code.py": "its own caches of installed files' stats and of site folders' distributions",
    "stages/declaration.py": "JSON params the rule passes",
    "discovery/phonons/report.py": "the pinned metrics.txt of the authors' CHGNet run (its pin checked by pinned())",
    "discovery/phonons/workflow.py": "the displacement counts that ship in the package",
    "stages/groups.py": "the groups' own stages modules, parsed for their HELP, never imported",
}


def test_every_raw_read_is_of_a_file_no_user_hands_in():
    found = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if RAW_READ.search(p.read_text(encoding="utf-8")))
    unlisted = [m for m in found if m not in NOT_USER_FILES]
    assert not unlisted, f"read a file through crucible.core.reading / strict_json (or say here why not): {unlisted}"
    stale = sorted(set(NOT_USER_FILES) - set(found))
    assert not stale, f"no raw read left in {stale}: drop them from the list"


RAW_YAML = re.compile(
    r"yaml\.(?:safe_load|load|full_load|unsafe_load|load_all|safe_load_all)\(|yaml\.(?:C?SafeLoader|FullLoader)\b"
)


def test_every_yaml_read_goes_through_the_strict_loader():
    # PyYAML's own loaders keep the last of a repeated key and expand alias bombs
    found = sorted(str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if RAW_YAML.search(p.read_text(encoding="utf-8")))
    assert found == ["core/yaml_files.py"], f"read YAML with crucible.core.yaml_files.load_yaml: {found}"
    snakefiles = [SRC.parents[1] / "Snakefile", *sorted((SRC.parents[1] / "workflow" / "rules").glob("*.smk"))]
    assert not [f.name for f in snakefiles if RAW_YAML.search(f.read_text(encoding="utf-8"))]
