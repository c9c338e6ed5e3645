"""Integrity of what was fetched (issue 10, points 2 and 9): an extracted member edited after
extraction is refused where it is read, the task card's recorded hash must equal the pin, a
tampered file in place is moved aside (kept, named) and fetched again, a transfer cut short is
fetched again, and a download that fails its pin is kept aside and fails at once (issue 52)."""

from __future__ import annotations

import http.server
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from crucible.core.errors import HashMismatchError
from crucible.core.hashes import file_sha256
from crucible.matbench.tasks import METADATA_ROLE, VALIDATION_ROLE, mirror_role
from crucible.sources.downloads import fetch
from crucible.sources.pinned_files import find_pin

STEELS = mirror_role("matbench_steels")
STEELS_PIN = find_pin(STEELS).sha256
META_PIN = find_pin(METADATA_ROLE).sha256
VALIDATION_PIN = find_pin(VALIDATION_ROLE).sha256


def _crucible(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "crucible", *map(str, args)], env=env, capture_output=True, text=True, timeout=300
    )


def _swapped_steels(members, tmp_path):
    # The reproduction: two targets swapped. n and MAD stay the same.
    lines = Path(members[STEELS]).read_text().splitlines()
    a, b = lines[1].rsplit(",", 1), lines[2].rsplit(",", 1)
    lines[1], lines[2] = f"{a[0]},{b[1]}", f"{b[0]},{a[1]}"
    path = tmp_path / "edited" / "steels.csv"
    path.parent.mkdir()
    path.write_text("\n".join(lines) + "\n")
    return path


def _clean(raw, members, tmp_path, env, pin=STEELS_PIN):
    return _crucible(
        "matbench",
        "clean",
        "--task",
        "matbench_steels",
        "--source",
        "composition-mirror",
        "--raw",
        raw,
        "--raw-sha256",
        pin,
        "--metadata",
        members[METADATA_ROLE],
        "--out-data",
        tmp_path / "d.parquet",
        "--out-card",
        tmp_path / "d.json",
        env=env,
    )


def test_an_edited_member_is_refused_where_it_is_read(members, tmp_path, venv_env):
    proc = _clean(_swapped_steels(members, tmp_path), members, tmp_path, venv_env)
    assert proc.returncode == 2
    assert "steels.csv" in proc.stderr and STEELS_PIN in proc.stderr and "extract" in proc.stderr
    assert not (tmp_path / "d.parquet").exists()
    # The untouched member passes, and the card records exactly the pin.
    proc = _clean(members[STEELS], members, tmp_path, venv_env)
    assert proc.returncode == 0, proc.stderr
    card = json.loads((tmp_path / "d.json").read_text())
    assert card["raw_file"]["sha256"] == STEELS_PIN


def test_folds_refuse_a_card_whose_hash_is_not_the_pin(members, tmp_path, venv_env):
    assert _clean(members[STEELS], members, tmp_path, venv_env).returncode == 0
    card = json.loads((tmp_path / "d.json").read_text())
    card["raw_file"]["sha256"] = "0" * 64
    (tmp_path / "bad.json").write_text(json.dumps(card))
    args = [
        "matbench",
        "folds",
        "--task",
        "matbench_steels",
        "--data",
        tmp_path / "d.parquet",
        "--validation",
        members[VALIDATION_ROLE],
        "--raw-sha256",
        STEELS_PIN,
        "--out",
        tmp_path / "f.parquet",
    ]
    proc = _crucible(*args, "--card", tmp_path / "bad.json", env=venv_env)
    assert proc.returncode == 2 and "bad.json" in proc.stderr and STEELS_PIN in proc.stderr
    proc = _crucible(*args, "--card", tmp_path / "d.json", env=venv_env)
    assert proc.returncode == 0, proc.stderr
    # A validation file edited after extraction is refused too.
    edited = tmp_path / "validation.json"
    edited.write_bytes(Path(members[VALIDATION_ROLE]).read_bytes() + b" ")
    args[args.index(members[VALIDATION_ROLE])] = edited
    proc = _crucible(*args, "--card", tmp_path / "d.json", env=venv_env)
    assert proc.returncode == 2 and "validation.json" in proc.stderr and VALIDATION_PIN in proc.stderr


class _Server:
    """Serves a sequence of bodies for one path: what a flaky or tampering mirror does."""

    def __init__(self, bodies):
        self.bodies, self.hits = list(bodies), 0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = outer.bodies[min(outer.hits, len(outer.bodies) - 1)]
                outer.hits += 1
                # (bytes, n): a transfer cut short, n bytes announced, fewer sent, then closed
                body, announced = body if isinstance(body, tuple) else (body, len(body))
                self.send_response(200)
                self.send_header("Content-Length", str(announced))
                self.end_headers()
                self.wfile.write(body)
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/data.json.gz"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


GOOD = b"the real file\n" * 1000
SPEC = {"kind": "http", "filename": "data.json.gz", "sha256": __import__("hashlib").sha256(GOOD).hexdigest()}


@pytest.fixture
def no_backoff(monkeypatch):
    from crucible.sources import downloads

    monkeypatch.setattr(downloads, "BACKOFF_S", (0.0, 0.0))


def test_a_transfer_cut_short_is_fetched_again(tmp_path, no_backoff):
    server = _Server([(GOOD[:100], len(GOOD)), GOOD])
    try:
        dest = fetch("data", {**SPEC, "url": server.url}, tmp_path / "data.json.gz")
    finally:
        server.close()
    assert server.hits == 2 and file_sha256(dest) == SPEC["sha256"]
    assert not list(tmp_path.glob("data.json.gz.bad-*"))  # never a file: the transfer itself failed


def test_a_tampered_file_in_place_is_moved_aside_not_deleted(tmp_path):
    dest = tmp_path / "data.json.gz"
    dest.write_bytes(b"tampered")
    server = _Server([GOOD])
    try:
        fetch("data", {**SPEC, "url": server.url}, dest)
    finally:
        server.close()
    assert dest.read_bytes() == GOOD
    assert [p.read_bytes() for p in tmp_path.glob("data.json.gz.bad-*")] == [b"tampered"]


def test_a_download_that_fails_its_pin_fails_at_once_and_is_kept(tmp_path, no_backoff):
    server = _Server([b"wrong once", GOOD])
    try:
        with pytest.raises(HashMismatchError, match=r"data.*not fetched again.*data.json.gz.bad-"):
            fetch("data", {**SPEC, "url": server.url}, tmp_path / "data.json.gz")
    finally:
        server.close()
    assert server.hits == 1 and not (tmp_path / "data.json.gz").exists()
    assert [p.read_bytes() for p in tmp_path.glob("data.json.gz.bad-*")] == [b"wrong once"]


def test_a_git_blob_pinned_file_in_place_is_moved_aside_and_its_download_recorded(tmp_path):
    from crucible.sources.downloads import git_blob_id, read_lock

    (tmp_path / "good").write_bytes(GOOD)
    spec = {"kind": "http", "filename": "data.csv", "git_blob": git_blob_id(tmp_path / "good")}
    dest, lock = tmp_path / "data.csv", tmp_path / "sources.lock.json"
    dest.write_bytes(b"tampered")
    server = _Server([GOOD])
    try:
        fetch("data", {**spec, "url": server.url}, dest, lock=lock)
    finally:
        server.close()
    assert server.hits == 1 and dest.read_bytes() == GOOD
    assert [p.read_bytes() for p in tmp_path.glob("data.csv.bad-*")] == [b"tampered"]
    assert read_lock(lock) == {"data": {"sha256": SPEC["sha256"], "git_blob": spec["git_blob"], "url": server.url}}


def test_a_truncated_predictions_file_names_the_command_that_rebuilds_it(tmp_path):
    from crucible.core.errors import PredictionFileError
    from crucible.matbench.prediction_files import read_predictions

    path = tmp_path / "results/matbench/predictions/dummy/matbench_steels/fold_0.parquet"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"PAR1 truncated")
    with pytest.raises(
        PredictionFileError, match=r"not a readable parquet file.*rebuild it.*snakemake .*fold_0.parquet"
    ):
        read_predictions(path, "regression", ["a"], 0)
