"""Shared fixtures. The plain helpers and constants they wrap live in tests/helpers.py (import
them from there, not from this file); a few names are re-exported here for older imports.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from helpers import (  # noqa: F401  (re-exported, and used by the fixtures below)
    PUBLISHED_DUMMY_MAE,
    REPO,
    SOURCES_FILE,
    TEST_FOLD_SIZES,
    ChatServer,
    aflow_prototypes_file,
    archive_file,
    cache_root,
    clean_task,
    matbench_members,
    write_prompts,
)
from helpers import official_validation as _validation
from helpers import task_formulas as _task_formulas

# The suite downloads from a package registry or 127.0.0.1 only (crucible.sources.downloads refuses
# any other host while CRUCIBLE_OFFLINE is set): a test, DAG job or CLI run that reaches for GitHub
# or figshare fails here, in CI and on a fresh clone alike (issue 52). Its subprocesses inherit it.
os.environ["CRUCIBLE_OFFLINE"] = "1"

# A test is marked `network` when it reaches a helper declared @downloads (tests/helpers.py), by
# calling it, through a fixture, or through a function of its module: nothing to keep in sync here.
# `pytest -m "not network"` then runs with every HTTP(S) proxy pointed at a closed local port, so a
# test that still goes online fails instead of passing on a machine that happens to have a network.
OFFLINE_PROXY = "http://127.0.0.1:9"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy")


def _test_suite_function(obj) -> bool:
    module = getattr(obj, "__module__", "") or ""
    return module in ("helpers", "conftest") or module.split(".")[-1].startswith("test_")


def reaches_download(obj, seen: set[int] | None = None) -> bool:
    """Whether calling ``obj`` (a test-suite function) may run a helper declared @downloads."""
    import helpers

    seen = set() if seen is None else seen
    if getattr(obj, "downloads", False) or getattr(getattr(obj, "__wrapped__", None), "downloads", False):
        return True
    fn = getattr(obj, "__wrapped__", obj)
    code = getattr(fn, "__code__", None)
    if code is None or id(fn) in seen or not _test_suite_function(fn):
        return False
    seen.add(id(fn))
    names, stack = set(), [code]
    while stack:  # the function's own names and those of its lambdas and comprehensions
        c = stack.pop()
        names |= set(c.co_names)
        stack += [k for k in c.co_consts if hasattr(k, "co_names")]
    scopes = (fn.__globals__, vars(helpers))
    for name in names:
        for scope in scopes:
            target = scope.get(name)
            if callable(target) and reaches_download(target, seen):
                return True
    return False


def pytest_configure(config):
    # file digests (crucible.core.fingerprint) are cached in a folder of this run, never in ~/.cache
    if "CRUCIBLE_HASH_CACHE" not in os.environ:
        config._crucible_hash_cache = tempfile.mkdtemp(prefix="crucible-hash-cache-")
        os.environ["CRUCIBLE_HASH_CACHE"] = config._crucible_hash_cache
    if "not network" in (config.option.markexpr or ""):
        os.environ.update(dict.fromkeys(PROXY_VARS, OFFLINE_PROXY))
        os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"


def pytest_unconfigure(config):
    # the run's own cache folder goes with the run: one was left in /tmp per test run
    folder = getattr(config, "_crucible_hash_cache", None)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


# The modules that take minutes, longest first (`--durations` at dd13d24, two workers, 2 cores):
# started first, so that the two `make test` workers end together instead of one running the SLURM
# check alone at the end.
LONGEST_FIRST = (
    "test_workflow_slurm.py",
    "test_workflow.py",
    "test_workflow_identity_dynamic.py",
    "test_workflow_contract.py",
    "test_workflow_determinism.py",
    "test_workflow_compose.py",
    "test_workflow_verify.py",
    "test_sources_tampering.py",
    "test_workflow_paths.py",
    "test_workflow_matbench.py",
    "test_workflow_crystal.py",
    "test_workflow_discovery.py",
    "test_workflow_identity.py",
    "test_workflow_llm.py",
    "test_workflow_custom_potentials.py",
    "test_workflow_catalysis.py",
)


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
    for item in items:
        fixtures = getattr(item, "_fixtureinfo", None)
        funcs = [getattr(item, "function", None)]
        if fixtures is not None:
            funcs += [defs[-1].func for defs in fixtures.name2fixturedefs.values() if defs]
        if any(f is not None and reaches_download(f) for f in funcs):
            item.add_marker(pytest.mark.network)


@pytest.fixture(scope="session")
def members() -> dict[str, Path]:
    return matbench_members()


@pytest.fixture(scope="session")
def official_validation():
    return _validation()


@pytest.fixture(scope="session")
def crabnet_wheel() -> Path:
    """The composition mirror's wheel (crabnet), fetched and hash-checked by crucible's own fetch stage."""
    from crucible.matbench.tasks import TASKS, mirror_role

    return archive_file(mirror_role(TASKS[0]))


@pytest.fixture(scope="session")
def task_formulas() -> dict[str, list[str]]:
    """{task: formulas in file order}, straight from the crabnet wheel."""
    return _task_formulas()


@pytest.fixture(scope="session")
def venv_env() -> dict[str, str]:
    """Environment for subprocesses: this interpreter's scripts (crucible, snakemake) on PATH, and
    CRUCIBLE_OFFLINE=1 (above): every DAG and CLI run of the tests downloads from a package
    registry or 127.0.0.1 only."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["CRUCIBLE_OFFLINE"] = "1"
    return env


@pytest.fixture
def chat_server():
    server = ChatServer()
    yield server
    server.close()


@pytest.fixture(scope="session")
def tiny_causal_lm(tmp_path_factory) -> Path:
    return build_tiny_causal_lm(tmp_path_factory.mktemp("tiny-gpt2"))


def build_tiny_causal_lm(out: Path) -> Path:
    """A randomly initialised 2-layer GPT-2 with a word-level tokenizer and chat template,
    built here (nothing downloaded) and saved as an ordinary checkpoint directory."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    words = (
        "the a of crystal reaction yield catalyst base solvent ligand answer is and with to in "
        "temperature high low best structure formula oxide metal cubic phase"
    ).split()
    specials = ["<pad>", "<unk>", "<eos>"]
    roles = ["<|system|>", "<|user|>", "<|assistant|>"]
    vocab = {t: i for i, t in enumerate(specials + roles + words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.decoder = decoders.WordPiece(prefix="##")
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<eos>")
    fast.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|> {% endif %}"
    )
    fast.save_pretrained(out)
    torch.manual_seed(0)
    # A wide initialisation, so that greedy decoding does not collapse onto one token and the
    # batched-versus-single comparison in the tests has something to compare.
    config = GPT2Config(
        vocab_size=len(vocab),
        n_positions=256,
        n_embd=32,
        n_layer=2,
        n_head=2,
        initializer_range=0.5,
        bos_token_id=2,
        eos_token_id=2,
        pad_token_id=0,
    )
    GPT2LMHeadModel(config).save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def catalysis_demo(tmp_path_factory) -> Path:
    """The EMT-labelled catalysis demo set in every format (CatBench JSON, Catalysis-Hub raw,
    VASP trees for adsorption, surface and bulk-formation energies)."""
    from crucible.catalysis import demo

    out = tmp_path_factory.mktemp("catalysis_demo")
    demo.main([str(out)])
    return out


# ---- crystal benchmark -------------------------------------------------------------------


@pytest.fixture(scope="session")
def aflow_file() -> Path:
    return aflow_prototypes_file()


CSCL = {  # OpenCompass MP-20 test vector: cubic 4.12 Å, Cs at the origin, Cl at the body centre
    "lattice": [[4.12, 0.0, 0.0], [0.0, 4.12, 0.0], [0.0, 0.0, 4.12]],
    "sites": [
        {"element": "Cs", "fractional_coordinates": [0.0, 0.0, 0.0]},
        {"element": "Cl", "fractional_coordinates": [0.5, 0.5, 0.5]},
    ],
}


@pytest.fixture
def cscl_ground_truth() -> dict:
    import copy

    return copy.deepcopy(CSCL)
