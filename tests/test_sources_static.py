"""Static checks that keep config/sources.yaml the one place that knows where pinned files are:
no library module outside crucible.sources builds a path under resources/extracted/ (the only
way to read one is crucible.sources.pinned_files.pinned, which checks its hash), and no artifact name, version,
download or member file name, archive path or pin of the sources file is written anywhere else in
the code, the rules, the tests or the benchmark scripts (a version bump is an edit of one file)."""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import yaml

from helpers import REPO, SOURCES_FILE

SOURCES_MODULES = {"downloads.py", "pinned_files.py", "pins.py", "workflow.py"}
TEXT_SUFFIXES = {".py", ".smk", ".yaml", ".yml", ".rst", ".md", ".txt", ".cfg", ".toml", ".json", ".jsonl"}
# a string literal that is, or holds, a path component "extracted" (prose such as "after it was
# extracted" is no path)
EXTRACTED_PATH = re.compile(r"(^|[/\\])extracted([/\\]|$)")


def _string_literals(path: Path) -> list[tuple[int, str]]:
    out = []
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline):
        if tok.type == tokenize.STRING or tok.type == getattr(tokenize, "FSTRING_MIDDLE", -1):
            out.append((tok.start[0], tok.string.strip("\"'rbfuRBFU")))
    return out


def test_no_library_module_but_crucible_sources_builds_a_path_under_resources_extracted():
    offenders = []
    for path in sorted((REPO / "src" / "crucible").rglob("*.py")):
        if path.name in SOURCES_MODULES and path.parent.name == "sources":
            continue
        for line, text in _string_literals(path):
            if EXTRACTED_PATH.search(text) or "resources/extracted" in text:
                offenders.append(f"{path.relative_to(REPO)}:{line}: {text!r}")
    assert not offenders, "read pinned files through crucible.sources.pinned_files.pinned:\n" + "\n".join(offenders)


def test_the_check_sees_the_ways_a_path_is_built(tmp_path):
    """The scan above is not vacuous: each spelling of such a path is caught."""
    sample = tmp_path / "m.py"
    sample.write_text(
        'A = "resources/extracted/x-1.0/t.csv"\n'
        'B = Path("resources") / "extracted" / name\n'
        'C = f"{root}/extracted/{artifact}/{member}"\n'
        'D = "a file edited after it was extracted"\n'
    )
    hits = [t for _, t in _string_literals(sample) if EXTRACTED_PATH.search(t) or "resources/extracted" in t]
    assert len(hits) == 3 and not any("edited" in h for h in hits)


def _dependency_pins() -> str:
    """What the project installs (pyproject, Makefile): a data carrier of the same package and
    version is then also a dependency, and code may cite that version for the installed package."""
    return (REPO / "pyproject.toml").read_text() + (REPO / "Makefile").read_text()


def _needles() -> dict[str, str]:
    """Every string of config/sources.yaml that names one artifact's version or files."""
    doc = yaml.safe_load(SOURCES_FILE.read_text())
    installed = _dependency_pins()
    out: dict[str, str] = {}
    for name, spec in doc["artifacts"].items():
        out[name] = f"artifact {name}"
        out[spec["filename"]] = f"download of {name}"
        for key in ("url", "git_blob", "sha256"):  # not mirror_path: the layout a mirror keeps
            if spec.get(key):
                out[spec[key]] = f"{key} of {name}"
        if spec.get("requirement"):
            pkg, version = spec["requirement"].split("==")
            if spec["requirement"] not in installed:  # a carrier only: no reason to name its version
                for sep in (" ", "-", "_", "=="):
                    out[f"{pkg}{sep}{version}"] = f"version of {name}"
        for member, mspec in (spec.get("members") or {}).items():
            out[member] = f"member {member} of {name}"
            out[mspec["path"]] = f"archive path of {name}:{member}"
            out[mspec["sha256"]] = f"pin of {name}:{member}"
    return out


def _files():
    for root in ("src", "workflow", "tests", "benchmarks"):
        for path in sorted((REPO / root).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and "egg-info" not in str(path):
                yield path
    yield REPO / "Snakefile"


def test_no_version_or_file_name_of_the_sources_file_is_written_elsewhere():
    needles = _needles()
    assert len(needles) > 40  # the real file, not an empty read
    offenders = []
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for needle, what in needles.items():
            if needle in text:
                line = text[: text.index(needle)].count("\n") + 1
                offenders.append(f"{path.relative_to(REPO)}:{line}: {needle!r} ({what})")
    assert not offenders, "ask crucible.sources.pinned_files for it by role instead:\n" + "\n".join(offenders)
