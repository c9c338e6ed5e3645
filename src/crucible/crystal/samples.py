"""Samples files: several structures per item, as crystal-structure-prediction papers score them.

A model answers each test item with k samples; the item counts as matched at k if any of its
first k samples matches (CDVAE/DiffCSP ``compute_metrics.py``). An item's *first* k samples are
those with the k lowest sample numbers, so a file numbered from 1 means the same as one numbered
from 0. Formats (``fmt``, or guessed from the path):

* ``jsonl``: one object per line, ``{"id", "sample", "cif"}`` (a structure) or
  ``{"id", "sample", "response", "error"}`` (an answer text, scored exactly as a single response);
* ``extxyz``: extended XYZ frames, each with ``id`` and ``sample`` in its comment line (periodic
  cells; species from the frame);
* ``cif``: a directory or a ``.tar``/``.tar.gz`` of ``{id}__{sample}.cif`` files (the layout of
  CrystaLLM's generated-CIF archives);
* ``responses``: the LLM stage's response file for the repeated prompt set of
  :func:`repeated_prompts` (ids ``{id}#{sample}``).

Every record is checked as it is read: an id that is not an item, a sample number that is not a
non-negative integer, or an (id, sample) given twice is refused naming the file and line (frame,
member). Nothing is dropped: an item with fewer samples than asked has the missing ones counted
as ``no_response``.
"""

from __future__ import annotations

import os
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator

from crucible.core import formats, reading, strict_json
from crucible.core.errors import DataValidationError
from crucible.core.io import InFile
from crucible.crystal.scoring import CIF, STRUCTURE, TEXT

FORMATS = ("jsonl", "extxyz", "cif", "responses")
DEFAULT_K = 20  # samples per item of crystal structure prediction
SAMPLE_ID_SEPARATOR = "#"


@dataclass(frozen=True)
class Sample:
    """One sample of one item: ``payload`` is answer text, CIF text or a pymatgen Structure dict
    (``kind`` says which); ``None`` with ``error`` when the model produced nothing. ``cut_off``
    says why a language model's reply is unfinished ("cut off at max_tokens=N"), ``off_schema``
    why it does not follow the schema its request asked for ("off-schema: ..."), else None."""

    id: str
    number: int
    kind: str
    payload: Any
    error: str | None = None
    cut_off: str | None = None
    off_schema: str | None = None


def sample_prompt_id(item_id: str, number: int) -> str:
    return f"{item_id}{SAMPLE_ID_SEPARATOR}{number}"


def repeated_prompts(items: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """The prompt set that asks a language model for k answers per item: every item k times, ids
    ``{id}#{j}``, messages unchanged, sample-major (all #0 first), so that the LLM stage's cache
    numbers repeats in the same order as in the plain prompt set and sample 0 is its answer."""
    if k < 1:
        raise DataValidationError(f"k must be at least 1, got {k}")
    out = []
    for j in range(k):
        for it in items:
            meta = {**it.get("meta", {}), "item_id": it["id"], "sample": j}
            prompt = {"id": sample_prompt_id(it["id"], j), "messages": it["messages"], "meta": meta}
            if it.get("response_schema") is not None:  # a structured-output model's k answers keep the item's schema
                prompt["response_schema"] = it["response_schema"]
            out.append(prompt)
    return out


def detect_format(path: str | os.PathLike) -> str:
    p = Path(path)
    name = p.name.lower()
    if p.is_dir() or name.endswith((".tar", ".tar.gz", ".tgz")):
        return "cif"
    if name.endswith((".xyz", ".extxyz")):
        return "extxyz"
    if name.endswith(".jsonl"):
        return "jsonl"
    raise DataValidationError(
        f"{path}: cannot tell the samples format from the name; give one of {', '.join(FORMATS)} "
        "(.jsonl, .xyz/.extxyz, a directory or .tar(.gz) of {id}__{sample}.cif files)"
    )


def _number(value: Any, where: str) -> int:
    if not isinstance(value, bool) and hasattr(value, "__index__"):  # numpy ints from ASE's comment line
        value = int(value)
    formats.check(formats.SAMPLE_NAME, {"id": "-", "sample": value}, where)
    return value


def _jsonl_records(path: Path) -> Iterator[tuple[str, dict]]:
    for lineno, obj in strict_json.iter_json_lines(path):
        yield f"{path}: line {lineno}", obj


def _string_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise DataValidationError(f"{where}: field 'id' must be a non-empty string, got {value!r}")
    return value


def _optional_text(obj: dict, key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise DataValidationError(f"{where}: field {key!r} must be a string or null, got {type(value).__name__}")
    return value


def _from_jsonl(path: Path) -> Iterator[tuple[str, Sample]]:
    for where, obj in _jsonl_records(path):
        formats.check(formats.SAMPLES_JSONL, obj, where)
        ident, number = obj["id"], obj["sample"]
        has_cif, has_text = "cif" in obj, "response" in obj
        if has_cif == has_text:
            raise DataValidationError(f"{where}: give exactly one of 'cif' (a structure) and 'response' (answer text)")
        key, kind = ("cif", CIF) if has_cif else ("response", TEXT)
        payload, error = _optional_text(obj, key, where), _optional_text(obj, "error", where)
        yield where, Sample(ident, number, kind, payload, None if payload is not None else (error or "no sample"))


def _from_responses(path: Path) -> Iterator[tuple[str, Sample]]:
    from crucible.llm.files import cut_off_reason, off_schema_reason

    for where, obj in _jsonl_records(path):
        full = _string_id(obj.get("id"), where)
        ident, sep, tail = full.rpartition(SAMPLE_ID_SEPARATOR)
        number, why = formats.whole_number(tail) if sep and ident else (None, "no '#'")
        if why:
            raise DataValidationError(
                f"{where}: id {full!r} is not of the repeated prompt set (expected '<item id>#<sample number>'): {why}"
            )
        text, error = _optional_text(obj, "response", where), _optional_text(obj, "error", where)
        error = None if text is not None else (error or "no response")
        yield where, Sample(ident, number, TEXT, text, error, cut_off_reason(obj), off_schema_reason(obj))


def _from_extxyz(path: Path) -> Iterator[tuple[str, Sample]]:
    from ase.io import iread
    from pymatgen.io.ase import AseAtomsAdaptor

    reading.check_size(path)
    try:
        frames = list(iread(str(path), index=":", format="extxyz"))
    except Exception as exc:  # noqa: BLE001 - any reader failure names the file
        raise DataValidationError(f"{path}: not readable as extended XYZ ({type(exc).__name__}: {exc})") from None
    for n, atoms in enumerate(frames, 1):
        where = f"{path}: frame {n}"
        for key in ("id", "sample"):
            if key not in atoms.info:
                raise DataValidationError(f"{where}: no '{key}' in the comment line")
        raw = atoms.info["id"]
        ident = raw if isinstance(raw, str) else str(raw)
        if not ident:
            raise DataValidationError(f"{where}: empty id")
        number = _number(atoms.info["sample"], where)
        if not all(atoms.pbc) or atoms.cell.rank < 3:
            raise DataValidationError(f"{where}: a crystal sample needs a full cell (Lattice=...) and pbc T T T")
        structure = AseAtomsAdaptor.get_structure(atoms)
        yield where, Sample(ident, number, STRUCTURE, structure.as_dict())


def _cif_name(name: str, where: str) -> tuple[str, int]:
    base = os.path.basename(name)
    if not base.endswith(".cif"):
        raise DataValidationError(f"{where}: not a .cif file")
    ident, sep, tail = base[: -len(".cif")].rpartition("__")
    number, why = formats.whole_number(tail) if sep and ident else (None, "no '__' before the sample number")
    if why:
        raise DataValidationError(f"{where}: file name must be '<item id>__<sample number>.cif' ({why})")
    return ident, number


def _cif_text(data: bytes, where: str) -> str:
    return reading.decode(data, where)


def _from_cif(path: Path) -> Iterator[tuple[str, Sample]]:
    """A folder or a tar of CIFs, read the same way: regular files only. A link (symbolic in a
    folder; symbolic or hard in a tar) is refused in both forms, naming it, since following it
    in one form and not the other would score the same samples two ways."""
    budget, members = reading.max_bytes(), 0
    if path.is_dir():
        for file in sorted(path.rglob("*")):
            where = f"{path}: {file.relative_to(path)}"
            if file.is_symlink():
                raise DataValidationError(f"{where}: a symbolic link; give the CIF file itself")
            if file.is_dir():
                continue
            if not file.is_file():
                raise DataValidationError(f"{where}: not a regular file")
            members += 1
            if members > reading.max_members():
                raise DataValidationError(
                    f"{path}: more than {reading.max_members()} files ({reading.MAX_MEMBERS_ENV})"
                )
            ident, number = _cif_name(file.name, where)
            with open(file, "rb") as fh:
                data = reading.read_limited(fh, where, budget)
            budget -= len(data)
            yield where, Sample(ident, number, CIF, _cif_text(data, where))
        return
    try:
        tar = tarfile.open(path, "r:*")
        with tar:
            listed = []
            for member in tar:
                listed.append(member)
                if len(listed) > reading.max_members():
                    raise DataValidationError(
                        f"{path}: more than {reading.max_members()} members ({reading.MAX_MEMBERS_ENV})"
                    )
            # tarfile stops quietly where a cut archive ends; the end-of-archive blocks tell a
            # whole archive from one that lost its last members
            tar.fileobj.seek(tar.offset)
            if tar.fileobj.read(2 * tarfile.BLOCKSIZE) != bytes(2 * tarfile.BLOCKSIZE):
                raise DataValidationError(f"{path}: truncated (no end-of-archive marker after its last member)")
            for member in sorted(listed, key=lambda m: m.name):
                where = f"{path}: member {member.name}"
                if member.isdir():
                    continue
                if member.issym() or member.islnk():
                    raise DataValidationError(
                        f"{where}: a {'symbolic' if member.issym() else 'hard'} link; give the CIF file itself"
                    )
                if not member.isfile():
                    raise DataValidationError(f"{where}: not a regular file")
                ident, number = _cif_name(member.name, where)
                if member.size > budget:
                    raise reading.too_big(str(path), reading.max_bytes())
                data = reading.read_limited(tar.extractfile(member), where, budget)
                budget -= len(data)
                yield where, Sample(ident, number, CIF, _cif_text(data, where))
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise DataValidationError(f"{path}: not a readable tar archive ({type(exc).__name__}: {exc})") from None


_READERS = {"jsonl": _from_jsonl, "extxyz": _from_extxyz, "cif": _from_cif, "responses": _from_responses}


def read_samples(
    path: str | os.PathLike, item_ids: Iterable[str], fmt: str = "auto", items_path: str = "the prompt set"
) -> dict[str, list[Sample]]:
    """``{item id: [Sample, ...]}`` sorted by sample number; every item id present (maybe empty)."""
    path = Path(path)
    if not path.exists():
        raise DataValidationError(f"{path}: samples file not found")
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt not in _READERS:
        raise DataValidationError(f"unknown samples format {fmt!r}; known: {', '.join(FORMATS)}")
    known = set(item_ids)
    out: dict[str, list[Sample]] = {i: [] for i in sorted(known)}
    seen: dict[tuple[str, int], str] = {}
    for where, sample in _READERS[fmt](path):
        if sample.id not in known:
            hint = ""
            if fmt == "extxyz" and sample.id.lstrip("-").isdigit():
                hint = " (ASE reads a number in the comment line as a number: leading zeros are lost)"
            raise DataValidationError(f"{where}: id {sample.id!r} is not an item of {items_path}{hint}")
        key = (sample.id, sample.number)
        if key in seen:
            raise DataValidationError(
                f"{where}: sample {sample.number} of id {sample.id!r} already given at {seen[key]}"
            )
        seen[key] = where
        out[sample.id].append(sample)
    for samples in out.values():
        samples.sort(key=lambda s: s.number)
    return out


def single_response_samples(responses: dict[str, str | None], item_ids: Iterable[str]) -> dict[str, list[Sample]]:
    """One text sample per item from a plain response mapping (``{id: text}``)."""
    return {
        i: [Sample(i, 0, TEXT, responses[i], None if responses[i] is not None else "no response")]
        if i in responses
        else []
        for i in item_ids
    }


def write_repeated_prompts(prompts: InFile, k: int, out: str | os.PathLike) -> None:
    """The prompt set of :func:`repeated_prompts` for a prompts.jsonl (a language model's k answers).

    Args:
        out: the repeated prompt set to write (JSON lines, the LLM prompt contract):
            results/crystal/{dataset}/k{k}/prompts.jsonl
        prompts: as in :func:`crucible.crystal.generators.write_generator_answers`
        k: copies of each item's prompt, ids {id}#0 .. {id}#k-1 (default %(default)s)
    """
    from crucible.crystal.items import write_jsonl
    from crucible.llm.files import read_prompt_records

    write_jsonl(repeated_prompts(read_prompt_records(prompts), k), out)


def write_generator_samples(
    generator: str,
    prompts: InFile,
    k: int,
    out: str | os.PathLike,
    out_info: str | os.PathLike,
    train: InFile | None = None,
    seed: int = 0,
    params: dict[str, Any] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """k samples per item of a generator as a samples file (JSON lines with ``response``) and its
    sidecar (parameters, timings). Returns the sidecar.

    Args:
        out: the samples file to write (JSON lines {id, sample, response, error}):
            results/crystal/{dataset}/samples/k{k}/{generator}.jsonl
        out_info: the sidecar to write (JSON: generator, seed, parameters, k, counts, timings in s):
            .../samples/k{k}/{generator}.json
        generator: as in :func:`crucible.crystal.generators.write_generator_answers`
        prompts: as in :func:`crucible.crystal.generators.write_generator_answers`
        train: as in :func:`crucible.crystal.generators.write_generator_answers`
        seed: as in :func:`crucible.crystal.generators.write_generator_answers`
        params: as in :func:`crucible.crystal.generators.write_generator_answers`
        k: samples per item, sample 0 being generate's answer; fewer where the generator has fewer candidates (default
            %(default)s)
    """
    from crucible.core.io import write_json
    from crucible.crystal import generators, items
    from crucible.llm.files import read_prompt_records

    lines, info = generators.generate_samples(
        generator,
        read_prompt_records(prompts),
        k,
        items.read_jsonl(train) if train else [],
        seed,
        params or {},
        progress=progress,
    )
    items.write_jsonl(lines, out)
    write_json(info, out_info)
    return info
