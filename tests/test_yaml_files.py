"""The strict YAML reader (crucible.core.yaml_files) and the strict JSON parse (crucible.core.strict_json), on the
cases of issue 46: alias bombs, repeated keys, self-aliases, python tags, lone surrogates, bad
bytes and size, in the loader, in config checking, at ``snakemake -n`` and in each reader that
a user's YAML or JSON reaches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crucible.core import reading, strict_json, yaml_files
from crucible.core.errors import ConfigError, CrucibleError, DataValidationError

from helpers import REPO, run_snakemake


def list_bomb(levels: int, n: int = 10) -> str:
    lines = ['lol0: &a0 ["lol"]']
    lines += [f"lol{i}: &a{i} [{', '.join([f'*a{i - 1}'] * n)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def mapping_bomb(levels: int, n: int = 10) -> str:
    lines = ["m0: &m0 {x: lol}"]
    lines += [f"m{i}: &m{i} {{{', '.join(f'k{j}: *m{i - 1}' for j in range(n))}}}" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


@pytest.fixture
def built(monkeypatch) -> list[int]:
    """How many documents the strict loader built (constructed into Python objects): a refusal
    that comes before any is built never paid for the expansion it refuses, on any machine."""
    calls: list[int] = []
    construct = yaml_files.StrictLoader.construct_document

    def counted(self, node):
        calls.append(1)
        return construct(self, node)

    monkeypatch.setattr(yaml_files.StrictLoader, "construct_document", counted)
    return calls


def _refusal(tmp_path: Path, text: str | bytes, name: str = "user.yaml") -> str:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(ConfigError) as info:
        yaml_files.load_yaml(path)
    assert str(info.value).startswith(f"{path}: "), info.value
    return str(info.value)


@pytest.mark.parametrize("make", [list_bomb, mapping_bomb])
@pytest.mark.parametrize("levels", [5, 10])
def test_an_alias_bomb_is_refused_before_it_is_built_naming_the_file(tmp_path, make, levels, built):
    # ten levels hung planning for minutes; five (513 bytes) took 74 s and were accepted
    message = _refusal(tmp_path, make(levels))
    assert "more than 50000 nodes once its aliases are expanded" in message
    assert yaml_files.MAX_NODES_ENV in message and built == []  # counted on the composed nodes, never expanded


def test_the_node_bound_is_raised_by_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "big.yaml"
    path.write_text(list_bomb(5))  # 211,117 nodes expanded
    with pytest.raises(ConfigError, match="more than 50000 nodes"):
        yaml_files.load_yaml(path)
    monkeypatch.setenv(yaml_files.MAX_NODES_ENV, "300000")
    assert len(yaml_files.load_yaml(path)["lol5"]) == 10


@pytest.mark.parametrize(
    "text, line, key",
    [
        ("method: mean\nstrategy: mean\nstrategy: median\n", 3, "strategy"),
        ("llm:\n  models:\n    a: {backend: openai, model: x, model: y}\n", 3, "model"),
        ("a:\n  b: 1\n  c: 2\n  b: 3\n", 4, "b"),
        ("1: one\n'1': text\n1: again\n", 3, 1),  # 1 and '1' are two keys; 1 twice is one repeated
    ],
)
def test_a_key_given_twice_is_refused_naming_file_line_and_key(tmp_path, text, line, key):
    message = _refusal(tmp_path, text)
    assert f": line {line}: key {key!r} is given twice in one mapping" in message


def test_a_merge_key_is_yamls_own_override_not_a_repeat(tmp_path):
    path = tmp_path / "merge.yaml"
    path.write_text("base: &b {x: 1, y: 2}\nrun:\n  <<: *b\n  x: 3\n")
    assert yaml_files.load_yaml(path)["run"] == {"x": 3, "y": 2}


@pytest.mark.parametrize(
    "text, expected",
    [
        ("a: &a {x: *a}\n", "line 1: a mapping or list that contains itself through an alias"),
        ("a: &a [1, *a]\n", "line 1: a mapping or list that contains itself through an alias"),
        ("a: !!python/object/apply:os.system ['true']\n", "the tag !!python/object/apply:os.system is not allowed"),
        ("a:\n  b: !!python/name:os.system\n", "line 2: the tag !!python/name:os.system is not allowed"),
        ('a: ok\nb: "\\ud800"\n', "line 2: not valid YAML (found invalid Unicode character escape code)"),
        ("a: 1\n---\nb: 2\n", "not valid YAML (but found another document)"),
        ("[" * 5000 + "]" * 5000, "line 1: not valid YAML"),
    ],
)
def test_self_aliases_python_tags_surrogates_and_bad_yaml_are_refused_by_line(tmp_path, text, expected):
    assert expected in _refusal(tmp_path, text)


def test_a_lone_surrogate_is_refused_by_the_pure_python_loader_too():
    # libyaml refuses the escape itself; PyYAML's own scanner makes a str of it, refused here
    import yaml

    class PureStrict(yaml.SafeLoader):
        pass

    PureStrict.add_constructor("tag:yaml.org,2002:str", yaml_files.StrictLoader.construct_yaml_str)
    with pytest.raises(yaml.YAMLError, match="lone surrogate"):
        yaml.load('a: "\\ud800"\n', Loader=PureStrict)


def test_bytes_that_are_not_utf8_and_files_past_the_bound_are_refused(tmp_path, monkeypatch):
    message = _refusal(tmp_path, b"a: 1\nb: caf\xe9\n")
    assert "line 2: not UTF-8 text" in message
    monkeypatch.setenv(reading.MAX_BYTES_ENV, "1")
    message = _refusal(tmp_path, "a: 1\n" + "# padding\n" * 200_000)
    assert "more than 1 MB" in message
    monkeypatch.delenv(reading.MAX_BYTES_ENV)
    assert yaml_files.max_bytes() == 16 * 2**20


def test_config_checking_bounds_a_config_built_elsewhere_without_expanding_it():
    # what Snakemake's loader builds from a bomb (shared lists): refused in the bound's steps
    import yaml

    from crucible.dag.config import check_config

    config = yaml.safe_load(list_bomb(10))  # 10**10 leaves as a tree: only a bounded walk ends
    with pytest.raises(ConfigError, match="config: more than 50000 keys and values once shared parts are expanded"):
        check_config(config)

    class Counted(list):
        visits = 0

        def __iter__(self):
            Counted.visits += 1
            return super().__iter__()

    level = Counted([1] * 10)
    for _ in range(9):
        level = Counted([level] * 10)
    with pytest.raises(ConfigError, match="more than 1000 keys and values"):
        yaml_files.check_expanded({"bomb": level}, "config", limit=1000)
    assert Counted.visits <= 1000  # stopped at the bound: never more lists opened than it allows


def _dup(text: str) -> str:
    return text + "\nduplicated: 1\nduplicated: 2\n"


YAML_READERS = {
    "config/sources.yaml": lambda p: __import__("crucible.sources.pins", fromlist=["x"]).load_sources(p),
    "config/published_matbench.yaml": lambda p: __import__(
        "crucible.matbench.leaderboard", fromlist=["x"]
    ).load_published(p),
    "config/published_crystal.yaml": lambda p: __import__("crucible.crystal.csp_table", fromlist=["x"]).load_published(
        p
    ),
    "config/crystal_prompts.yaml": lambda p: __import__("crucible.crystal.items", fromlist=["x"]).load_templates(p),
}


@pytest.mark.parametrize("name", sorted(YAML_READERS))
def test_every_yaml_reader_refuses_a_repeated_key_and_a_bomb_naming_the_file(tmp_path, name):
    original = (REPO / name).read_text(encoding="utf-8")
    path = tmp_path / Path(name).name
    path.write_text(original)
    YAML_READERS[name](path)  # the real file reads
    for text, expected in [(_dup(original), "key 'duplicated' is given twice"), (original + list_bomb(10), "nodes")]:
        path.write_text(text)
        with pytest.raises(ConfigError) as info:
            YAML_READERS[name](path)
        assert str(path) in str(info.value) and expected in str(info.value)


@pytest.mark.parametrize(
    "name, text",
    [
        ("config/sources.yaml", "just text\n"),
        ("config/sources.yaml", "artifacts: {a: text}\n"),
        ("config/sources.yaml", "artifacts: {a: {kind: http, url: u, filename: f, members: [x]}}\n"),
        (
            "config/sources.yaml",
            "artifacts: {a: {kind: http, url: u, filename: f, role: r, sha256: 12}}\ninstalled: [x]\n",
        ),
        ("config/published_matbench.yaml", "citation: c\nmodels: {}\nscores: 3\n"),
        ("config/published_crystal.yaml", "[1, 2]\n"),
        ("config/crystal_prompts.yaml", "templates: {t: text}\n"),
    ],
)
def test_a_yaml_file_of_the_wrong_shape_is_refused_naming_the_file(tmp_path, name, text):
    # what the fuzz found: a cut file's top or entry of another type was an AttributeError
    path = tmp_path / "user.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=str(path)):
        YAML_READERS[name](path)


def test_a_language_model_jobs_config_files_are_read_strictly(tmp_path):
    from crucible.llm.model_entry import entry_from_config_files

    path = tmp_path / "config.yaml"
    path.write_text(
        "llm:\n  models:\n    m: {backend: openai, base_url: 'http://127.0.0.1:9/v1', model: a, model: b}\n"
    )
    with pytest.raises(ConfigError, match=f"{path}: line 3: key 'model' is given twice"):
        entry_from_config_files([path], "m")
    for text in ["- a list\n", "llm: {models: [m]}\n"]:
        path.write_text(text)
        with pytest.raises(ConfigError, match=str(path)):
            entry_from_config_files([path], "m")


# ------------------------------------------------------------------------------------ JSON


def test_a_structured_answer_with_a_key_given_twice_is_invalid_not_the_last_option():
    from crucible.reactions.prompts import read_conditions_answer

    question = {"options": ["a", "b", "c"]}
    assert read_conditions_answer('{"answer": 2}', question) == (2, None)
    answer, why = read_conditions_answer('{"answer": 1, "answer": 2}', question)
    assert answer is None and "key 'answer' is given twice in one object" in why
    answer, why = read_conditions_answer('Sure. {"answer": 1, "answer": 2} answer: 2', question)
    assert answer is None and "given twice" in why


def test_a_crystal_answer_with_a_key_given_twice_is_a_parse_failure():
    from crucible.crystal.parsing import BAD_JSON, ParseFailure, parse_crystal_response

    one = {
        "lattice_parameters": {"a": 4.1, "b": 4.1, "c": 4.1},
        "atomic_sites": [{"element": "Cs", "coordinate": [0, 0, 0]}],
    }
    good = json.dumps(one)
    twice = good.replace('"c": 4.1', '"c": 4.1, "a": 9.0')
    python = twice.replace('"', "'")  # the Python-literal fallback keeps the last key too
    assert not isinstance(parse_crystal_response(good), ParseFailure)
    for text in [twice, f"```json\n{twice}\n```", f"<material>{python}</material>"]:
        got = parse_crystal_response(text)
        assert isinstance(got, ParseFailure) and got.reason == BAD_JSON and "'a' is given twice" in got.detail, text


def test_a_schema_check_of_replies_counts_a_key_given_twice_as_off_schema():
    from crucible.llm.files import Completion, Prompt
    from crucible.llm.schema_check import schema_violations

    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    prompts = [Prompt(id=i, messages=({"role": "user", "content": "q"},), response_schema=schema) for i in ("a", "b")]
    replies = [Completion(id="a", response='{"answer": 1}'), Completion(id="b", response='{"answer": 1, "answer": 2}')]
    assert schema_violations(prompts, replies) == ["b"]


def test_a_replay_file_with_a_lone_surrogate_is_refused_naming_file_line_and_field(tmp_path):
    # was accepted, then the job died with a bare UnicodeEncodeError
    from crucible.llm.files import read_replay

    path = tmp_path / "replay.jsonl"
    path.write_text('{"id": "a", "response": "ok"}\n{"id": "b", "response": "x\\ud800"}\n')
    with pytest.raises(DataValidationError, match=rf"^{path}: line 2: field response: text holds a lone surrogate"):
        read_replay(path, ["a", "b"])
    path.write_text('{"id": "a", "response": "\\ud83d\\ude00 \\\\ud800"}\n')  # a pair and an escaped backslash
    assert read_replay(path, ["a"])["a"].response == "\U0001f600 \\ud800"


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1, "a": 2}', "key 'a' is given twice"),
        ('{\n "a": "ok",\n "b": ["x", "\\udc00"]\n}', "line 3: field b[1]: text holds a lone surrogate"),
        ('{\n "k\\ud800": 1\n}', "line 2: field (the record): the key '\\\\ud800' holds a lone surrogate"),
    ],
)
def test_parse_json_refuses_repeats_and_lone_surrogates_by_line_and_field(text, expected):
    with pytest.raises(DataValidationError) as info:
        strict_json.parse_json(text, "f.json")
    message = str(info.value).replace("'k\\ud800'", "'\\\\ud800'")
    assert message.startswith("f.json: ") and expected in message, message
    message.encode("utf-8")  # the message itself can be printed


def test_a_model_spec_and_a_results_file_with_a_key_given_twice_are_refused(tmp_path):
    import gzip

    from crucible.llm.model_entry import model_entry
    from crucible.matbench.resultsfile import read_results_file

    with pytest.raises(ConfigError, match="--model-spec: key 'model' is given twice"):
        model_entry("m", spec_json='{"backend": "openai", "model": "a", "model": "b"}')
    path = tmp_path / "results.json.gz"
    path.write_bytes(gzip.compress(b'{"tasks": {}, "tasks": {}}'))
    with pytest.raises(CrucibleError, match=f"{path}: key 'tasks' is given twice"):
        read_results_file(path)


# ------------------------------------------------------------------------------- snakemake -n


def test_the_configfile_arguments_of_a_snakemake_command_line():
    argv = ["-n", "--configfile", "a.yaml", "b.yaml", "--cores", "2", "all", "--configfile=c.yaml"]
    assert yaml_files.configfile_args(argv) == ["a.yaml", "b.yaml", "c.yaml"]
    assert yaml_files.configfile_args(["--configfiles", "a.yaml", "--", "target"]) == ["a.yaml"]
    assert yaml_files.configfile_args(["--config", "x=1", "target", "-n"]) == []


def test_the_profiles_check_stops_on_a_bad_configfile_in_one_line(tmp_path, capsys, built):
    (tmp_path / "good.yaml").write_text("matbench: {tasks: [matbench_steels]}\n")
    (tmp_path / "bomb.yaml").write_text(mapping_bomb(10))
    yaml_files.check_configfile_args(["-n", "--configfile", str(tmp_path / "good.yaml"), str(tmp_path / "nothere")])
    before = len(built)
    with pytest.raises(SystemExit) as exit_:
        yaml_files.check_configfile_args(["--configfile", str(tmp_path / "good.yaml"), str(tmp_path / "bomb.yaml")])
    assert exit_.value.code == 1 and len(built) == before + 1  # good.yaml built; the bomb refused before it was
    err = capsys.readouterr().err
    assert err.startswith(f"crucible: config error: {tmp_path / 'bomb.yaml'}: line 6: more than 50000 nodes")
    assert len(err.splitlines()) == 1
    for profile in ("default", "slurm"):  # Snakemake runs the check as it loads either profile
        text = (REPO / "profiles" / profile / "config.yaml").read_text()
        assert "  - check_configfile_args()\n" in text, profile


@pytest.mark.slow
@pytest.mark.parametrize("case", ["bomb", "mapping-bomb", "duplicate"])
def test_snakemake_refuses_a_bad_config_file_before_planning(tmp_path, venv_env, case):
    # config/config.yaml of the working directory (the `configfile:`), and a --configfile; a bomb
    # of mappings in a --configfile hung in Snakemake's own merge of them before the Snakefile ran
    # (the profile's check reads them first)
    config_text = "matbench:\n  tasks: [matbench_steels]\n  models: [dummy]\n"
    if case == "bomb":
        (tmp_path / "config").mkdir()
        (tmp_path / "config" / "config.yaml").write_text(config_text + list_bomb(10))
        args, expected = (), "config/config.yaml: line 9: more than 50000 nodes"
    elif case == "mapping-bomb":
        (tmp_path / "user.yaml").write_text(config_text + mapping_bomb(10))
        args, expected = ("--configfile", str(tmp_path / "user.yaml")), "user.yaml: line 9: more than 50000 nodes"
    else:
        (tmp_path / "user.yaml").write_text(config_text + "  models: [gbm-magpie]\n")
        args, expected = ("--configfile", str(tmp_path / "user.yaml")), "user.yaml: line 4: key 'models' is given twice"
    # timeout: a hang guard only (a merge that expands the bomb runs for minutes)
    proc = run_snakemake(tmp_path, None, *args, "-n", env=venv_env, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and expected in out, out
    assert len(out.splitlines()) < 12, out


def test_json_is_yaml_here_too(tmp_path):
    # a config file may be JSON (Snakemake tries JSON first): the same strict reader takes it
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"matbench": {"tasks": ["matbench_steels"]}}))
    assert yaml_files.load_yaml(path) == {"matbench": {"tasks": ["matbench_steels"]}}
    path.write_text('{"matbench": {"tasks": [], "tasks": ["matbench_steels"]}}')
    with pytest.raises(ConfigError, match="key 'tasks' is given twice"):
        yaml_files.load_yaml(path)
