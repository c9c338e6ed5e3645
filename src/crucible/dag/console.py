"""The console's job lines: Snakemake's "Reason:" cut to one readable line, in full in its log.

Snakemake prints with every job why it runs; for an aggregate job (``all``, a table of many
inputs) that is every updated input, one line of thousands of characters (the ``all`` job of the
default config: 20,156). Snakemake's own switch (``--quiet reason``) is read by the console and
the log file alike, so it would drop the reasons from ``.snakemake/log/`` too; its logger plugins
(``snakemake-interface-logger-plugins``) replace the console handler whole. So
:func:`shorten_reasons` wraps the formatter of Snakemake's console handler alone: a reason longer
than :data:`REASON_LIMIT` characters is cut there, with where the full text is, and the log
file's handler, which formats each record itself, keeps it whole.
"""

from __future__ import annotations

import copy
import logging
import re
from typing import Any

# Characters of a reason shown in the console: one terminal line and a bit
REASON_LIMIT = 200
CONSOLE_HANDLER = "DefaultStreamHandler"  # snakemake.logging.LoggerManager's names for its handlers
LOGFILE_HANDLER = "DefaultLogFileHandler"
_SEPARATOR = re.compile(r"[,;] ")  # between the files of a reason, and between its parts


def short_reason(reason: str, limit: int = REASON_LIMIT, where: str = ".snakemake/log/") -> str:
    """``reason`` when it is at most ``limit`` characters; else its first ``limit`` characters, cut
    after the last whole item of its lists (``a, b; c``) where there is one, and what was left out."""
    if len(reason) <= limit:
        return reason
    head = reason[:limit]
    cuts = [m.start() for m in _SEPARATOR.finditer(head) if m.start() > limit // 4]
    if not cuts:
        return f"{head} … ({len(reason) - limit:,} more characters; in full in {where})"
    left = reason[cuts[-1] :]
    return f"{head[: cuts[-1]]}, … ({len(_SEPARATOR.findall(left)):,} more; in full in {where})"


class ShortReasonFormatter(logging.Formatter):
    """Formats as ``inner`` does, with each job's reason cut by :func:`short_reason`."""

    def __init__(self, inner: logging.Formatter, logger: logging.Logger, limit: int = REASON_LIMIT):
        super().__init__()
        self.inner = inner
        self.logger = logger
        self.limit = limit

    def _logfile(self) -> str:
        import os

        for handler in self.logger.handlers:
            if getattr(handler, "name", None) == LOGFILE_HANDLER and getattr(handler, "baseFilename", None):
                return os.path.relpath(handler.baseFilename)
        return ".snakemake/log/"

    def format(self, record: logging.LogRecord) -> str:
        reason: Any = getattr(record, "reason", None)
        if isinstance(reason, str) and len(reason) > self.limit:
            record = copy.copy(record)
            record.reason = short_reason(reason, self.limit, self._logfile())
        return self.inner.format(record)


def shorten_reasons(logger: logging.Logger | None = None, limit: int = REASON_LIMIT) -> bool:
    """Cut long reasons in Snakemake's console handler (not in its log file); True when it found
    the handler (none: a logger plugin prints instead, left as it is). Called by the Snakefile,
    once Snakemake has set its handlers up; calling it again changes nothing."""
    if logger is None:
        from snakemake.logging import logger as snakemake_logger

        logger = snakemake_logger
    found = False
    for handler in logger.handlers:
        if getattr(handler, "name", None) != CONSOLE_HANDLER or handler.formatter is None:
            continue
        found = True
        if not isinstance(handler.formatter, ShortReasonFormatter):
            handler.setFormatter(ShortReasonFormatter(handler.formatter, logger, limit))
    return found
