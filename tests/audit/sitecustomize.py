"""Loaded by every Python process of a test's workflow run (this folder is put on PYTHONPATH by
tests/test_workflow_determinism.py): an audit hook records every file opened for reading, one
path per line, in ``$CRUCIBLE_AUDIT_DIR/<pid>.txt``. Nothing else changes."""

import os
import sys

_DIR = os.environ.get("CRUCIBLE_AUDIT_DIR")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


def _install() -> None:
    fd = os.open(os.path.join(_DIR, f"{os.getpid()}.txt"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(fd, ("#argv " + " ".join(sys.argv or [sys.executable]) + "\n").encode("utf-8", "replace"))
    seen = set()

    def hook(event, args):
        if event != "open":
            return
        path, mode, flags = args
        if isinstance(path, int) or path is None:
            return
        if isinstance(mode, str):
            if any(c in mode for c in "wax+"):
                return
        elif isinstance(flags, int) and flags & _WRITE_FLAGS:
            return
        try:
            text = os.fsdecode(path)
        except (TypeError, ValueError):
            return
        if text in seen:
            return
        seen.add(text)
        os.write(fd, (os.path.abspath(text) + "\n").encode("utf-8", "surrogateescape"))

    sys.addaudithook(hook)


if _DIR and os.path.isdir(_DIR):
    _install()
