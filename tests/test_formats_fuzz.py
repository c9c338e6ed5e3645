"""The fuzz contract of every format registered in :mod:`crucible.core.formats`.

From a canonical valid file per format, hypothesis generates mutations of every declared field
(type confusion, digits of other scripts, 2**63 and 1e309, NaN and Infinity as numbers and as
strings, a lone surrogate, a key given twice, a deleted required key) and of the bytes (truncation, a BOM, other
encodings, gzip, a gzip bomb). Passing means: the reader gives the canonical file's records, or
raises :class:`DataValidationError` naming the file. Any other exception, or other records,
fails; so does a registered format without a case here. ``derandomize``: the same examples on
every run, a few seconds per format.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crucible.core import formats, reading
from crucible.core.errors import DataValidationError

FUZZ = settings(
    max_examples=40, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


class Raw:
    """A JSON number written as it stands (``NaN``, ``1e309``), which ``json.dumps`` cannot make."""

    def __init__(self, text: str):
        self.text = text


def dumps(value: Any, duplicate: tuple | None = None, here: tuple = ()) -> str:
    """JSON text of ``value``; the object at path ``duplicate`` has its first key written twice."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        pairs = [f"{json.dumps(k)}: {dumps(v, duplicate, here + (k,))}" for k, v in value.items()]
        if duplicate == here and pairs:
            pairs.append(pairs[0])
        return "{" + ", ".join(pairs) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(dumps(v, duplicate, here + (i,)) for i, v in enumerate(value)) + "]"
    return json.dumps(value, ensure_ascii=False)


HOSTILE_COMMON = [Raw("NaN"), Raw("Infinity"), Raw("-Infinity"), Raw("1e309"), [], {}, "NaN", "Infinity"]
# text that is not valid Unicode: a lone surrogate, which no UTF-8 file can hold
SURROGATE = Raw('"x\\ud800"')
HOSTILE = {
    "index": [True, False, 3.0, "3", "٣", "²", "３", -1, 2**63, 2**31, None, 1.5, *HOSTILE_COMMON],
    "number": [True, False, "1.0", "٣", None, [1.0], *HOSTILE_COMMON],
    "text": [3, 0, True, None, 1.5, [], {}, ["x"], Raw("NaN"), Raw("1e309"), SURROGATE],
    "nonempty": ["", 3, True, None, [], {}, ["x"], Raw("NaN"), SURROGATE],
    "optional_text": [3, True, 1.5, [], {}, ["x"], Raw("Infinity"), SURROGATE, Raw('"\\udfff"')],
    "text_list": ["q2", 3, None, {}, [3], [True], [None], [Raw("NaN")], ["no-such-invalid-id"], [SURROGATE]],
    "optional_index": [True, False, 3.0, "3", "٣", "²", "３", -1, 2**63, 2**31, 1.5, *HOSTILE_COMMON],
    "indices": [[1.7], ["a"], [], [True], [2**63], [-1], "1", 1, None, [[1]], [1, 1], [Raw("NaN")]],
    "id_or_int": [True, 3.0, None, [], {}, Raw("NaN")],
    "sha256": [3, "x" * 64, "ab", None, []],
    # an empty FixAtoms is a constraint fixing nothing, and an index given twice fixes one atom
    "fixed_indices": [[1.7], ["a"], [True], [2**63], [-1], "1", 1, None, [[1]], [Raw("NaN")]],
    "object": [3, "x", [], None, True, Raw("NaN")],
}


def _get(doc, path):
    for p in path:
        doc = doc[p]
    return doc


def _set(doc, path, value):
    _get(doc, path[:-1])[path[-1]] = value


class Case:
    """A format's canonical file and reader. ``fields``: (path, kind) of every declared field
    that a mutation replaces; ``required``: paths whose deletion must be refused; ``lines``:
    the document is a list written as JSON lines."""

    def __init__(self, name, canonical, read, fields, required=(), lines=False, suffix=".json", encode=None, fmt=None):
        self.name, self.canonical, self.read = name, canonical, read
        self.format = fmt or name
        self.fields, self.required, self.lines, self.suffix = fields, required, lines, suffix
        self.encode = encode  # a wrapper that writes the document (cathub: into a JSON text field)

    def text(self, doc, duplicate=None) -> str:
        if self.encode:
            return self.encode(doc, duplicate)
        if self.lines:
            return "".join(
                dumps(rec, duplicate[1:] if duplicate and duplicate[0] == i else None) + "\n"
                for i, rec in enumerate(doc)
            )
        return dumps(doc, duplicate)


def _records_or_refusal(case: Case, data: bytes, expected):
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"fuzzed{case.suffix}"
        path.write_bytes(data)
        try:
            got = case.read(path)
        except DataValidationError as exc:
            assert str(path) in str(exc), f"{case.name}: refusal does not name the file: {exc}"
            return "refused"
        assert got == expected, f"{case.name}: other records than the canonical file's, without an error"
        return "same"


# ---------------------------------------------------------------------------------- the cases


def _samples_case():
    from crucible.crystal import samples

    def read(path):
        out = samples.read_samples(path, ["a", "b"], fmt="jsonl")
        return {k: [(s.number, s.kind, s.payload, s.error) for s in v] for k, v in out.items()}

    doc = [
        {"id": "a", "sample": 0, "response": "x", "error": None},
        {"id": "b", "sample": 1, "cif": "data_x"},
    ]
    fields = [((0, "id"), "nonempty"), ((0, "sample"), "index"), ((0, "response"), "optional_text"),
              ((0, "error"), "optional_text"), ((1, "cif"), "optional_text")]  # fmt: skip
    return Case("samples-jsonl", doc, read, fields, required=[(0, "id"), (0, "sample")], lines=True, suffix=".jsonl")


def _responses_case():
    from crucible.llm import files

    def read(path):
        replay = files.read_replay(path, ["a", "b"])
        return sorted((c.id, c.response, c.error, c.model_id, c.off_schema) for c in replay.values())

    doc = [
        {"id": "a", "response": "x", "error": None, "model": "m", "finish_reason": "stop", "completion_tokens": 3,
         "off_schema": "not JSON as a whole"},
        {"id": "b", "response": None, "error": "e"},
    ]  # fmt: skip
    fields = [((0, "id"), "nonempty"), ((0, "response"), "optional_text"), ((0, "error"), "optional_text"),
              ((0, "model"), "optional_text"), ((0, "finish_reason"), "optional_text"),
              ((0, "completion_tokens"), "optional_index"), ((0, "off_schema"), "optional_text")]  # fmt: skip
    return Case("llm-responses", doc, read, fields, required=[(0, "id")], lines=True, suffix=".jsonl")


QUESTIONS = [{"id": "q1", "question_type": "t"}, {"id": "q2", "question_type": "t"}]
SHA = hashlib.sha256(b"questions").hexdigest()


def _predictions_case():
    from crucible.reactions import scoring

    def read(path):
        got = scoring.load_predictions(path, QUESTIONS, SHA)
        return sorted((k, repr(v)) for k, v in got.items())

    doc = {"model": "m", "questions_file": "q.json", "questions_sha256": SHA, "predictions": {"q1": 2},
           "invalid": {"q2": "no reply"}, "cut_off": ["q2"], "off_schema": ["q2"]}  # fmt: skip
    fields = [(("model",), "text"), (("questions_file",), "text"), (("questions_sha256",), "sha256"),
              (("invalid", "q2"), "text"), (("predictions",), "object"), (("invalid",), "object"),
              (("cut_off",), "text_list"), (("off_schema",), "text_list")]  # fmt: skip
    return Case("reactions-predictions", doc, read, fields, required=[("predictions",)])


CSCL_CIF = """data_CsCl
_cell_length_a 4.12
_cell_length_b 4.12
_cell_length_c 4.12
_cell_angle_alpha 90
_cell_angle_beta 90
_cell_angle_gamma 90
_symmetry_space_group_name_H-M 'P 1'
loop_
_atom_site_label
_atom_site_type_symbol
_atom_site_fract_x
_atom_site_fract_y
_atom_site_fract_z
Cs1 Cs 0 0 0
Cl1 Cl 0.5 0.5 0.5
"""


def _cif_table_case():
    from crucible.crystal import data

    def read(path):
        return [(i, s.composition.reduced_formula, sp) for i, s, sp in data.load_cif_table(path)]

    # every row its split: a split column filled for some rows only is refused (crystal.data)
    doc = [
        {"material_id": "m-1", "cif": CSCL_CIF, "split": "test"},
        {"material_id": "m-2", "cif": CSCL_CIF, "split": "train"},
    ]
    fields = [((0, "cif"), "nonempty"), ((0, "material_id"), "id_or_int"), ((0, "split"), "optional_text"),
              ((1, "id"), "id_or_int")]  # fmt: skip
    return Case("crystal-cif-table-jsonl", doc, read, fields, required=[(0, "cif")], lines=True, suffix=".jsonl")


def _reaction_records(reactions):
    return [
        (
            r.reaction_id,
            r.dft_ads_eng,
            r.adsorbate_indices,
            [(s.key, s.stoi, s.dft_energy, len(s.atoms)) for s in r.structures],
        )
        for r in reactions
    ]


def _catbench_inline_case(demo: Path):
    """CatBench's layout before 1.1.1: each system's ASE-JSON text inline."""
    from crucible.catalysis.catbench_files import catbench_document, read_catbench_json

    entry = catbench_document(read_catbench_json(demo / "emt-demo_adsorption.json"), dedup=False)["Cu111_H"]
    fields = [
        (("Cu111_H", "raw", "star", "atoms_json"), "text"),
        (("Cu111_H", "raw", "COgas" if "COgas" in entry["raw"] else "star", "stoi"), "number"),
    ]
    return Case(
        "catbench-json-inline",
        {"Cu111_H": entry},
        lambda p: _reaction_records(read_catbench_json(p)),
        fields,
        required=[("Cu111_H", "raw", "star", "atoms_json")],
        fmt="catbench-json",
    )


def _catbench_case(demo: Path):
    from crucible.catalysis.catbench_files import read_catbench_json

    full = json.loads((demo / "emt-demo_adsorption.json").read_text())
    entry = full["Cu111_H"]
    refs = {s["ref"] for s in entry["raw"].values()}
    doc = {"Cu111_H": entry, "_structures": {k: v for k, v in full["_structures"].items() if k in refs}}
    first_ref = sorted(refs)[0]
    fields = [(("Cu111_H", "ref_ads_eng"), "number"), (("Cu111_H", "adsorbate_indices"), "indices"),
              (("Cu111_H", "raw", "star", "stoi"), "number"), (("Cu111_H", "raw", "star", "energy_ref"), "number"),
              (("Cu111_H", "raw", "star", "ref"), "text"), (("Cu111_H", "constraint_source"), "text"),
              (("_structures", first_ref), "text"), (("Cu111_H", "raw"), "nonempty")]  # fmt: skip
    required = [("Cu111_H", "raw"), ("Cu111_H", "ref_ads_eng"), ("Cu111_H", "raw", "star", "stoi"),
                ("Cu111_H", "raw", "star", "energy_ref"), ("Cu111_H", "raw", "star", "ref")]  # fmt: skip
    return Case("catbench-json", doc, lambda p: _reaction_records(read_catbench_json(p)), fields, required=required)


def _cathub_case(demo: Path):
    """The constraints of a Catalysis-Hub system are a JSON text inside the file: mutations are
    made to the decoded list and written back as text (strict filtering, which reads every entry)."""
    from crucible.catalysis.cathub import read_cathub_raw

    full = json.loads((demo / "emt-demo_cathub.json").read_text())
    node = next(n for n in full["raw_reactions"] if n["id"] == "Cu111_H")
    system = next(s for s in node["reactionSystems"] if s["name"] == "star")
    constraints = json.loads(system["systems"]["constraints"])

    def encode(doc, duplicate):
        system["systems"]["constraints"] = dumps(doc, duplicate)
        return json.dumps({"raw_reactions": [node]})

    fields = [((0, "name"), "text"), ((0, "kwargs"), "nonempty"), ((0, "kwargs", "indices"), "fixed_indices")]
    return Case(
        "cathub-raw-constraint",
        constraints,
        lambda p: _reaction_records(read_cathub_raw(p, filtering="strict")),
        fields,
        required=[(0, "name"), (0, "kwargs"), (0, "kwargs", "indices")],
        encode=encode,
    )


@pytest.fixture(scope="module")
def cases(catalysis_demo) -> dict[str, Case]:
    made = [_samples_case(), _responses_case(), _predictions_case(), _cif_table_case()]
    made += [_catbench_case(catalysis_demo), _catbench_inline_case(catalysis_demo), _cathub_case(catalysis_demo)]
    return {c.name: c for c in made}


# Formats fuzzed by their own test below (names of files, not JSON records).
NAME_FORMATS = {"samples-cif-name"}
# A format's part that its main case reaches (the '_structures' map is in catbench-json's file).
PARTS = {"catbench-json-structures": "catbench-json"}


def test_every_registered_format_has_a_fuzz_case(cases):
    assert set(formats.FORMATS) == {c.format for c in cases.values()} | NAME_FORMATS | set(PARTS)


def _leaf_names(schema: dict) -> set[str]:
    out = set()
    for key, sub in (schema.get("properties") or {}).items():
        out.add(key)
        out |= _leaf_names(sub)
    for sub in [schema.get("additionalProperties"), schema.get("items")]:
        if isinstance(sub, dict):
            out |= _leaf_names(sub)
    for sub in schema.get("anyOf", []) + ([schema["then"]] if "then" in schema else []):
        out |= _leaf_names(sub)
    return out


def test_the_cases_mutate_every_declared_field(cases):
    mutated: dict[str, set[str]] = {}
    for case in cases.values():
        mutated.setdefault(case.format, set()).update(str(p[-1]) for p, _ in case.fields)
    for name, fields in mutated.items():
        declared = _leaf_names(formats.FORMATS[name].record)
        assert declared <= fields, (name, declared - fields)


def _canonical(case: Case):
    data = case.text(case.canonical).encode()
    expected = case.read_expected = getattr(case, "read_expected", None)
    if expected is None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"canonical{case.suffix}"
            path.write_bytes(data)
            case.read_expected = expected = case.read(path)
    return data, expected


NAMES = ["samples-jsonl", "llm-responses", "reactions-predictions", "crystal-cif-table-jsonl", "catbench-json",
         "catbench-json-inline", "cathub-raw-constraint"]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
def test_field_mutations_give_the_same_records_or_a_refusal_naming_the_file(cases, name):
    import copy

    case = cases[name]
    _, expected = _canonical(case)
    outcomes: dict[str, int] = {}

    @FUZZ
    @given(st.data())
    def run(draw):
        path, kind = draw.draw(st.sampled_from(case.fields))
        doc = copy.deepcopy(case.canonical)
        action = draw.draw(st.sampled_from(["replace", "delete", "duplicate"]))
        if action == "delete" and case.required:
            gone = draw.draw(st.sampled_from(case.required))
            _get(doc, gone[:-1]).pop(gone[-1])
            text, dup = case.text(doc), None
        elif action == "duplicate":
            parent = path[:-1]
            dup = parent if isinstance(_get(doc, parent), dict) else None
            text = case.text(doc, dup)
        else:
            _set(doc, path, draw.draw(st.sampled_from(HOSTILE[kind])))
            text, dup = case.text(doc), None
        outcome = _records_or_refusal(case, text.encode(), expected)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if action in ("replace", "delete") or dup is not None:
            assert outcome == "refused", f"{name}: a hostile value at {path} ({kind}) was read"

    run()
    assert outcomes.get("refused", 0) > 0


@pytest.mark.parametrize("name", NAMES)
def test_byte_mutations_give_the_same_records_or_a_refusal_naming_the_file(cases, name, monkeypatch):
    case = cases[name]
    data, expected = _canonical(case)

    @FUZZ
    @given(st.integers(1, len(data) - 1), st.sampled_from(["truncate", "bom", "latin-1", "utf-16", "gzip", "cr"]))
    def run(cut, how):
        if how == "truncate":
            body = data[:cut]
            if body.rstrip().endswith(b"}") and data[cut:].strip(b"\n ") and case.lines:
                body = body[:-1]  # a cut at a line's end is a shorter valid file, not a mutation
        elif how == "bom":
            body = b"\xef\xbb\xbf" + data
        elif how == "latin-1":
            body = data.decode().encode("latin-1", errors="replace")
        elif how == "utf-16":
            body = data.decode().encode("utf-16")
        elif how == "cr":
            body = data.replace(b"\n", b"\r\n")
        else:
            body = gzip.compress(data, mtime=0)
        outcome = _records_or_refusal(case, body, expected)
        if how in ("bom", "gzip"):
            assert outcome == "same", f"{name}: {how} changed the reading"
        if how == "utf-16" or (how == "truncate" and data[cut:].strip()):
            assert outcome == "refused", f"{name}: {how} was read"

    run()
    # a gzip bomb: refused at the bound, however small the file
    monkeypatch.setenv(reading.MAX_BYTES_ENV, "1")
    bomb = gzip.compress(data + b" " * (2 * 2**20), mtime=0)
    assert len(bomb) < 20_000 and _records_or_refusal(case, bomb, expected) == "refused"


@FUZZ
@given(st.sampled_from(["²", "٣", "３", "1٣", "-1", "1.0", str(2**63), "", " 1", "1\n", "0x1", "٣٫٥", "+1"]))
def test_sample_numbers_in_cif_names_are_refused_unless_ascii_digits(tail):
    from crucible.crystal import samples

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "cifs"
        folder.mkdir()
        (folder / "a__0.cif").write_text(CSCL_CIF)
        try:
            (folder / f"a__{tail}.cif").write_text(CSCL_CIF)
        except OSError:
            return
        with pytest.raises(DataValidationError, match=str(folder)):
            samples.read_samples(folder, ["a"])
        os.unlink(folder / f"a__{tail}.cif")
        os.symlink(folder / "a__0.cif", folder / "a__1.cif")
        with pytest.raises(DataValidationError, match="a symbolic link"):
            samples.read_samples(folder, ["a"])


@FUZZ
@given(st.integers(1, 8), st.sampled_from(["cut", "gzip-cut", "whole", "gzip"]))
def test_a_cut_tar_of_samples_is_refused_not_read_as_fewer_samples(blocks, how):
    """tarfile stops quietly where an archive cut between members ends: the reader must not."""
    import io
    import tarfile

    from crucible.crystal import samples

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for n in range(3):
            body = (CSCL_CIF * (n + 1)).encode()
            info = tarfile.TarInfo(f"a__{n}.cif")
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    whole = buf.getvalue()
    end = len(whole.rstrip(b"\0"))  # where the members end and the end-of-archive blocks begin
    cut = whole[: max(512, (end // 512 + 1 - blocks) * 512)]
    data = {"whole": whole, "gzip": gzip.compress(whole, mtime=0), "cut": cut}.get(how) or gzip.compress(cut, mtime=0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / ("s.tar.gz" if "gzip" in how else "s.tar")
        path.write_bytes(data)
        if how in ("whole", "gzip"):
            assert [s.number for s in samples.read_samples(path, ["a"])["a"]] == [0, 1, 2]
        else:
            with pytest.raises(DataValidationError, match=str(path)):
                samples.read_samples(path, ["a"])
