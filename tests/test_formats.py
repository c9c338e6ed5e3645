"""Each case of the attack on the user-facing readers (issue 31), one regression test apiece: a
refusal naming the file, the record and the field, never a traceback or a silent drop."""

from __future__ import annotations

import gzip
import json
import os
import tarfile

import pytest

from crucible.catalysis.catbench_files import read_catbench_json
from crucible.catalysis.cathub import read_cathub_raw
from crucible.catalysis.vasp_tree import read_oszicar_energy
from crucible.core import formats, reading, strict_json
from crucible.core.errors import ConfigError, DataValidationError
from crucible.crystal import samples

# ------------------------------------------------------------------ strict JSON, bounded bytes


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"a": 1, "a": 2}', "key 'a' is given twice"),
        ('{"a": NaN}', "NaN is not a number JSON allows"),
        ('{"a": -Infinity}', "-Infinity is not a number JSON allows"),
        ('{"a": 1e309}', "overflows to infinity"),
        ('{"a": ' + "1" * 500 + "}", "has 500 digits"),
        ('{"a": [' * 100_000 + "]" * 100_000 + "}", "nested too deeply|not valid JSON"),
        ('{"a": 1', "not valid JSON"),
    ],
)
def test_strict_json_refuses_what_json_loads_would_resolve_silently(text, message):
    with pytest.raises(DataValidationError, match=f"^where: .*(?:{message})"):
        strict_json.parse_json(text, "where")


def test_a_gzip_bomb_is_refused_at_the_bound_a_user_can_raise(tmp_path, monkeypatch):
    bomb = tmp_path / "bomb_adsorption.json.gz"
    bomb.write_bytes(gzip.compress(b'{"x": "' + b"0" * (3 * 2**20) + b'"}'))
    assert bomb.stat().st_size < 20_000
    monkeypatch.setenv(reading.MAX_BYTES_ENV, "2")
    with pytest.raises(DataValidationError, match=f"bomb_adsorption.json.gz: more than 2 MB.*{reading.MAX_BYTES_ENV}"):
        read_catbench_json(bomb)
    monkeypatch.setenv(reading.MAX_BYTES_ENV, "4")
    with pytest.raises(DataValidationError, match="reaction 'x': field \\(the record\\)"):
        read_catbench_json(bomb)  # read whole under the raised bound; then it is no reaction


def test_text_must_be_utf8_and_a_bom_is_dropped(tmp_path):
    (tmp_path / "bom.jsonl").write_bytes(b'\xef\xbb\xbf{"id": "a"}\n')
    assert list(strict_json.iter_json_lines(tmp_path / "bom.jsonl")) == [(1, {"id": "a"})]
    (tmp_path / "latin.jsonl").write_bytes(b'{"id": "a"}\n{"id": "\xe9"}\n')
    with pytest.raises(DataValidationError, match="latin.jsonl: line 2: not UTF-8"):
        list(strict_json.iter_json_lines(tmp_path / "latin.jsonl"))


def test_an_integer_is_an_integer():
    schema = {"type": "object", "properties": {"n": formats.INDEX, "x": formats.NUMBER}}
    for bad in ({"n": True}, {"n": 3.0}, {"n": "3"}, {"n": -1}, {"n": 2**63}, {"x": True}, {"x": "1"}):
        with pytest.raises(DataValidationError, match=r"^rec: field (n|x): must be"):
            formats.validate(bad, schema, "rec")
    assert formats.validate({"n": 3, "x": 2.5}, schema, "rec") == {"n": 3, "x": 2.5}


# ------------------------------------------------------------------ numbers in text


@pytest.mark.parametrize(
    "text, expected",
    [("3", 3), ("0", 0), ("²", "superscript two"), ("٣", "arabic-indic digit three"), ("３", "fullwidth digit"),
     ("1٣", "arabic-indic"), ("3.5", "not a whole number"), ("", "not a whole number"), (str(2**63), "larger than")],
)  # fmt: skip
def test_whole_numbers_in_text_are_ascii_digits_only(text, expected):
    number, why = formats.whole_number(text)
    if isinstance(expected, int):
        assert (number, why) == (expected, None)
    else:
        assert number is None and expected in why


@pytest.mark.parametrize(
    "reply, reason",
    [
        ("answer: ٣٫٥", "arabic-indic digit three"),
        ("answer: 1٣", "arabic-indic digit three"),
        ("answer: 3 or 4", "more than one option"),
        ("The answer is 3-4", "more than one option"),
        ("answer: 3, 4", "more than one option"),
        ("answer: 3,4", "separator inside the number"),
        ("answer: ３", "fullwidth digit three"),
        ("answer: 2.5", "a fraction"),
    ],
)
def test_an_answer_in_other_digits_or_naming_two_options_is_invalid_with_its_reason(reply, reason):
    from crucible.reactions.prompts import read_conditions_answer

    question = {"options": [{}] * 20}
    answer, why = read_conditions_answer(reply, question)
    assert answer is None and reason in why
    assert read_conditions_answer("answer: 3, because the base is strong", question) == (3, None)
    assert read_conditions_answer("answer: 13", question) == (13, None)


# ------------------------------------------------------------------ catbench-json, cathub-raw


def _catbench(catalysis_demo):
    return json.loads((catalysis_demo / "emt-demo_adsorption.json").read_text())


def _first_system(doc):
    rid = sorted(k for k in doc if not k.startswith("_"))[0]
    return rid, doc[rid]


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda e: e["raw"]["star"].update(ref=["x"]), r'field raw.star.ref: must be a string, got \["x"\]'),
        (lambda e: e.update(adsorbate_indices=["a"]), r"field adsorbate_indices\[0\]: must be a whole number"),
        (lambda e: e.update(adsorbate_indices=[1.7]), r"field adsorbate_indices\[0\]: must be a whole number"),
        (lambda e: e.update(adsorbate_indices=[]), r"field adsorbate_indices: \[\] should be non-empty"),
        (lambda e: e.update(adsorbate_indices=[True]), r"field adsorbate_indices\[0\]: must be a whole number"),
        (lambda e: e.update(adsorbate_indices=[10_000]), r"field adsorbate_indices: \[10000\] not atoms of the adslab"),
        (lambda e: e.update(ref_ads_eng="1.0"), r"field ref_ads_eng: must be a finite number"),
        (lambda e: e["raw"]["star"].update(stoi=True), r"field raw.star.stoi: must be a finite number"),
    ],
)
def test_catbench_json_fields_are_typed_and_refused_naming_reaction_and_field(
    catalysis_demo, tmp_path, mutate, message
):
    doc = _catbench(catalysis_demo)
    rid, entry = _first_system(doc)
    mutate(entry)
    bad = tmp_path / "bad_adsorption.json"
    bad.write_text(json.dumps(doc))
    with pytest.raises(DataValidationError, match=f"bad_adsorption.json reaction '{rid}': {message}"):
        read_catbench_json(bad)


def test_a_reaction_id_given_twice_in_catbench_json_is_refused_not_the_last_kept(catalysis_demo, tmp_path):
    doc = _catbench(catalysis_demo)
    rid, entry = _first_system(doc)
    text = json.dumps(doc)
    twice = text[:-1] + ", " + json.dumps(rid) + ": " + json.dumps(entry) + "}"
    (tmp_path / "twice.json").write_text(twice)
    with pytest.raises(DataValidationError, match=f"twice.json: key '{rid}' is given twice"):
        read_catbench_json(tmp_path / "twice.json")


def test_cathub_fixatoms_kwargs_must_hold_indices(catalysis_demo, tmp_path):
    doc = json.loads((catalysis_demo / "emt-demo_cathub.json").read_text())
    system = doc["raw_reactions"][0]["reactionSystems"][0]["systems"]
    for kwargs, message in [
        ([1], r"field kwargs: must be an object holding .indices., got \[1\]"),
        ({"indices": ["a"]}, "kwargs.indices"),
    ]:
        system["constraints"] = json.dumps([{"name": "FixAtoms", "kwargs": kwargs}])
        (tmp_path / "raw.json").write_text(json.dumps(doc))
        for filtering in ("catbench", "strict"):
            with pytest.raises(DataValidationError, match=f"raw.json.*constraint.*{message}"):
                read_cathub_raw(tmp_path / "raw.json", filtering=filtering)


# ------------------------------------------------------------------ samples


ITEMS = ["a", "b"]


def test_a_sample_number_in_a_name_is_read_in_ascii_digits_only(tmp_path):
    folder = tmp_path / "cifs"
    folder.mkdir()
    (folder / "a__0.cif").write_text("data_x\n")
    assert [s.number for s in samples.read_samples(folder, ITEMS)["a"]] == [0]
    (folder / "a__².cif").write_text("data_x\n")
    with pytest.raises(DataValidationError, match="cifs: a__².cif: file name must be.*superscript two"):
        samples.read_samples(folder, ITEMS)
    (folder / "a__².cif").unlink()
    (folder / "a__٣.cif").write_text("data_x\n")
    with pytest.raises(DataValidationError, match="a__٣.cif: .*arabic-indic"):
        samples.read_samples(folder, ITEMS)


def test_a_jsonl_sample_number_past_the_declared_range_is_refused(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"id": "a", "sample": 2**63, "response": "x"}) + "\n")
    with pytest.raises(
        DataValidationError, match="s.jsonl: line 1: field sample: must be a whole number 0..2147483647"
    ):
        samples.read_samples(path, ITEMS)
    path.write_text('{"id": "a", "sample": 0, "sample": 1, "response": "x"}\n')
    with pytest.raises(DataValidationError, match="s.jsonl: line 1: key 'sample' is given twice"):
        samples.read_samples(path, ITEMS)
    path.write_text(json.dumps({"id": "a#٣", "response": "x"}) + "\n")
    with pytest.raises(
        DataValidationError, match="s.jsonl: line 1: id 'a#٣' is not of the repeated prompt set.*arabic"
    ):
        samples.read_samples(path, ITEMS, fmt="responses")


def _tar_with_links(path, target_dir):
    with tarfile.open(path, "w") as tar:
        tar.add(target_dir / "a__0.cif", arcname="a__0.cif")
        link = tarfile.TarInfo("a__1.cif")
        link.type, link.linkname = tarfile.LNKTYPE, "a__0.cif"
        tar.addfile(link)
    with tarfile.open(path.with_name("sym.tar"), "w") as tar:
        tar.add(target_dir / "a__0.cif", arcname="a__0.cif")
        link = tarfile.TarInfo("b__0.cif")
        link.type, link.linkname = tarfile.SYMTYPE, "a__0.cif"
        tar.addfile(link)


def test_links_are_refused_alike_in_a_folder_and_in_a_tar(tmp_path):
    folder = tmp_path / "cifs"
    folder.mkdir()
    (folder / "a__0.cif").write_text("data_x\n")
    _tar_with_links(tmp_path / "hard.tar", folder)
    with pytest.raises(DataValidationError, match="hard.tar: member a__1.cif: a hard link"):
        samples.read_samples(tmp_path / "hard.tar", ITEMS)
    with pytest.raises(DataValidationError, match="sym.tar: member b__0.cif: a symbolic link"):
        samples.read_samples(tmp_path / "sym.tar", ITEMS)
    os.symlink(folder / "a__0.cif", folder / "b__0.cif")
    with pytest.raises(DataValidationError, match="cifs: b__0.cif: a symbolic link"):
        samples.read_samples(folder, ITEMS)
    os.link(folder / "a__0.cif", folder / "a__1.cif")  # a hard link in a folder is a file like any other
    (folder / "b__0.cif").unlink()
    assert [s.number for s in samples.read_samples(folder, ITEMS)["a"]] == [0, 1]


def test_a_tar_bomb_is_refused_at_the_bound(tmp_path, monkeypatch):
    monkeypatch.setenv(reading.MAX_BYTES_ENV, "1")
    big = tmp_path / "a__0.cif"
    big.write_bytes(b"#" * (2 * 2**20))
    with tarfile.open(tmp_path / "s.tar.gz", "w:gz") as tar:
        tar.add(big, arcname="a__0.cif")
    with pytest.raises(DataValidationError, match="s.tar.gz: more than 1 MB"):
        samples.read_samples(tmp_path / "s.tar.gz", ITEMS)
    monkeypatch.setenv(reading.MAX_MEMBERS_ENV, "1")
    monkeypatch.setenv(reading.MAX_BYTES_ENV, "10")
    with tarfile.open(tmp_path / "two.tar", "w") as tar:
        tar.add(big, arcname="a__0.cif")
        tar.add(big, arcname="a__1.cif")
    with pytest.raises(DataValidationError, match=f"two.tar: more than 1 members.*{reading.MAX_MEMBERS_ENV}"):
        samples.read_samples(tmp_path / "two.tar", ITEMS)


# ------------------------------------------------------------------ config names and keys


def _check(config):
    from crucible.dag.config import check_config

    check_config(config)


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"reactions": {"datasets": ["buchwald-hartwig"], "model_params": {"random": {}, 1: {}}}},
            r"reactions.model_params.1: the key 1 is not a string",
        ),
        (
            {"reactions": {"datasets": ["buchwald-hartwig"], "model_params": {"randm": {"seed": 1}}}},
            r"reactions.model_params.randm: no model of that name .*its parameters would be ignored",
        ),
        (
            {"matbench": {"tasks": ["matbench_steels"], "model_params": {"randm": {}}}},
            r"matbench.model_params.randm: no model of that name .*its parameters would be ignored",
        ),
        (
            {"matbench": {"tasks": ["matbench_steels"], "run_name": "steels\n"}},
            r"matbench.run_name: .*control character",
        ),
        ({"crystal": {"datasets": ["mp20"], "user_datasets": {"x\n": "x.csv"}}}, r"crystal.user_datasets.x\n: "),
        ({"catalysis": {"datasets": {"a\u202eb": {"path": "x.json"}}}}, r"catalysis.datasets.a.b: .*RIGHT-TO-LEFT"),
        ({"mlip": {"models": ["../x"]}}, r"mlip.models\[0\]: '../x' holds a path separator"),
    ],
)
def test_config_names_and_name_keys_are_refused_the_same_way_in_every_family(config, message):
    with pytest.raises(ConfigError, match=message):
        _check(config)


# ------------------------------------------------------------------ the report's literals


def test_a_file_name_cannot_inject_markup_into_the_front_page(tmp_path):
    from docutils.core import publish_parts

    from crucible.report import front_page as fp
    from crucible.report import run_facts

    name = "x``, `y <javascript:alert(1)>`__ ``z\n.csv"
    (tmp_path / name).write_text("1\n")
    rst = fp.render(
        {"reactions": {"datasets": ["buchwald-hartwig"]}},
        [run_facts.Job("a", (name,), ("results/o",))],
        sources={"artifacts": {}},
        configfiles=[name],
        repo=tmp_path,
        root=tmp_path,
    )
    html = publish_parts(rst, writer="html", settings_overrides={"halt_level": 2, "report_level": 2})["html_body"]
    assert "<a " not in html and "href" not in html
    assert "javascript:alert(1)" in html  # shown, as text


def test_a_vasp_energy_in_other_digits_is_refused(tmp_path):
    oszicar = tmp_path / "OSZICAR"
    oszicar.write_text("   1 F= -.1E+02 E0= -10.5 d E = -.1E+02\n")
    assert read_oszicar_energy(oszicar) == -10.5
    oszicar.write_text("   1 F= -.1E+02 E0= -١٠.٥ d E = -.1E+02\n")  # float() would read -10.5
    with pytest.raises(DataValidationError, match="OSZICAR line 1 E0: not a number"):
        read_oszicar_energy(oszicar)
