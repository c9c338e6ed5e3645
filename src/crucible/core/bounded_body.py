"""An HTTP body read with a bound on its decoded size, enforced while it is read.

A server's reply is read chunk by chunk as it arrives; gzip and deflate are inflated here,
incrementally, never more than the bytes left under the limit at a time (``zlib``'s
``max_length``), so a 2 MB gzip stream that would inflate to 2 GB stops at the limit with
the limit's worth of memory. HTTP libraries' own decoders inflate a whole network chunk at once
(up to about a thousand times its size), hence the raw bytes and this decoder.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Iterator

from crucible.core.errors import CrucibleError

# What a client that reads through this module may accept: nothing it cannot inflate bounded.
ACCEPT_ENCODING = "gzip, deflate"


class BodyTooLargeError(CrucibleError):
    """A body (decoded) longer than its limit; raised before more than the limit is held."""


class UnsupportedEncodingError(CrucibleError):
    """A ``Content-Encoding`` other than gzip, deflate or identity (not asked for)."""


def mib(n: int) -> str:
    return f"{n / (1 << 20):g} MiB ({n} bytes)" if n >= 1 << 20 else f"{n} bytes"


class BoundedDecoder:
    """Feed raw chunks (:meth:`feed`), get decoded ones; ``limit`` decoded bytes at most.

    ``what`` names the body in errors (``the reply from http://host:8000/v1``), ``fix`` says
    which setting raises the limit.
    """

    def __init__(self, limit: int, content_encoding: str | None, what: str, fix: str = ""):
        self.limit = int(limit)
        self.what = what
        self.fix = fix
        self.total = 0
        codings = [c.strip().lower() for c in (content_encoding or "").split(",") if c.strip()]
        codings = [c for c in codings if c != "identity"]
        if len(codings) > 1 or (codings and codings[0] not in ("gzip", "x-gzip", "deflate")):
            raise UnsupportedEncodingError(
                f"{what}: Content-Encoding {content_encoding!r} was not asked for (crucible accepts "
                f"{ACCEPT_ENCODING} and identity, which it can inflate with a bound)"
            )
        self.coding = codings[0] if codings else None
        self._z = None
        if self.coding in ("gzip", "x-gzip"):
            self._z = zlib.decompressobj(zlib.MAX_WBITS | 16)
        elif self.coding == "deflate":
            self._z = zlib.decompressobj(zlib.MAX_WBITS)  # zlib-wrapped, as the RFC says
        self._raw_deflate_tried = False

    def _refuse(self) -> None:
        raise BodyTooLargeError(
            f"{self.what} is larger than the limit of {mib(self.limit)}"
            + (f" (after {self.coding} decoding)" if self.coding else "")
            + "; refused while reading it, nothing of it kept"
            + (f". {self.fix}" if self.fix else "")
        )

    def _count(self, piece: bytes) -> bytes:
        self.total += len(piece)
        if self.total > self.limit:
            self._refuse()
        return piece

    def check_length(self, content_length: str | None) -> None:
        """An undecoded body that announces more than the limit is refused before it is read."""
        if self.coding is None and content_length and content_length.strip().isdigit():
            if int(content_length) > self.limit:
                self._refuse()

    def feed(self, raw: bytes) -> bytes:
        if self._z is None:
            return self._count(raw)
        out = []
        data = raw
        while data:
            try:
                piece = self._z.decompress(data, self.limit - self.total + 1)
            except zlib.error as exc:
                if self.coding == "deflate" and not self._raw_deflate_tried and self.total == 0:
                    # some servers send raw deflate without the zlib wrapper (httpx does the same)
                    self._raw_deflate_tried = True
                    self._z = zlib.decompressobj(-zlib.MAX_WBITS)
                    continue
                raise CrucibleError(f"{self.what}: its {self.coding} stream is corrupt ({exc})") from None
            out.append(self._count(piece))
            data = self._z.unconsumed_tail
        return b"".join(out)

    def finish(self) -> bytes:
        if self._z is None:
            return b""
        return self._count(self._z.flush())

    def decode(self, chunks: Iterable[bytes]) -> Iterator[bytes]:
        for raw in chunks:
            piece = self.feed(raw)
            if piece:
                yield piece
        tail = self.finish()
        if tail:
            yield tail
