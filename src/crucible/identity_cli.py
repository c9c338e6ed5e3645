"""``crucible names ...``: what each name means in this results folder (crucible.identity).

crucible names show                      every recorded name, its meaning's digest and spec
crucible names forget KEY [KEY ...]      let the next run give KEY a new meaning (its jobs rerun)
crucible names record --output FILE     the identity record of one output
"""

from __future__ import annotations

import argparse
import json

from crucible.code_closure import canonical_json, short
from crucible.identity import NAME_BOOK_FILE, forget_names, read_name_book, read_record


def _cmd_show(args: argparse.Namespace) -> int:
    book = read_name_book(args.book)
    if not book:
        print(f"{args.book}: no names recorded yet")
    for key, entry in sorted(book.items()):
        print(f"{key}\t{short(entry['digest'])}\t{canonical_json(entry['spec'])}")
    return 0


def _cmd_forget(args: argparse.Namespace) -> int:
    for key in forget_names(args.keys, args.book):
        print(f"forgot {key}: the next run records its meaning anew and reruns the jobs made of it")
    return 0


def _cmd_record(args: argparse.Namespace) -> int:
    record = read_record(args.output)
    if record is None:
        print(f"{args.output}: no identity record (not made by a workflow job of this version)")
        return 1
    print(json.dumps(record, indent=2, sort_keys=True))
    return 0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    book_help = f"the record of names (default {NAME_BOOK_FILE})"
    p = sub.add_parser("show", help="every recorded name with its meaning")
    p.add_argument("--book", default=str(NAME_BOOK_FILE), help=book_help)
    p.set_defaults(func=_cmd_show)
    p = sub.add_parser("forget", help="drop recorded names, so that the next run may give them a new meaning")
    p.add_argument("keys", nargs="+", metavar="KEY", help="e.g. matbench/model/gbm-magpie (see `crucible names show`)")
    p.add_argument("--book", default=str(NAME_BOOK_FILE), help=book_help)
    p.set_defaults(func=_cmd_forget)
    p = sub.add_parser("record", help="the identity record of one output file")
    p.add_argument("--output", required=True, help="an output file of the workflow")
    p.set_defaults(func=_cmd_record)
