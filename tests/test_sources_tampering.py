"""A pinned input edited after extraction stops the rule that reads it, through the real DAG
(issue 20's tampering cases): it never changes a score with exit 0. Each case builds its target,
edits the extracted file as a user (or an attacker) would, rebuilds, and expects the job to stop
naming the file and both hashes; then deletes the file, as the message says, and gets the first
run's bytes back.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from crucible.core.hashes import file_sha256
from crucible.sources.pinned_files import find_pin, resource_path

from helpers import StaticFileServer, archive_file, run_snakemake, write_li_o_dataset

pytestmark = pytest.mark.slow

# A small Matbench section beside the family under test (the targets below never build its
# outputs): the pin checks hold in a config of several families too.
MATBENCH_STUB = {"tasks": ["matbench_steels"], "models": ["dummy"]}


def _seed_downloads(workdir: Path, *roles: str) -> None:
    """The archives the roles come from, copied from the test cache (the fetch rule checks them
    and does not download again)."""
    downloads = workdir / "resources" / "downloads"
    downloads.mkdir(parents=True, exist_ok=True)
    for role in roles:
        archive = archive_file(role)
        (downloads / archive.name).write_bytes(archive.read_bytes())


def _assert_stopped(proc, workdir: Path, log: str, member: Path, pin: str) -> None:
    """The run failed, and the job's log names the file, its pin, its new hash and the remedy."""
    assert proc.returncode != 0, proc.stderr[-3000:]
    text = (workdir / log).read_text()
    assert str(member) in text and pin in text and file_sha256(workdir / member) in text, text[-3000:]
    assert "Delete it and rerun" in text


def test_edited_yields_stop_the_reactions_table(tmp_path, venv_env):
    role = "reactions/deoxyfluorination"
    config = {
        "matbench": MATBENCH_STUB,
        "mlip": {"models": []},
        "reactions": {"datasets": ["deoxyfluorination"], "models": ["random", "popularity"], "bootstrap": {"n": 200}},
    }
    _seed_downloads(tmp_path, role)
    table = "results/tables/reactions_deoxyfluorination.csv"
    proc = run_snakemake(tmp_path, config, table, env=venv_env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    before = (tmp_path / table).read_bytes()

    # the edit: every 7th yield set to 0.99 (exit 0 and popularity 0.8254 -> 0.3689 before)
    member = resource_path(role)
    path = tmp_path / member
    lines = path.read_text().splitlines()
    header = lines[0].split(",")
    col = header.index("yield")
    for i in range(1, len(lines), 7):
        cells = lines[i].split(",")
        cells[col] = "0.99"
        lines[i] = ",".join(cells)
    path.write_text("\n".join(lines) + "\n")
    proc = run_snakemake(tmp_path, config, table, env=venv_env)
    _assert_stopped(proc, tmp_path, "logs/reactions/clean_deoxyfluorination.log", member, find_pin(role).sha256)
    assert (tmp_path / table).read_bytes() == before

    # What the message says. The failed job's outputs are gone, so asking for them (the table
    # alone is up to date: nothing changed it) extracts the table again and rebuilds from it.
    path.unlink()
    proc = run_snakemake(tmp_path, config, table, "results/reactions/data/deoxyfluorination.parquet", env=venv_env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "extract_member" in proc.stdout + proc.stderr and file_sha256(path) == find_pin(role).sha256
    assert (tmp_path / table).read_bytes() == before


def _table_bytes(workdir: Path) -> list[bytes]:
    """The crystal table in all its formats, whole: it has no timing column (the generation time
    is in the sidecars), so a rebuild from the same inputs gives the same bytes."""
    return [(workdir / f"results/tables/crystal_aflow-prototypes.{ext}").read_bytes() for ext in ("csv", "md", "tex")]


def _edit_prototypes(path: Path, how: str) -> None:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        entries = json.load(fh)
    if how == "drop-half":
        entries = entries[::2]
    else:  # scale every lattice by 1.1
        for entry in entries:
            entry["snl"]["lattice"]["matrix"] = [[1.1 * x for x in row] for row in entry["snl"]["lattice"]["matrix"]]
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        json.dump(entries, fh)


def test_edited_aflow_prototypes_stop_the_crystal_items(tmp_path, venv_env):
    role = "crystal/aflow-prototypes"
    config = {
        "matbench": MATBENCH_STUB,
        "mlip": {"models": []},
        "crystal": {"datasets": ["aflow-prototypes"], "generators": ["template"], "max_test_items": 10},
    }
    _seed_downloads(tmp_path, role)
    target = "results/tables/crystal_aflow-prototypes.csv"
    proc = run_snakemake(tmp_path, config, target, env=venv_env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    before = _table_bytes(tmp_path)
    member = resource_path(role)
    for how in ("drop-half", "scale-lattices"):  # match rate 3.33 -> 0 with exit 0, before
        _edit_prototypes(tmp_path / member, how)
        proc = run_snakemake(tmp_path, config, target, env=venv_env)
        log = "logs/crystal/aflow-prototypes/build_items.log"
        _assert_stopped(proc, tmp_path, log, member, find_pin(role).sha256)
        assert _table_bytes(tmp_path) == before, how
        (tmp_path / member).unlink()  # extracted again with the failed job's outputs, then rebuilt
        proc = run_snakemake(tmp_path, config, target, "results/crystal/aflow-prototypes/prompts.jsonl", env=venv_env)
        assert proc.returncode == 0, proc.stderr[-4000:]
        assert file_sha256(tmp_path / member) == find_pin(role).sha256
        assert _table_bytes(tmp_path) == before, how


def test_an_edited_element_table_stops_predict_and_user_predict(tmp_path, venv_env):
    """The same pinned table behind `matbench predict` and `matbench user-predict` (which did
    not check it before)."""
    role = "element-table/mat2vec"
    www = tmp_path / "www"
    www.mkdir()
    raw = write_li_o_dataset(www / "li_o.json.gz")
    server = StaticFileServer(www)
    tiny = {"epochs": 2, "n_models": 1, "d_model": 16, "n_heads": 2, "n_layers": 1, "d_ff": 32, "device": "cpu"}
    config = {
        "matbench": {
            "tasks": ["matbench_steels"],
            "models": ["comp-transformer"],
            "model_params": {"comp-transformer": tiny},
            "user_datasets": {
                "li_o_band_gap": {
                    "url": f"{server.url}/li_o.json.gz",
                    "sha256": file_sha256(raw),
                    "input": "structure",
                    "target": "band_gap",
                    "task_type": "regression",
                }
            },
        },
        "mlip": {"models": []},
    }
    work = tmp_path / "run"
    _seed_downloads(work, role, "matbench/mirror/matbench_steels")
    official = "results/matbench/predictions/comp-transformer/matbench_steels/fold_0.parquet"
    user = "results/matbench/user/li_o_band_gap/predictions/comp-transformer/fold_0.parquet"
    try:
        proc = run_snakemake(work, config, official, user, env=venv_env)
        assert proc.returncode == 0, proc.stderr[-4000:]
        before = {p: (work / p).read_bytes() for p in (official, user)}
        member = resource_path(role)
        path = work / member
        lines = path.read_text().splitlines()
        cells = lines[5].split(",")
        cells[1] = str(float(cells[1]) + 0.5)  # one feature of one element
        lines[5] = ",".join(cells)
        path.write_text("\n".join(lines) + "\n")
        proc = run_snakemake(work, config, official, user, "--keep-going", env=venv_env)
        pin = find_pin(role).sha256
        for log in (
            "logs/matbench/predict/comp-transformer/matbench_steels/fold_0.log",
            "logs/matbench/user/li_o_band_gap/predict/comp-transformer/fold_0.log",
        ):
            _assert_stopped(proc, work, log, member, pin)
        path.unlink()
        proc = run_snakemake(work, config, official, user, env=venv_env)
        assert proc.returncode == 0, proc.stderr[-4000:]
    finally:
        server.close()
    assert {p: (work / p).read_bytes() for p in (official, user)} == before
