"""Two cold runs of the tiny every-family config (tests/report_pages.py, plus the catalysis demo)
give byte-identical files under results/tables/ and results/figures/ (issue 29, item 5), and
every file a job opens for reading is accounted for (item 3): under results/, a pinned role, a
config file, or installed code, with each exception listed and justified below.

Every Python process of the runs carries an audit hook (tests/audit/sitecustomize.py, put on
PYTHONPATH), which records each file opened for reading."""

from __future__ import annotations

import filecmp
import os
import shutil
import sys
import sysconfig
from pathlib import Path

import pytest
import yaml

from crucible.sources import pinned_files

from helpers import REPO, provide_downloads, run_snakemake
from report_pages import TINY_RUN_CONFIG, TINY_RUN_ROLES

pytestmark = pytest.mark.slow  # two runs of the whole tiny DAG

CONFIG = {
    **TINY_RUN_CONFIG,
    "catalysis": {
        "models": ["emt"],
        "seeds": 1,
        "chunks": 1,
        "datasets": {
            "demo": {
                "format": "catbench-json",
                "path": "demo/emt-demo_adsorption.json",
                "energy_source": "EMT (ASE), not DFT: crucible demo fixture",
            }
        },
    },
}
# CatBench's own workbook carries its timing columns (and openpyxl's timestamps), as CatBench
# writes it: the one file allowed to differ (README, "Tables come three ways").
DIFFERS_BY_DESIGN = (".xlsx",)


def _run(workdir: Path, demo: Path, audit: Path, env: dict[str, str]):
    workdir.mkdir(parents=True)
    shutil.copytree(REPO / "config", workdir / "config")  # the default config the tiny one overrides
    provide_downloads(workdir, *TINY_RUN_ROLES)
    shutil.copytree(demo, workdir / "demo")
    audit.mkdir(parents=True)
    env = {
        **env,
        "PYTHONPATH": f"{REPO / 'tests' / 'audit'}:{REPO / 'src'}",
        "CRUCIBLE_AUDIT_DIR": str(audit),
    }
    return run_snakemake(workdir, CONFIG, env=env, timeout=2400)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory, catalysis_demo, venv_env):
    """Both runs in the same folder (a path may be printed), the first moved aside before the
    second starts from nothing: no resources, no .snakemake, no results."""
    base = tmp_path_factory.mktemp("determinism")
    work = base / "work"
    proc = _run(work, catalysis_demo, base / "audit-1", venv_env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    work.rename(base / "run-1")
    proc = _run(work, catalysis_demo, base / "audit-2", venv_env)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-6000:]
    return base / "run-1", work, base / "audit-1"


def _files(root: Path) -> dict[str, Path]:
    return {
        p.relative_to(root).as_posix(): p
        for d in ("results/tables", "results/figures")
        for p in (root / d).rglob("*")
        # identity records hash their jobs' inputs, and sidecars among those carry timings
        if p.is_file() and ".identity" not in p.parts
    }


def test_two_cold_runs_give_byte_identical_tables_and_figures(two_runs):
    first, second, _ = two_runs
    a, b = _files(first), _files(second)
    assert sorted(a) == sorted(b)
    families = {name.split("/")[-1].split("_")[0] for name in a}
    assert {"matbench", "mlip", "crystal", "reactions", "catalysis"} <= families, families
    compared = [name for name in sorted(a) if not name.endswith(DIFFERS_BY_DESIGN)]
    assert any(n.endswith(".pdf") for n in compared) and any(n.endswith(".png") for n in compared)
    assert any(n.endswith(".tex") for n in compared) and any(n.endswith(".md") for n in compared)
    differ = [name for name in compared if not filecmp.cmp(a[name], b[name], shallow=False)]
    assert differ == [], differ
    assert len(compared) >= 20, len(compared)


# --- the audit hook's record -----------------------------------------------------------------

# Files read that are none of results/, a pinned role, a config file or installed code, by why
# they may be read. Each is a fixed part of the run, not an input that could move a number:
HOME = str(Path.home())
EXCEPTIONS = {
    "/dev/": "device files (e.g. /dev/null, /dev/urandom for hash seeds): no data",
    "/proc/": "the kernel's process information (CPU count, memory) that the libraries query",
    "/sys/": "the kernel's device information (CPU topology) that BLAS and torch query",
    "/etc/": "the system's configuration (mime types, locale) read by the standard library",
    "/usr/share/zoneinfo/": "the time zone database (log time stamps)",
    f"{HOME}/.cache/snakemake/": "Snakemake's cached copies of the workflow's own files (Snakefile, rules, envs)",
    f"{HOME}/.cache/matplotlib/": "matplotlib's font list cache: which font file draws the text, not what is drawn",
    f"{HOME}/.config/ase/config.ini": "ase's user configuration, read at import: it names external codes' "
    "commands, which EMT and ase's file readers do not use",
}
# Temporary files of the engine and of libraries, written and read back within one call
TEMPORARY = {
    "-pulp.sol": "Snakemake's scheduler: the solution file of its job-selection ILP (PuLP/CBC)",
    "-pulp.mps": "Snakemake's scheduler: the problem file of its job-selection ILP (PuLP/CBC)",
    "/snakemake": "Snakemake's own temporary files (job scripts)",
    "/openpyxl.": "openpyxl's temporary copy while it writes CatBench's workbook",
}


def _code_roots() -> list[Path]:
    paths = sysconfig.get_paths()
    roots = {Path(paths[k]).resolve() for k in ("stdlib", "platstdlib", "purelib", "platlib")}
    roots |= {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), (REPO / "src").resolve()}
    roots.add((REPO / "tests" / "audit").resolve())
    return sorted(roots)


# What an installed package carries that is code or the interpreter's: modules, compiled
# extensions, metadata, and files that only shape the output's form (fonts, style sheets).
CODE_SUFFIXES = (".py", ".pyc", ".so", ".pth", ".pyi", ".typed", ".json.schema")


def classify(path: str, workdir: Path, pinned_files: set[Path]) -> str:
    """Why ``path`` may be read: results, pinned, config, code, an exception's key, or
    "UNEXPLAINED"; "none" for a folder (listed, not read) or a path that does not exist outside
    the run's folder (an import's or a lookup's failed try: nothing was read)."""
    real = Path(path).resolve()
    if real in pinned_files:
        return "pinned"
    if real.is_dir():
        return "none"
    hash_cache = os.environ.get("CRUCIBLE_HASH_CACHE")
    if hash_cache and real.is_relative_to(Path(hash_cache).resolve()):
        return "digest cache"  # crucible.core.fingerprint's cache of file digests, keyed by stat
    try:
        rel = real.relative_to(workdir.resolve()).as_posix()
    except ValueError:
        rel = None
    if rel is not None:
        if rel.startswith(("results/", "logs/", ".snakemake/", "benchmarks/")):
            return "results"  # what the run itself wrote (and Snakemake's own records)
        if rel == "config.yaml" or rel.startswith(("config/", "demo/")):
            return "config"  # the run's config and the dataset it names (pinned by the config's own check)
        if rel.startswith("resources/extracted/") and real.name.startswith(".") and real.name.endswith(".tmp"):
            return "pinned"  # extraction's staged copy, hash-checked before it is renamed into place
        if rel.startswith("resources/downloads/.fetch-"):
            return "pinned"  # a fetch's staged copy, checked against its pins before it is renamed into place
        return "UNEXPLAINED"
    if not real.exists():
        return "none"
    if real.is_relative_to(REPO.resolve()):
        rel = real.relative_to(REPO.resolve()).as_posix()
        if rel.startswith(("config/", "workflow/", "profiles/", "envs/")) or rel in ("Snakefile", "pyproject.toml"):
            return "config"
        if rel.startswith("src/crucible/") and real.name == "config.schema.yaml":
            return "config"  # each family's config schema
    text = real.as_posix()
    if text.startswith("/usr/share/fonts/") and real.suffix in (".ttf", ".otf"):
        # a font the system has and matplotlib's font cache lists (Debian's fonts-dejavu, pulled in
        # by a browser or ImageMagick): a figure's glyphs, never a number of a table
        return "font"
    if text.startswith("/tmp/") and any(marker in text for marker in TEMPORARY):
        return "temporary"
    if real.parent == Path(sys.executable).parent or ".egg-info/" in text or ".dist-info/" in text:
        return "code"  # the entry-point scripts beside the interpreter; distributions' metadata
    if _code_root(real) is not None:
        return "code" if real.name.endswith(CODE_SUFFIXES) else "package-data"
    for prefix in EXCEPTIONS:
        if text.startswith(prefix):
            return prefix
    return "UNEXPLAINED"


def _code_root(real: Path) -> Path | None:
    """The longest code root holding ``real`` (site-packages before the prefix above it)."""
    holding = [root for root in _code_roots() if real.is_relative_to(root)]
    return max(holding, key=lambda root: len(root.parts)) if holding else None


def read_audit(audit: Path) -> dict[str, set[str]]:
    """Each process's command line -> the files it opened for reading."""
    out: dict[str, set[str]] = {}
    for log in sorted(audit.glob("*.txt")):
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
        argv = lines[0].removeprefix("#argv ") if lines and lines[0].startswith("#argv") else log.stem
        out.setdefault(argv, set()).update(line for line in lines[1:] if line)
    return out


def _pinned_files(workdir: Path) -> set[Path]:
    out = set()
    for role, pin in pinned_files.roles().items():
        path = pinned_files.resource_path(role) if pin.package else workdir / "resources" / pin.location
        out.add(Path(path).resolve())
        if pin.member is None and not pin.package:
            out.add((workdir / "resources" / pin.location).resolve())
    doc = pinned_files.load_sources()
    for spec in doc["artifacts"].values():  # the archives themselves, read to extract members
        out.add((workdir / "resources" / "downloads" / spec["filename"]).resolve())
        if spec.get("shipped"):  # a file that ships in the repository, copied by its fetch
            out.add((REPO / spec["shipped"]).resolve())
    return out


# Package data read by the jobs that feeds no number, by package folder (site-packages/<name>/):
PACKAGE_DATA = {
    "crucible": "crucible's own package data (report stylesheet and metadata, schemas), read to hash it into "
    "each command's code digest (crucible.identity.records)",
    "matplotlib": "fonts, style sheets and matplotlibrc: the figures' looks, not their data",
    "snakemake": "Snakemake's own templates and schemas (the workflow engine)",
    "jsonschema_specifications": "JSON-schema meta-schemas that check the config (validation only)",
    "certifi": "CA certificates (no downloads happen; requests loads them)",
    "sklearn": "style sheets of estimators' HTML representation (no numbers)",
    "README.rst": "a distribution's stray README at the top of site-packages, opened by Snakemake's process",
    # The one gap left: pymatgen reads its element and bond tables itself, at import, so they
    # cannot be read through crucible.sources.pinned_files.pinned. They are identified by the pymatgen
    # version requirements.lock installs, not by a SHA-256.
    "pymatgen": "pymatgen's own element and bond tables (core/periodic_table.json.gz, bond_lengths.json, "
    "func_groups.json), read by pymatgen at import",
    # The same gap: the random-symmetric crystal generator's space-group tables (Wyckoff positions,
    # Hermann-Mauguin symbols), read by pyxtal itself; identified by pyxtal's locked version.
    "pyxtal": "pyxtal's own symmetry tables (database/wyckoff_*.csv, HM_Full.csv, symbols.json, ...), read by pyxtal",
}


def test_every_file_read_is_results_pinned_config_or_code(two_runs):
    first, _, audit = two_runs
    # the run's folder was renamed after it finished: paths recorded under work/ are in run-1/
    work = first.parent / "work"
    pinned_files = _pinned_files(work) | _pinned_files(first)
    unexplained: dict[str, set[str]] = {}
    package_data: dict[str, set[str]] = {}
    processes = read_audit(audit)
    assert any("crucible" in argv for argv in processes), sorted(processes)[:5]
    for argv, paths in processes.items():
        for path in paths:
            why = classify(path, work, pinned_files)
            if why == "package-data":
                real = Path(path).resolve()
                top = real.relative_to(_code_root(real)).parts[0]
                if top not in PACKAGE_DATA:
                    package_data.setdefault(str(top), set()).add(path)
            elif why == "UNEXPLAINED":
                unexplained.setdefault(path, set()).add(argv[:160])
    report = {
        "unexplained": {p: sorted(a)[:3] for p, a in sorted(unexplained.items())},
        "package_data": {k: sorted(v)[:10] for k, v in sorted(package_data.items())},
    }
    (first.parent / "audit-report.yaml").write_text(yaml.safe_dump(report, sort_keys=True))
    assert not unexplained and not package_data, yaml.safe_dump(report)[:8000]
