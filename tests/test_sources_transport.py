"""A download's failures through the real download code (issue 52): a local server on 127.0.0.1
that answers 404, 503, nothing at all, or refuses the connection, and a host name that does not
resolve. What may pass on another try (a timeout, a 5xx) is retried a bounded number of times;
what cannot (an unknown host, a refused connection, a 4xx) fails at once. Every error names the
URL, the cause and the config keys that fix it. CRUCIBLE_OFFLINE=1 refuses any host but a package
registry and this machine before connecting."""

from __future__ import annotations

import http.server
import socket
import threading

import pytest

from crucible.core.errors import CrucibleError
from crucible.sources import downloads

GOOD = b"pinned bytes\n" * 100
SPEC = {
    "kind": "http",
    "filename": "card.yml",
    "sha256": __import__("hashlib").sha256(GOOD).hexdigest(),
    "mirror_config": "discovery.url_prefix",
    "mirror_path": "models/x/card.yml",
    "upstream_config": "discovery.fetch_upstream",
}


class _Server:
    """Answers each GET with the next of ``script``: an HTTP status, ``"hang"`` (reads the
    request, never answers) or ``"ok"`` (the good body); counts the requests."""

    def __init__(self, script):
        self.script, self.hits, self.release = list(script), 0, threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                step = outer.script[min(outer.hits, len(outer.script) - 1)]
                outer.hits += 1
                if step == "hang":
                    outer.release.wait(30)  # the client gives up first; close() lets it go
                    return
                body = GOOD if step == "ok" else b"no"
                self.send_response(200 if step == "ok" else step)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/models/x/card.yml"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def fast(monkeypatch):
    """No waits between attempts, a short timeout, and the attempts counted (the real code runs)."""
    monkeypatch.setattr(downloads, "BACKOFF_S", (0.0, 0.0))
    monkeypatch.setattr(downloads, "HTTP_TIMEOUT_S", 0.5)
    monkeypatch.delenv(downloads.OFFLINE_VAR, raising=False)
    calls = []
    real = downloads._http_download

    def counted(spec, workdir, timeout=None):
        calls.append(spec["url"])
        return real(spec, workdir, timeout)

    monkeypatch.setattr(downloads, "_http_download", counted)
    return calls


def _serve(script):
    server = _Server(script)
    return server, {**SPEC, "url": server.url}


def test_a_404_fails_at_once_naming_the_url_and_the_keys_to_set(tmp_path, fast):
    server, spec = _serve([404, "ok"])
    try:
        with pytest.raises(CrucibleError) as err:
            downloads.fetch("card", spec, tmp_path / "card.yml")
    finally:
        server.close()
    assert server.hits == 1 and len(fast) == 1
    text = str(err.value)
    assert spec["url"] in text and "HTTP 404" in text and "not retried" in text
    assert "discovery.fetch_upstream: false" in text and "discovery.url_prefix" in text
    assert "resources/downloads/card.yml" in text
    assert not (tmp_path / "card.yml").exists()


def test_a_503_is_retried_and_the_second_answer_kept(tmp_path, fast):
    server, spec = _serve([503, "ok"])
    try:
        dest = downloads.fetch("card", spec, tmp_path / "card.yml")
    finally:
        server.close()
    assert server.hits == 2 and dest.read_bytes() == GOOD


def test_a_server_that_never_answers_is_tried_a_bounded_number_of_times(tmp_path, fast):
    server, spec = _serve(["hang"])
    try:
        with pytest.raises(
            CrucibleError, match=rf"no answer within the timeout \({downloads.HTTP_ATTEMPTS} attempts\)"
        ):
            downloads.fetch("card", spec, tmp_path / "card.yml")
    finally:
        server.close()
    assert server.hits == downloads.HTTP_ATTEMPTS == len(fast)


def test_a_refused_connection_is_not_retried(tmp_path, fast):
    with socket.socket() as sock:  # a port that was free a moment ago: nothing listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    spec = {**SPEC, "url": f"http://127.0.0.1:{port}/models/x/card.yml"}
    with pytest.raises(CrucibleError, match="the connection was refused \\(not retried\\)"):
        downloads.fetch("card", spec, tmp_path / "card.yml")
    assert len(fast) == 1


def test_a_host_name_that_does_not_resolve_is_tried_once(tmp_path, fast):
    spec = {**SPEC, "url": "http://crucible-does-not-exist.invalid/x"}
    with pytest.raises(CrucibleError) as err:
        downloads.fetch("card", spec, tmp_path / "card.yml")
    assert len(fast) == 1
    assert "does not resolve" in str(err.value) and "not retried" in str(err.value)
    assert "http://crucible-does-not-exist.invalid/x" in str(err.value)


def test_offline_refuses_every_host_but_a_registry_and_this_machine(tmp_path, fast, monkeypatch):
    monkeypatch.setenv(downloads.OFFLINE_VAR, "1")
    server, spec = _serve(["ok"])
    try:
        assert downloads.fetch("card", spec, tmp_path / "card.yml").read_bytes() == GOOD  # 127.0.0.1
    finally:
        server.close()
    github = {**SPEC, "url": "https://raw.githubusercontent.com/janosh/matbench-discovery/x/models/x/card.yml"}
    with pytest.raises(CrucibleError, match="CRUCIBLE_OFFLINE is set.*not raw.githubusercontent.com"):
        downloads.fetch("card", github, tmp_path / "other" / "card.yml")
    assert len(fast) == 2  # refused in the one attempt, never retried
    assert downloads._offline_refusal("https://files.pythonhosted.org/packages/x.tar.gz") is None


def test_classify_sorts_what_another_try_may_fix():
    import requests

    def http_error(status):
        resp = requests.Response()
        resp.status_code, resp.reason = status, "x"
        return requests.HTTPError(response=resp)

    assert downloads.classify(http_error(404))[1] is False
    assert downloads.classify(http_error(403))[1] is False
    assert downloads.classify(http_error(500))[1] is True and downloads.classify(http_error(429))[1] is True
    assert downloads.classify(requests.ReadTimeout("slow"))[1] is True
    assert downloads.classify(requests.ConnectionError(socket.gaierror(-2, "Name or service not known"))) == (
        "the host name does not resolve (no DNS, or no network beyond the package registries)",
        False,
    )
