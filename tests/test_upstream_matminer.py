"""The upstream (matminer) source's fetch against a local HTTP server on 127.0.0.1: a file that is
not matminer's stops it, naming both hashes. (The DAG on a local mirror built in matminer's own
format: test_workflow_matbench.py.)"""

from __future__ import annotations

import subprocess
import sys

from helpers import StaticFileServer


def test_matminer_hash_mismatch_stops_the_fetch(tmp_path, venv_env):
    www = tmp_path / "www"
    www.mkdir()
    (www / "matbench_steels.json.gz").write_bytes(b"not the upstream file")
    server = StaticFileServer(www)
    try:
        out = tmp_path / "dl" / "matbench_steels.json.gz"
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "crucible",
                "sources",
                "fetch",
                "--matminer-task",
                "matbench_steels",
                "--url-prefix",
                server.url,
                "--out",
                str(out),
            ],
            env=venv_env,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.close()
    assert proc.returncode == 2
    # The pinned hash is matminer's own (starts 473bc495); the message names both hashes.
    assert "SHA-256 mismatch for artifact 'matbench_steels'" in proc.stderr and "expected 473bc495" in proc.stderr
    assert not out.exists()
