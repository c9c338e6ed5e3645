"""The front page of ``snakemake --report``: what this run is, from its config and its DAG.

It names every benchmark family that ran (those of :mod:`crucible.dag.families` with final outputs
for the config) and what each built, the pinned sources the run's jobs read (with the SHA-256 of
``config/sources.yaml``) and the other files they read as they are, the code version, and the
run's wall time from its jobs' benchmark files (gathered by :mod:`crucible.report.run_facts`). ``workflow/report/workflow.rst`` only prints
:meth:`FrontPage.rst`; the Snakefile hands it the config and the DAG (:func:`dag_jobs`), and
everything else here is a pure function of plain data, testable without Snakemake.
"""

from __future__ import annotations

import os
import platform
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from crucible.dag import families as dag_families
from crucible.dag.config import section
from crucible.report.run_facts import (
    Job,
    code_version,
    dag_jobs,
    duration,
    inputs_read_as_they_are,
    name_meanings,
    package_version,
    relative_path,
    sources_read,
    utc_text,
    wall_time,
)

# The config key under which the Snakefile puts the front page for the report template: no
# family's section, and the schema refuses it in a config file, so a user cannot set it.
CONFIG_KEY = "_report_front_page"


# --------------------------------------------------------------------------- families


@dataclass(frozen=True)
class FamilyRun:
    name: str
    built: dict[str, list[str]]  # axis (tasks, datasets, models ...) -> names
    n_outputs: int


def built_by(family: dag_families.Family, config: dict[str, Any]) -> dict[str, list[str]]:
    """What a run of ``config`` builds in ``family``: its :attr:`~crucible.dag.families.Family.built`,
    or the section's lists of names."""
    if family.built is not None:
        return family.built(config)
    if not dag_families.enabled(config, family.name):
        return {}
    lists = {k: v for k, v in section(config, family.name).items() if isinstance(v, list)}
    return {k.replace("_", " "): [str(x) for x in v] for k, v in lists.items() if all(isinstance(x, str) for x in v)}


def families_run(config: Mapping[str, Any]) -> list[FamilyRun]:
    """Every registered family with final outputs for ``config``, in their declared order."""
    out = []
    for family in dag_families.families():
        outputs = family.final_outputs(dict(config))
        if outputs:
            built = {axis: list(names) for axis, names in built_by(family, dict(config)).items() if names}
            out.append(FamilyRun(family.name, built, len(outputs)))
    return out


def families_not_run(config: Mapping[str, Any]) -> list[str]:
    ran = {f.name for f in families_run(config)}
    return [f.name for f in dag_families.families() if f.name not in ran]


# --------------------------------------------------------------------------- the page


def _printable(text: str) -> str:
    # a control character (a newline in a file name) is shown as its escape, never obeyed
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _escape(text: str) -> str:
    """A name as plain text in reStructuredText (``model_`` would otherwise be a link, ``a*b``
    emphasis, ``javascript:...`` a standalone link)."""
    return "".join(f"\\{c}" if c in "\\`*_|[]<>:" else c for c in _printable(text))


def _literal(text: str) -> str:
    """``text`` as an inline literal; one that an inline literal cannot hold (a backquote, white
    space at an end) as escaped plain text, so that no file name can end the literal and start
    markup of its own."""
    text = _printable(text)
    if not text:
        return ""
    if "`" in text or text != text.strip():
        return _escape(text)
    return f"``{text}``"


def _cell(text: str) -> str:
    # a list-table cell is one paragraph; an empty cell must still hold something
    return text.replace("\n", " ") or "–"


def _list_table(header: Sequence[str], rows: Sequence[Sequence[str]], widths: Sequence[int]) -> list[str]:
    lines = [".. list-table::", "   :header-rows: 1", f"   :widths: {' '.join(str(w) for w in widths)}", ""]
    for row in [header, *rows]:
        lines.append(f"   * - {_cell(row[0])}")
        lines += [f"     - {_cell(c)}" for c in row[1:]]
    return lines + [""]


def _entries_by_family(categories: Mapping[str, int], names: Iterable[str]) -> dict[str, str]:
    """The report category of each family (named as the family, case aside: ``MLIP`` for mlip)."""
    by_fold = {c.casefold(): c for c in categories}
    return {n: by_fold[n.casefold()] for n in names if n.casefold() in by_fold}


def render(
    config: Mapping[str, Any],
    jobs: Sequence[Job],
    *,
    sources: Mapping[str, Any],
    configfiles: Sequence[str] = (),
    repo: str | os.PathLike = ".",
    root: str | os.PathLike = ".",
    categories: Mapping[str, int] | None = None,
) -> str:
    """The front page as reStructuredText. ``categories``: the report's categories and how many
    entries each holds (links to them are the report's own ``Name_`` targets)."""
    categories = dict(categories or {})
    ran = families_run(config)
    entries = _entries_by_family(categories, [f.name for f in ran])
    lines = ["crucible: the run's tables and figures", "=" * 38, ""]

    time = wall_time(jobs, root)
    if time.span_seconds is not None:
        took = (
            f"**Wall time: {duration(time.span_seconds)}**, from the first job's start "
            f"({utc_text(time.first_start)}) to the last job's end ({utc_text(time.last_end)}); the {time.n_timed} "
            f"timed jobs' own times sum to {duration(time.job_seconds)} (their files under benchmarks/runs/)."
        )
    else:
        took = "**Wall time: not known**: no job of this run has a benchmark file under benchmarks/runs/."
    if time.untimed:
        took += f" Jobs without a benchmark file: {', '.join(time.untimed)}."
    config_text = ", ".join(_literal(relative_path(c, Path(root))) for c in configfiles) or "the workflow's defaults"
    lines += [
        f"**Code:** {code_version(repo)}; Snakemake {package_version('snakemake')}, Python {platform.python_version()}.",
        "",
        f"**Config:** {config_text}.",
        "",
        took,
        "",
        "Families that ran",
        "-----------------",
        "",
    ]
    rows = []
    for f in ran:
        built = " × ".join(f"{_escape(axis)} ({len(v)}): {', '.join(map(_escape, v))}" for axis, v in f.built.items())
        link = f"`{entries[f.name]}`_ ({categories[entries[f.name]]})" if f.name in entries else "none"
        rows.append([f"**{_escape(f.name)}**", built, f"{f.n_outputs}", link])
    lines += _list_table(["family", "what it built", "outputs", "report entries"], rows, [12, 62, 10, 16])
    idle = families_not_run(config)
    if idle:
        lines += [f"Not in this run (nothing configured): {', '.join(idle)}.", ""]
    lines += [
        "Each family's tables (CSV) and figures (PNG), with their captions, are under its entry in the "
        "menu; the rule graph is under Workflow, each job's time under Statistics.",
        "",
    ]

    meanings = name_meanings(jobs, root)
    if meanings:
        lines += [
            "What the names mean",
            "-------------------",
            "",
            "Every name the run's outputs are made of, as their identity records give it (one meaning "
            "each; `crucible names show` lists them, results/.identity/names.json keeps them):",
            "",
        ]
        rows = [[_literal(key), _literal(value[:12]), _literal(meaning)] for key, value, meaning in meanings]
        lines += _list_table(["name", "digest", "meaning"], rows, [30, 14, 56])

    read = sources_read(jobs, sources, root)
    lines += ["Sources", "-------", ""]
    if read:
        lines += [
            "The raw files the run's jobs read, with the SHA-256 that config/sources.yaml pins (every "
            "read checks the file against it):",
            "",
        ]
        rows = [
            [_literal(s.path), _escape(s.origin), _literal(s.sha256 or "recorded on first fetch"), s.on_disk]
            for s in read
        ]
        lines += _list_table(["file", "from", "SHA-256", "on disk now"], rows, [30, 22, 36, 12])
    else:
        lines += ["The run's jobs read no file under resources/.", ""]
    other = inputs_read_as_they_are(jobs, root)
    if other:
        lines += ["Files the jobs read as they are (no job makes them; no pin), with their SHA-256 now:", ""]
        lines += _list_table(
            ["file", "SHA-256"], [[_literal(p), _literal(h or "a directory")] for p, h in other], [50, 50]
        )
    return "\n".join(lines) + "\n"


class FrontPage:
    """What the report template prints, computed when it renders (after Snakemake has built the
    DAG): ``{{ snakemake.config[CONFIG_KEY].rst(categories) }}``. Holds the config and a function
    returning the DAG; copying it (Snakemake may copy the config) shares them."""

    def __init__(
        self,
        config: Mapping[str, Any],
        dag: Callable[[], Any],
        *,
        sources: Mapping[str, Any],
        configfiles: Callable[[], Sequence[str]],
        repo: str | os.PathLike,
    ):
        self._config, self._dag, self._sources = config, dag, sources
        self._configfiles, self._repo = configfiles, repo

    def __copy__(self) -> FrontPage:
        return self

    def __deepcopy__(self, memo: dict) -> FrontPage:
        return self

    def __repr__(self) -> str:
        return "<crucible report front page>"

    def rst(self, categories: Mapping[Any, Mapping[Any, Sequence[Any]]] | None = None) -> str:
        """The page; ``categories``: the report's results, category -> subcategory -> entries."""
        counts = {
            getattr(cat, "name", cat): sum(len(v) for v in subcats.values())
            for cat, subcats in (categories or {}).items()
            if getattr(cat, "name", cat)
        }
        config = {k: v for k, v in self._config.items() if k != CONFIG_KEY}
        return render(
            config,
            dag_jobs(self._dag()),
            sources=self._sources,
            configfiles=[str(c) for c in self._configfiles()],
            repo=self._repo,
            root=os.getcwd(),
            categories=counts,
        )
