"""``crucible features ...``: build the shared Magpie feature cache, print the featurizer version."""

from __future__ import annotations

import argparse


def _cmd_build(args: argparse.Namespace) -> int:
    from crucible.features.cache import build_cache

    build_cache(args.data, args.out)
    return 0


def _cmd_version(args: argparse.Namespace) -> int:
    from crucible.features.magpie import MAGPIE_VERSION

    print(MAGPIE_VERSION)
    return 0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("build", help="featurize every distinct formula of the task tables once")
    p.add_argument("--data", nargs="+", required=True, help="results/matbench/data/{task}.parquet files")
    p.add_argument("--out", required=True, help="results/features/magpie-<version>.parquet")
    p.set_defaults(func=_cmd_build)

    p = sub.add_parser("version", help="print the Magpie featurizer version (part of the cache file name)")
    p.set_defaults(func=_cmd_version)
