"""An overall deadline for one HTTP request, which no slow or trickling server can stretch.

The HTTP client's timeouts bound each socket operation, not the request: a server that sends
one byte a second never lets a read time out, and holds the request for as long as it likes.
Here every connect, read and write of the calling thread's request is given at most the time
left until its deadline, and refused once it has passed, so the request ends (as a timeout)
within the deadline plus one socket operation's latency.

The deadline lives in a thread-local because the synchronous client does each request's I/O
in the thread that asked for it; a pooled keep-alive connection therefore obeys whichever
request is using it at the moment.

The transport also bounds each reply's size (decoded, while it is read: crucible.core.bounded_body),
success and error bodies alike, before the client sees a byte of it.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import httpcore2
import httpx2

_local = threading.local()


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Every request the calling thread makes inside the block ends within ``seconds`` of entering it."""
    _local.end = time.monotonic() + float(seconds)
    try:
        yield
    finally:
        _local.end = None


def _budget(timeout: float | None, error: type[Exception]) -> float | None:
    end = getattr(_local, "end", None)
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise error("the request's overall deadline has passed")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore2.NetworkStream):
    def __init__(self, inner: httpcore2.NetworkStream):
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _budget(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _budget(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context, server_hostname=None, timeout=None) -> httpcore2.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _budget(timeout, httpcore2.ConnectTimeout)))

    def get_extra_info(self, info: str):
        return self._inner.get_extra_info(info)


class _Backend(httpcore2.NetworkBackend):
    def __init__(self, inner: httpcore2.NetworkBackend):
        self._inner = inner

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        budget = _budget(timeout, httpcore2.ConnectTimeout)
        return _Stream(self._inner.connect_tcp(host, port, budget, local_address, socket_options))

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        budget = _budget(timeout, httpcore2.ConnectTimeout)
        return _Stream(self._inner.connect_unix_socket(path, budget, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _BoundedStream(httpx2.SyncByteStream):
    def __init__(self, raw: httpx2.SyncByteStream, decoder):
        self._raw = raw
        self._decoder = decoder

    def __iter__(self) -> Iterator[bytes]:
        yield from self._decoder.decode(self._raw)

    def close(self) -> None:
        self._raw.close()


class DeadlineTransport(httpx2.HTTPTransport):
    """httpx2's transport, its connections wrapped so that :func:`deadline` applies to them, and
    each reply's body limited to ``max_body_bytes`` decoded (``what``: the server, for errors)."""

    def __init__(self, *, max_body_bytes: int | None = None, what: str = "the reply", fix: str = "", **kwargs):
        super().__init__(**kwargs)
        # httpx2 builds the connection pool without a way to pass a network backend; the
        # pool's backend is wrapped in place (a trickle test fails if this attribute moves).
        pool = self._pool
        pool._network_backend = _Backend(pool._network_backend)
        self.max_body_bytes = max_body_bytes
        self.what, self.fix = what, fix

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        from crucible.core.bounded_body import ACCEPT_ENCODING, BoundedDecoder

        if self.max_body_bytes is None:
            return super().handle_request(request)
        request.headers["Accept-Encoding"] = ACCEPT_ENCODING  # only what can be inflated with a bound
        response = super().handle_request(request)
        try:
            decoder = BoundedDecoder(self.max_body_bytes, response.headers.get("Content-Encoding"), self.what, self.fix)
            decoder.check_length(response.headers.get("Content-Length"))
        except Exception:
            response.close()
            raise
        # Decoded here, so the client must not decode again: the encoding and length go.
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _DECODED_HEADERS]
        return httpx2.Response(
            response.status_code,
            headers=headers,
            stream=_BoundedStream(response.stream, decoder),
            extensions=response.extensions,
            request=request,
        )


_DECODED_HEADERS = ("content-encoding", "content-length")


def environment_proxy(url: str) -> str | None:
    """The proxy the environment (``https_proxy``, ``no_proxy``, ...) names for ``url``, if any.

    A client given its own transport no longer reads these variables, so they are read here.
    """
    parts = urlsplit(url)
    if parts.hostname and urllib.request.proxy_bypass(parts.hostname):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")
