"""crucible.identity.records: code digests from the import graph, name meanings, job records."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from crucible.cli import GROUPS, group_parser
from crucible.core.errors import ConfigError
from crucible.identity import code_closure, installed_code, job_code, name_book
from crucible.identity import records as identity
from crucible.identity.code_closure import import_closure
from crucible.identity.job_code import code_identity
from crucible.identity.name_book import Meaning, NameBook
from crucible.identity.records import JobRecord, record_path

from helpers import REPO


def all_commands() -> list[tuple[str, str]]:
    import argparse

    commands = []
    for group in GROUPS:
        parser = argparse.ArgumentParser()
        group_parser(group, parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                commands += [(group, verb) for verb in action.choices]
    return sorted(commands)


def test_every_command_has_a_handler_and_a_closure_with_its_group():
    commands = all_commands()
    assert len(commands) > 40
    for group, verb in commands:
        module, function = job_code.command_handler(group, verb)
        modules = code_identity(group, verb)["modules"]
        assert module in modules and "crucible.cli" in modules and "crucible" in modules, (group, verb)


# What a command imports when it runs: a command of each family on real inputs would need a DAG,
# so the check runs the handler's imports the way the CLI does (the group module, then the
# handler's own lazy imports, executed by calling the handler on arguments that fail at once).
# Every crucible module then in sys.modules must be in the static closure.
RUNTIME_SCRIPT = """
import json, sys
from crucible import cli
try:
    cli.main(sys.argv[1:])
except SystemExit:
    pass
print(json.dumps(sorted(m for m in sys.modules if m == "crucible" or m.startswith("crucible."))))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "argv",
    [
        [
            "matbench",
            "score",
            "--task",
            "matbench_steels",
            "--card",
            "x",
            "--model",
            "dummy",
            "--predictions",
            "p",
            "--folds",
            "f",
            "--data",
            "d",
            "--out",
            "o",
        ],
        ["crystal", "table", "--inputs", "x.json", "--dataset", "d", "--csv", "a", "--md", "b", "--tex", "c"],
        ["reactions", "score", "--help"],
        ["mlip", "eos-table", "--inputs", "x.parquet", "--out-csv", "a", "--out-md", "b", "--out-tex", "c"],
    ],
)
def test_static_closure_holds_every_module_the_command_imports(tmp_path, argv):
    proc = subprocess.run(
        [sys.executable, "-c", RUNTIME_SCRIPT, *argv], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    loaded = set(json.loads(proc.stdout.strip().splitlines()[-1]))
    static = set(code_identity(argv[0], argv[1])["modules"])
    assert loaded - static == set(), proc.stderr[-2000:]


def test_digest_ignores_comments_docstrings_and_version(tmp_path, monkeypatch):
    pkg = tmp_path / "crucible"
    pkg.mkdir()
    (pkg / "__init__.py").write_text('"""doc"""\n__version__ = "1.0"\n')
    (pkg / "a.py").write_text('"""A."""\nimport json\n\ndef f():\n    """F."""\n    return 1  # one\n')
    monkeypatch.setattr(code_closure, "PACKAGE_ROOT", pkg)
    before = code_closure.module_digest(pkg / "a.py"), code_closure.module_digest(pkg / "__init__.py")
    code_closure.module_digest.cache_clear()
    (pkg / "__init__.py").write_text('"""other doc"""\n__version__ = "2.0"\n')
    (pkg / "a.py").write_text('"""B."""\nimport json\n\n\ndef f():\n    # why\n    return 1\n')
    assert (code_closure.module_digest(pkg / "a.py"), code_closure.module_digest(pkg / "__init__.py")) == before
    code_closure.module_digest.cache_clear()
    (pkg / "a.py").write_text('"""B."""\nimport json\n\ndef f():\n    return 2\n')
    assert code_closure.module_digest(pkg / "a.py") != before[0]
    code_closure.module_digest.cache_clear()


def test_closure_follows_lazy_imports_and_names_third_party_packages():
    modules, others = import_closure(["crucible.crystal.scoring"])
    assert "crucible.crystal.scoring" in modules and "crucible.crystal" in modules and "crucible" in modules
    assert "pymatgen" in others
    versions = installed_code.package_versions(others)
    assert "pymatgen" in versions and all(v for v in versions.values())


def test_an_edit_of_one_module_changes_exactly_the_commands_that_reach_it(monkeypatch):
    """A one-line edit of crystal/scoring.py: the commands whose closure holds it get a new digest,
    every other command keeps its own."""
    commands = [c for c in all_commands() if c[0] != "sources"]
    before = {c: code_closure.digest(code_identity(*c)) for c in commands}
    import dataclasses

    real = code_closure._module

    def edited(module):
        info = real(module)
        return dataclasses.replace(info, top_digest="edited") if module == "crucible.crystal.scoring" else info

    monkeypatch.setattr(code_closure, "_module", edited)
    code_identity.cache_clear()
    try:
        after = {c: code_closure.digest(code_identity(*c)) for c in commands}
        changed = {c for c in commands if after[c] != before[c]}
        reaching = {c for c in commands if "crucible.crystal.scoring" in code_identity(*c)["modules"]}
    finally:
        code_identity.cache_clear()
    assert changed == reaching
    assert ("crystal", "score") in changed
    assert ("matbench", "score") not in changed and ("reactions", "score") not in changed


def test_code_digest_cache_follows_the_sources(tmp_path):
    cache = tmp_path / "digests.json"
    job_code._code_cache.cache_clear()
    first = job_code.code_digest("matbench", "score", cache_file=cache)
    assert json.loads(cache.read_text())["digests"]["matbench score"]["digest"] == first
    assert job_code.code_digest("matbench", "score", cache_file=None) == first
    job_code._code_cache.cache_clear()


def test_name_book_refuses_a_new_meaning_and_names_both(tmp_path):
    book_file = tmp_path / "names.json"
    old = NameBook({"matbench/model/gbm-magpie": Meaning({"params": {"max_iter": 50}}, "matbench.model_params")})
    assert old.check_recorded(book_file) == ["matbench/model/gbm-magpie"]
    old.record(["matbench/model/gbm-magpie"], book_file)
    assert old.check_recorded(book_file) == []
    new = NameBook(
        {
            "matbench/model/gbm-magpie": Meaning({"params": {"max_iter": 3}}, "matbench.model_params", "rename it"),
            "matbench/model/dummy": Meaning({}, "matbench.models"),
        }
    )
    # another run (matbench.run_name: quick) may not give the name the default run uses another meaning
    with pytest.raises(ConfigError) as err:
        new.check_recorded(book_file, run="matbench=quick")
    text = str(err.value)
    assert '{"params":{"max_iter":50}}' in text and '{"params":{"max_iter":3}}' in text
    assert "the run 'default' still uses it" in text and text.count("--directory") == 1
    assert "rename it" in text and "crucible names forget matbench/model/gbm-magpie" in text
    # the only run that uses it changes its meaning: recorded anew, one line saying what changed
    assert new.check_recorded(book_file) == ["matbench/model/dummy", "matbench/model/gbm-magpie"]
    assert new.changes == [
        'matbench/model/gbm-magpie changed (matbench.model_params): {"params":{"max_iter":50}} -> '
        '{"params":{"max_iter":3}}; its jobs rerun'
    ]
    new.record(["matbench/model/gbm-magpie", "matbench/model/dummy"], book_file)
    new.record(["matbench/model/dummy"], book_file, run="matbench=quick")
    book = name_book.read_name_book(book_file)
    assert book["matbench/model/gbm-magpie"]["runs"] == ["default"]
    assert book["matbench/model/dummy"]["runs"] == ["default", "matbench=quick"]
    # a record of an older crucible says no runs: a new meaning is refused, as before
    del book["matbench/model/gbm-magpie"]["runs"]
    book_file.write_text(json.dumps(book))
    with pytest.raises(ConfigError, match="did not record its runs"):
        old.check_recorded(book_file)
    name_book.forget_names(["matbench/model/gbm-magpie"], book_file)
    assert old.check_recorded(book_file) == ["matbench/model/gbm-magpie"] and old.changes == []
    with pytest.raises(ConfigError, match="no name 'nope'"):
        name_book.forget_names(["nope"], book_file)


def test_one_name_two_meanings_in_one_config_is_refused():
    class F:
        def __init__(self, names):
            self.names = lambda config: names

    a = F({"potential/mine": Meaning({"custom": 1}, "a")})
    b = F({"potential/mine": Meaning({"custom": 2}, "b")})
    with pytest.raises(ConfigError, match="two meanings"):
        NameBook.of({}, [a, b])


def test_for_job_picks_the_family_settings_and_the_names_its_wildcards_hold():
    book = NameBook(
        {
            "matbench/settings": Meaning(1, "k"),
            "matbench/model/dummy": Meaning(2, "k"),
            "matbench/model/gbm-magpie": Meaning(3, "k"),
            "reactions/model/dummy": Meaning(4, "k"),
            "potential/emt": Meaning(5, "k"),
        }
    )
    assert set(book.for_job("matbench", ["dummy", "matbench_steels", "0"])) == {
        "matbench/settings",
        "matbench/model/dummy",
    }
    assert set(book.for_job("catalysis", ["emt", "demo"])) == {"potential/emt"}


def _job(tmp_path, names, inputs, outputs):
    return JobRecord("matbench leaderboard", "c0de", names, [str(p) for p in inputs], [str(p) for p in outputs])


def test_job_records_propagate_names_and_refuse_a_mix(tmp_path):
    a, b, table = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "table.csv"
    a.write_text("{}")
    b.write_text("{}")
    _job(tmp_path, {"matbench/model/gbm-magpie": "111"}, [], [a]).write_records(
        ["x"], {"matbench/model/gbm-magpie": "111"}
    )
    _job(tmp_path, {"matbench/model/gbm-magpie": "222"}, [], [b]).write_records(
        ["x"], {"matbench/model/gbm-magpie": "222"}
    )
    assert record_path(a) == tmp_path / ".identity" / "a.json.json"
    with pytest.raises(identity.IdentityError) as err:
        _job(tmp_path, {}, [a, b], [table]).checked_input_names()
    assert str(b) in str(err.value) and "222" in str(err.value) and "111" in str(err.value)
    # the job's own meaning against an input's: refused the same way
    with pytest.raises(identity.IdentityError):
        _job(tmp_path, {"matbench/model/gbm-magpie": "333"}, [a], [table]).checked_input_names()
    job = _job(tmp_path, {"matbench/settings": "s"}, [a], [table])
    names = job.checked_input_names()
    assert names == {"matbench/model/gbm-magpie": "111", "matbench/settings": "s"}
    table.write_text("x\n")
    first = job.write_records(["crucible", "matbench", "leaderboard"], names)
    record = json.loads(record_path(table).read_text())
    assert record["identity"] == first and record["names"] == names
    assert record["inputs"] == {str(a): identity.output_sha256(a)}
    a.write_text('{"edited": 1}')
    assert job.write_records(["crucible", "matbench", "leaderboard"], names) != first


@pytest.mark.parametrize("restore_mtime", [False, True])
def test_an_input_changed_after_its_job_recorded_it_is_refused(tmp_path, restore_mtime):
    """Issue 44 item 1: a reader checks each input against the SHA-256 its maker recorded; an
    edit of the same size with the mtime set back (touch -r) is found too (ctime is in the
    digest cache's key), and the refusal names the file, both digests and the rule."""
    preds, score = tmp_path / "preds.parquet", tmp_path / "score.json"
    preds.write_bytes(b"1416.3\n")
    maker = JobRecord("matbench predict", "c0de", {}, [], [str(preds)], rule="predict_matbench")
    maker.write_records(["x"], {})
    recorded = json.loads(record_path(preds).read_text())
    assert recorded["sha256"] == identity.output_sha256(preds) and recorded["rule"] == "predict_matbench"
    reader = _job(tmp_path, {}, [preds], [score])
    assert reader.checked_input_names() == {}
    before = preds.stat()
    preds.write_bytes(b"99999.\n")
    if restore_mtime:
        os.utime(preds, ns=(before.st_atime_ns, before.st_mtime_ns))
    with pytest.raises(identity.IdentityError) as err:
        reader.checked_input_names()
    message = str(err.value)
    assert str(preds) in message and recorded["sha256"] in message and identity.output_sha256(preds) in message
    assert "rule predict_matbench" in message and not score.exists()


def test_a_record_without_its_outputs_digest_is_refused(tmp_path):
    preds = tmp_path / "preds.parquet"
    preds.write_bytes(b"x")
    JobRecord("matbench predict", "c0de", {}, [], [str(preds)], rule="predict_matbench").write_records(["x"], {})
    old = json.loads(record_path(preds).read_text())
    del old["sha256"]
    old["format"] = 1
    record_path(preds).write_text(json.dumps(old))
    with pytest.raises(identity.IdentityError, match="earlier crucible"):
        _job(tmp_path, {}, [preds], [tmp_path / "o"]).checked_input_names()


def test_job_env_round_trips(monkeypatch):
    env = identity.job_env("matbench", "score", {"matbench/model/dummy": "d"}, ["b", "a", "a"], ["o"])
    job = JobRecord.from_environ({identity.ENV_VAR: env})
    assert job.inputs == ["a", "b"] and job.outputs == ["o"] and job.code == job_code.code_digest("matbench", "score")
    with pytest.raises(identity.IdentityError, match=identity.ENV_VAR):
        JobRecord.from_environ({identity.ENV_VAR: "{not json"})


def test_names_cli_shows_and_forgets(tmp_path, capsys):
    from crucible.cli import main

    book_file = tmp_path / "names.json"
    NameBook({"crystal/settings": Meaning({"seed": 0}, "crystal")}).record(["crystal/settings"], book_file)
    assert main(["names", "show", "--book", str(book_file)]) == 0
    assert "crystal/settings" in capsys.readouterr().out
    assert main(["names", "forget", "crystal/settings", "--book", str(book_file)]) == 0
    assert main(["names", "forget", "crystal/settings", "--book", str(book_file)]) == 2


def test_no_rule_file_carries_a_version_param():
    for path in (REPO / "workflow" / "rules").glob("*.smk"):
        assert "CRUCIBLE_VERSION" not in path.read_text(), path


def test_every_family_declares_its_names():
    from crucible.dag import families

    for family in families.families():
        assert family.names is not families._no_names, family.name


def test_an_unused_custom_model_changes_no_job_param():
    from crucible.dag.config import fill_defaults
    from crucible.matbench import selection as mb_sel
    from crucible.matbench import workflow as mb

    config = {"matbench": {"tasks": ["matbench_steels"], "models": ["dummy", "gbm-magpie"]}}
    fill_defaults(config)
    before = {m: (mb.custom_model_arg(config, m), mb.model_params(config, m)) for m in mb_sel.models(config)}
    book = NameBook.of(config, [mb.FAMILY]).digests()
    config["matbench"]["custom_models"]["unused"] = {"class": "mymodels:Mine", "params": {}}
    assert {m: (mb.custom_model_arg(config, m), mb.model_params(config, m)) for m in mb_sel.models(config)} == before
    assert NameBook.of(config, [mb.FAMILY]).digests() == book


def test_a_variant_is_the_registered_model_with_its_own_params():
    from crucible.models.registry import MODELS, get_spec

    spec = get_spec("gbm-quick", {"gbm-quick": {"model": "gbm-magpie", "params": {"max_iter": 3}}})
    base = MODELS["gbm-magpie"]
    assert spec.name == "gbm-quick" and spec.device == base.device and spec.input_kind == base.input_kind
    assert spec.defaults["max_iter"] == 3
    with pytest.raises(ConfigError, match="either class"):
        get_spec("both", {"both": {"model": "gbm-magpie", "class": "a:B"}})


def test_records_live_beside_their_outputs():
    assert record_path("results/tables/x.csv") == Path("results/tables/.identity/x.csv.json")


def test_every_rule_hands_its_command_the_job_identity():
    """Each shell line of the rule files that runs a crucible command (downloads aside) begins with
    the job's identity (crucible.dag.rules.JOB_PREFIX): a rule without it would write no records."""
    import re

    from crucible.dag.rules import JOB_PREFIX

    missing = []
    for path in sorted((REPO / "workflow" / "rules").glob("*.smk")):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines[:-1]):
            if line.strip() == "shell:":
                first = lines[i + 1].strip().strip('"')
                if first.startswith("stage.shell("):  # built from the declaration with JOB_PREFIX
                    continue
                if not first.startswith(JOB_PREFIX) and not first.startswith("crucible sources"):
                    missing.append(f"{path.name}:{i + 2}")
                assert re.search(r"\bcrucible [a-z]", first), f"{path.name}:{i + 2} runs no crucible command"
    assert missing == []


# Identity per thing (issue 44): a job's code is its command's closure with the registry entries and
# user classes its names stand for, not every entry of the registry.
def _predict_digest(root, monkeypatch=None):
    return code_closure.digest(code_identity("matbench", "predict", (root,)))


def test_a_model_jobs_code_is_its_own_entry_not_the_registry(monkeypatch):
    from crucible.identity.job_code import entry_root

    roots = {
        m: entry_root("crucible.models.registry", m) for m in ("dummy", "gbm-magpie", "rf-magpie", "comp-transformer")
    }
    mods = {m: set(code_identity("matbench", "predict", (r,))["modules"]) for m, r in roots.items()}
    assert "crucible.models.trees" in mods["gbm-magpie"] and "crucible.models.trees" not in mods["dummy"]
    assert not any(m.startswith("crucible.models.comp_transformer") for m in mods["gbm-magpie"] | mods["dummy"])
    assert "crucible.models.comp_transformer.network" in mods["comp-transformer"]
    before = {m: _predict_digest(r) for m, r in roots.items()}
    # an edit of the gradient-boosting factory: the gbm jobs' code changes, rf's and dummy's do not
    import dataclasses

    real = code_closure._module

    def edited(module):
        info = real(module)
        if module != "crucible.models.trees":
            return info
        return dataclasses.replace(info, def_digests={**info.def_digests, "_gradient_boosting": "edited"})

    monkeypatch.setattr(code_closure, "_module", edited)
    code_identity.cache_clear()
    try:
        after = {m: _predict_digest(r) for m, r in roots.items()}
    finally:
        code_identity.cache_clear()
    assert {m for m in roots if after[m] != before[m]} == {"gbm-magpie"}


def test_replan_after_edit_reads_each_jobs_own_roots(tmp_path, capsys):
    """benchmarks/replan_after_edit.py counts a job by its command and the roots its CRUCIBLE_JOB
    carries, as the job itself does: a factory's edit replans that model's jobs alone."""
    import importlib.util
    import shlex

    from crucible.identity.job_code import entry_root
    from crucible.identity.records import JobCode, job_env

    spec = importlib.util.spec_from_file_location("replan", REPO / "benchmarks" / "replan_after_edit.py")
    replan = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(replan)
    lines = []
    for model in ("dummy", "gbm-magpie"):
        code = JobCode((entry_root("crucible.models.registry", model),))
        env = job_env("matbench", "predict", {f"matbench/model/{model}": "x"}, [], [f"{model}.parquet"], code)
        lines.append(f"CRUCIBLE_JOB={shlex.quote(env)} crucible matbench predict --model {model}")
    dry = tmp_path / "dry.txt"
    dry.write_text("\n".join(lines) + "\n")
    assert replan.main([str(dry), "crucible.models.trees:_gradient_boosting", "crucible.models.dummies"]) == 0
    out = capsys.readouterr().out
    assert "_gradient_boosting: 1 of 2 jobs replan" in out and "matbench/model/gbm-magpie (1)" in out
    assert "dummies: 1 of 2 jobs replan" in out and "matbench/model/dummy (1)" in out


def test_a_users_class_is_followed_through_the_users_modules(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "mymodels.py").write_text(
        "import numpy\nfrom helpers_of_mine import shift\n\nclass MyReg:\n    def predict(self, X):\n"
        "        return shift(X)\n\ndef unused():\n    return 0\n"
    )
    (tmp_path / "helpers_of_mine.py").write_text("def shift(x):\n    return x + 1.0\n")
    code_closure._find_module_file.cache_clear()
    code_closure._module.cache_clear()
    code_identity.cache_clear()
    root = job_code.class_root("mymodels:MyReg")
    first = code_identity("matbench", "predict", (root,))
    assert {"mymodels", "helpers_of_mine"} <= set(first["modules"]) and "numpy" in first["packages"]
    (tmp_path / "helpers_of_mine.py").write_text("def shift(x):\n    # why\n    return x + 1.0\n")
    code_closure._module.cache_clear()
    code_identity.cache_clear()
    assert code_identity("matbench", "predict", (root,)) == first  # a comment changes nothing
    (tmp_path / "helpers_of_mine.py").write_text("def shift(x):\n    return x + 100.0\n")
    code_closure._module.cache_clear()
    code_identity.cache_clear()
    assert code_identity("matbench", "predict", (root,))["modules"] != first["modules"]
    code_closure._module.cache_clear()
    code_identity.cache_clear()
