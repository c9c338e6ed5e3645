"""crucible: every pipeline stage runnable without Snakemake.

``crucible <group> <command> [options]``. Each group's commands are declared once in its own
module (``STAGES``, see crucible.stages.declaration; the groups are crucible.stages.groups.GROUPS); only the group
that is asked for is imported, and of it only the function of the command that runs, so that a
quick command does not pay for importing torch or pymatgen.
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys

from crucible import __version__
from crucible.core import cpu_log
from crucible.core.errors import CrucibleError
from crucible.identity.job_code import log_imported_modules
from crucible.identity.records import JobRecord
from crucible.stages.groups import GROUPS, group_help


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="crucible", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"crucible {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="group", metavar="GROUP")
    for name in GROUPS:
        sub.add_parser(name, help=group_help(name), add_help=False)
    return parser


def group_parser(
    group: str, parser: argparse.ArgumentParser | None = None, only: str | None = None
) -> argparse.ArgumentParser:
    """The parser of ``crucible <group>``, with a subcommand per command (with its arguments: every
    command's, or given ``only``, that command's alone)."""
    from crucible.stages import declaration as stage

    parser = parser or argparse.ArgumentParser(prog=f"crucible {group}", description=group_help(group))
    stage.configure_parser(parser, stage.stages_of(group), only=only)
    return parser


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the command line: this process is the command's own
        from crucible.core import torch_setup

        torch_setup.allow_flush_denormal()
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = False
    while argv and argv[0] in ("-v", "--verbose"):
        verbose = True
        argv.pop(0)
    with cpu_log.recorded(argv, GROUPS) as outcome:
        outcome["returncode"] = _main(argv, verbose, outcome)
    return outcome["returncode"]


def _main(argv: list[str], verbose: bool, outcome: dict[str, float]) -> int:
    if not argv or argv[0] not in GROUPS:
        top = _top_parser()
        top.parse_args(argv)  # prints help / version / an "invalid choice" error
        top.print_help()
        return 2
    group, rest = argv[0], argv[1:]
    parser = group_parser(group, only=rest[0] if rest else None)
    args = parser.parse_args(rest)  # --help and a usage error end here, before any log line
    if not hasattr(args, "stage"):
        parser.print_help()
        return 2
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # The full command first, so that a job's log says what ran (the console shows one line per job).
    logging.getLogger("crucible").info("command: %s", shlex.join(["crucible", *argv]))
    try:
        # A job of the workflow is handed its identity: an input changed since the job that made
        # it recorded its SHA-256, or made under another meaning of a name, is refused before the
        # job runs; its outputs' records are written once it succeeded.
        job = JobRecord.from_environ()
        names = job.start(outcome) if job is not None else {}
        from crucible.stages import declaration as stage

        result = stage.run(args.stage, args)
        if job is not None and not result:
            job.finish(["crucible", group, *rest], names, outcome)
        log_imported_modules(group, getattr(args, "command", None), job.roots if job is not None else ())
    except CrucibleError as exc:
        print(f"crucible {group}: error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"crucible {group}: error: no such file: {exc.filename or exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a full disk, a folder where a file should be: one line, not a traceback
        print(f"crucible {group}: error: {exc}", file=sys.stderr)
        return 2
    return int(result or 0)


if __name__ == "__main__":
    sys.exit(main())
