"""Every CLI command that runs torch (a potential or a network) asks for deterministic kernels
(crucible.core.torch_setup.configure_torch) before the first evaluation.

Each command of every CLI group is classified below, as running torch or not; a new command that
is in neither list fails :func:`test_every_cli_command_is_classified`, so nobody adds a command
without saying whether it runs torch (and, if it does, without a run here). Each torch command
runs in-process on a tiny input with ``configure_torch`` spied on and torch's deterministic mode
switched off beforehand; potentials are a registered probe (EMT) that records, at every
evaluation, whether deterministic kernels were already on.
"""

from __future__ import annotations

import argparse
import json

import pytest

torch = pytest.importorskip("torch", reason="absent on the Python 3.12 CI leg")

from ase.calculators.emt import EMT  # noqa: E402

from crucible.cli import GROUPS, group_parser, main  # noqa: E402
from crucible.core import torch_setup  # noqa: E402

# Commands that never run torch: tables, figures, data cleaning, scoring, fetching.
# `mlip models` only tries to load locally present hub weights, it evaluates nothing.
NO_TORCH = {
    ("sources", "extract"),
    ("sources", "fetch"),
    ("sources", "provide"),
    *(
        ("matbench", c)
        for c in (
            "clean",
            "figures",
            "folds",
            "import-predictions",
            "leaderboard",
            "results-file",
            "score",
            "tasks-table",
            "user-clean",
            "user-fetch",
            "user-folds",
            "user-score",
            "user-table",
        )
    ),
    *(("names", c) for c in ("forget", "record", "show")),
    ("features", "build"),
    ("features", "build-structures"),
    ("features", "version"),
    ("mlip", "eos-figures"),
    ("mlip", "eos-table"),
    ("mlip", "models"),
    ("mlip", "s2ef-table"),
    *(("reactions", c) for c in ("build", "clean", "package", "parse", "predict", "report", "score")),
    *(("catalysis", c) for c in ("clean", "demo", "fetch", "figures", "relative-table", "score", "tables")),
    *(
        ("crystal", c)
        for c in ("audit", "build-items", "csp-table", "figure", "sample-prompts", "score", "score-samples", "table")
    ),
    *(("discovery", c) for c in ("table", "curves-figure", "metrics-figure", "stability", "stability-table")),
    # κ_SRME after the forces: phono3py (numpy and C), scores, tables, figures
    *(("discovery", c) for c in ("kappa-conductivity", "kappa-score", "kappa-table", "kappa-figures")),
}

TORCH = [
    ("mlip", "eos"),
    ("discovery", "curves"),
    # κ_SRME's relaxation and force sets: the potential through load_potential, which configures torch first
    ("discovery", "kappa-relax"),
    ("discovery", "kappa-fc2"),
    ("discovery", "kappa-fc3"),
    ("mlip", "s2ef-predict"),
    ("catalysis", "relax"),
    ("catalysis", "relative"),
    ("crystal", "generate"),
    ("crystal", "sample"),
    ("crystal", "relax-samples"),
    ("features", "build-embeddings"),
    ("llm", "generate"),
    ("matbench", "predict"),
    ("matbench", "user-predict"),
]


def _commands() -> set[tuple[str, str]]:
    out = set()
    for group in GROUPS:
        parser = argparse.ArgumentParser()
        group_parser(group, parser)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                out |= {(group, name) for name in action.choices}
    return out


def test_every_cli_command_is_classified():
    commands = _commands()
    assert not NO_TORCH & set(TORCH)
    unclassified = sorted(commands - NO_TORCH - set(TORCH))
    assert not unclassified, f"say whether these run torch (and test them here if they do): {unclassified}"
    assert not (NO_TORCH | set(TORCH)) - commands, "classified commands that no longer exist"


class ProbeEMT(EMT):
    """EMT that records, at each evaluation, whether torch's deterministic kernels were on."""

    seen: list[bool] = []

    def calculate(self, *args, **kwargs):
        ProbeEMT.seen.append(torch.are_deterministic_algorithms_enabled())
        super().calculate(*args, **kwargs)


@pytest.fixture
def spied(monkeypatch):
    """configure_torch spied on (still doing its job), deterministic mode off, the probe potential registered."""
    from crucible.potentials.registry import REGISTRY
    from crucible.potentials.spec import PotentialSpec

    calls = []
    real = torch_setup.configure_torch

    def spy(threads=None, **kwargs):
        calls.append(threads)
        real(threads, **kwargs)

    before = (torch.are_deterministic_algorithms_enabled(), torch.get_num_threads())
    torch.use_deterministic_algorithms(False)
    monkeypatch.setattr(torch_setup, "configure_torch", spy)
    probe = PotentialSpec(
        name="probe", kind="builtin", description="EMT that records torch's mode", factory=lambda d: ProbeEMT()
    )
    monkeypatch.setitem(REGISTRY._specs, "probe", probe)
    ProbeEMT.seen = []
    yield calls
    torch.use_deterministic_algorithms(before[0])
    torch.set_num_threads(before[1])


def _run(argv):
    assert main(argv) == 0


def _potential_was_configured_first(calls):
    assert calls, "configure_torch was not called"
    assert ProbeEMT.seen and all(ProbeEMT.seen), "the potential ran before configure_torch"


def test_mlip_eos(spied, tmp_path):
    _run(
        ["mlip", "eos", "--model", "probe", "--elements", "Cu", "--points", "5", "--threads", "1"]
        + ["--out", str(tmp_path / "eos.parquet")]
    )
    _potential_was_configured_first(spied)
    assert spied[0] == 1


def test_mlip_s2ef_predict(spied, tmp_path):
    _run(
        [
            "mlip",
            "s2ef-predict",
            "--dataset",
            "ase-vasp-testdata",
            "--model",
            "probe",
            "--out",
            str(tmp_path / "p.parquet"),
        ]
    )
    _potential_was_configured_first(spied)


def test_catalysis_relax_and_relative(spied, tmp_path, catalysis_demo):
    from crucible.catalysis import demo

    reactions, db, card = (str(tmp_path / n) for n in ("r.parquet", "s.db", "card.json"))
    _run(
        ["catalysis", "clean", "--format", "catbench-json", "--input", str(catalysis_demo / "emt-demo_adsorption.json")]
        + ["--energy-source", demo.ENERGY_SOURCE, "--out", reactions, "--out-db", db, "--out-card", card]
    )
    assert not spied and not ProbeEMT.seen  # cleaning runs no potential
    _run(
        ["catalysis", "relax", "--reactions", reactions, "--db", db, "--model", "probe", "--chunk", "0"]
        + ["--n-chunks", "9", "--params", json.dumps({"seeds": 1, "max_steps": 3}), "--threads", "1"]
        + ["--out", str(tmp_path / "c.json")]
    )
    _potential_was_configured_first(spied)
    assert 1 in spied  # the job's threads reach torch
    torch.use_deterministic_algorithms(False)
    spied.clear(), ProbeEMT.seen.clear()
    _run(
        ["catalysis", "relative", "--task", "surface", "--input", str(catalysis_demo / "emt-demo_surface")]
        + ["--model", "probe", "--threads", "1", "--out", str(tmp_path / "rel.parquet")]
    )
    _potential_was_configured_first(spied)
    assert 1 in spied


def _cu_prompts(tmp_path):
    """One crystal item (fcc Cu, its space group given) in the prompts contract."""
    item = {
        "id": "cu-1",
        "messages": [{"role": "user", "content": "Cu"}],
        "meta": {
            "elements": ["Cu"],
            "element_counts": [1],
            "nsites": 1,
            "spacegroup_number": 225,
            "prompt_gives_spacegroup": True,
        },
    }
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps(item) + "\n")
    return prompts


def test_crystal_mlip_search(spied, tmp_path):
    prompts = _cu_prompts(tmp_path)
    params = {"model": "probe", "n_candidates": 1, "steps": 3, "fmax": 0.1}
    _run(
        ["crystal", "generate", "--generator", "mlip-search", "--prompts", str(prompts), "--params", json.dumps(params)]
        + ["--out", str(tmp_path / "r.jsonl"), "--out-info", str(tmp_path / "r.json")]
    )
    _potential_was_configured_first(spied)
    assert json.loads((tmp_path / "r.jsonl").read_text())["error"] is None


def test_crystal_mlip_search_samples(spied, tmp_path):
    """k samples per item (the CSP stage) relax through the same potential layer as generate."""
    prompts = _cu_prompts(tmp_path)
    params = {"model": "probe", "n_candidates": 2, "steps": 3, "fmax": 0.1}
    _run(
        ["crystal", "sample", "--generator", "mlip-search", "--prompts", str(prompts), "--params", json.dumps(params)]
        + ["--k", "2", "--out", str(tmp_path / "s.jsonl"), "--out-info", str(tmp_path / "s.json")]
    )
    _potential_was_configured_first(spied)
    assert (tmp_path / "s.jsonl").read_text().strip()


def test_crystal_relax_samples(spied, tmp_path):
    """Relax-then-match relaxes through the same potential layer: a strained fcc Cu sample."""
    from ase.build import bulk
    from pymatgen.io.ase import AseAtomsAdaptor

    from crucible.crystal.items import ground_truth

    cu = AseAtomsAdaptor.get_structure(bulk("Cu", "fcc", a=3.61))
    prompts = _cu_prompts(tmp_path)
    item = json.loads(prompts.read_text())
    prompts.write_text(json.dumps({**item, "ground_truth": ground_truth(cu)}) + "\n")
    strained = cu.copy()
    strained.scale_lattice(cu.volume * 1.1)
    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps({"id": "cu-1", "sample": 0, "cif": strained.to(fmt="cif")}) + "\n")
    _run(
        ["crystal", "relax-samples", "--prompts", str(prompts), "--samples", str(samples), "--potential", "probe"]
        + ["--k", "1", "--steps", "5", "--threads", "1", "--out", str(tmp_path / "r.jsonl")]
        + ["--out-info", str(tmp_path / "r.json")]
    )
    _potential_was_configured_first(spied)
    assert json.loads((tmp_path / "r.jsonl").read_text())["cif"]


@pytest.mark.slow
def test_features_build_embeddings(spied, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from ase.build import bulk
    from pymatgen.io.ase import AseAtomsAdaptor

    from crucible.features.mlip_embed import embed_cache_filename

    structures = [AseAtomsAdaptor.get_structure(bulk(el)).to_json() for el in ("Cu", "Al")]
    pq.write_table(pa.table({"structure": structures}), tmp_path / "data.parquet")
    _run(
        ["features", "build-embeddings", "--data", str(tmp_path / "data.parquet"), "--device", "cpu"]
        + ["--out", str(tmp_path / embed_cache_filename())]
    )
    assert spied and torch.are_deterministic_algorithms_enabled()


@pytest.mark.slow
def test_llm_generate_with_a_local_checkpoint(spied, tmp_path, tiny_causal_lm):
    from helpers import write_prompts

    prompts = write_prompts(tmp_path / "prompts.jsonl", ["one", "two"], system="answer")
    spec = {"backend": "transformers", "path": str(tiny_causal_lm), "batch_size": 2, "params": {"max_tokens": 3}}
    _run(
        ["llm", "generate", "--prompts", str(prompts), "--model", "tiny", "--model-spec", json.dumps(spec)]
        + ["--no-cache", "--out", str(tmp_path / "r.jsonl"), "--out-record", str(tmp_path / "r.json")]
    )
    assert spied and torch.are_deterministic_algorithms_enabled()


@pytest.fixture(scope="module")
def steels_inputs(tmp_path_factory, crabnet_wheel):
    """The real matbench_steels table, card and folds, and a small element table of our own."""
    from pymatgen.core.periodic_table import Element

    from crucible.matbench.clean import write_clean
    from crucible.matbench.folds import write_folds

    from helpers import clean_task

    out = tmp_path_factory.mktemp("steels")
    data, card, folds = clean_task("matbench_steels")
    write_clean(data, card, out / "data.parquet", out / "card.json")
    write_folds(folds, out / "folds.parquet")
    rows = [f"{el.symbol},{el.Z},{el.row},{el.group}" for el in list(Element)[:100]]
    (out / "elements.csv").write_text("element,z,row,group\n" + "\n".join(rows) + "\n")
    return out, out / "elements.csv"


TINY_NET = {"epochs": 1, "n_models": 1, "d_model": 8, "n_heads": 2, "n_layers": 1, "d_ff": 16, "device": "cpu"}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["predict", "user-predict"])
def test_matbench_predict_a_network(spied, tmp_path, steels_inputs, command):
    out, table = steels_inputs
    argv = ["matbench", command, "--model", "comp-transformer", "--fold", "0", "--data", str(out / "data.parquet")]
    # the table is the user's own (not a pinned one): the model's element_table names its path
    params = json.dumps({**TINY_NET, "element_table": str(table)})
    argv += ["--card", str(out / "card.json"), "--folds", str(out / "folds.parquet"), "--params", params]
    argv += ["--element-table", str(table), "--out", str(tmp_path / "fold_0.parquet")]
    if command == "predict":
        argv += ["--task", "matbench_steels"]
    _run(argv)
    assert spied and torch.are_deterministic_algorithms_enabled()


def test_a_model_that_runs_no_torch_is_not_made_to_import_it(spied):
    from crucible.models.registry import get_spec

    get_spec("dummy").build("regression", 0)
    assert not spied


def test_configure_torch_asks_for_deterministic_kernels():
    from crucible.core.torch_setup import configure_torch

    before = (torch.are_deterministic_algorithms_enabled(), torch.get_num_threads())
    try:
        configure_torch(1)
        assert torch.are_deterministic_algorithms_enabled() and torch.get_num_threads() == 1
    finally:
        torch.use_deterministic_algorithms(before[0])
        torch.set_num_threads(before[1])


FLUSHED = """
import sys
import torch
from crucible.potentials.registry import load_potential

name, process = sys.argv[1:3]
if process == "command":  # a `crucible` command's own process: main() from the command line
    from crucible.cli import main

    sys.argv = ["crucible", "mlip", "models"]  # loads no potential
    main()
custom = {"mine": {"class": "ase.calculators.emt:EMT", "device": "gpu"}}
load_potential(name, device="cpu", threads=1, custom=custom)
tiny = torch.tensor([1e-40], dtype=torch.float32)  # subnormal in float32
print(float((tiny * 1.0)[0]) == 0.0)
"""


@pytest.mark.parametrize(
    ("name", "process", "flushed"),
    [
        ("chgnet-0.3.0", "command", True),
        ("chgnet-0.3.0", "library", False),
        ("emt", "command", False),
        ("mine", "command", False),
    ],
)
def test_a_registered_neural_potential_flushes_subnormals_in_a_command_and_nowhere_else(name, process, flushed):
    """In a `crucible` command's process CHGNet flushes subnormal floats (its forces a third
    cheaper, equal to the last bit); EMT (numpy) and a user's own potential, even one declared for
    the GPU, run as they would in the user's own script, and so does CHGNet loaded as a library
    (a notebook's, this suite's process), which the process-wide setting would outlive. In a fresh
    process each."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", FLUSHED, name, process], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == str(flushed)
