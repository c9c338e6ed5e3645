"""``crucible features ...``: build the Magpie and structure feature files of task tables, print the featurizer version."""

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


def _cmd_build_structures(args: argparse.Namespace) -> int:
    from crucible.features.structure_cache import build_scm_cache

    build_scm_cache(args.data, args.out)
    return 0


def _cmd_build_embeddings(args: argparse.Namespace) -> int:
    from crucible.torch_setup import configure_torch

    configure_torch(args.threads)
    from crucible.features.mlip_embed import build_embedding_cache

    build_embedding_cache(args.data, args.out, args.model, args.device)
    return 0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("build", help="Magpie features of every distinct formula of the task tables, once")
    p.add_argument(
        "--data", nargs="+", required=True, help="results/matbench/data/{task}.parquet files (the DAG: one task's)"
    )
    p.add_argument("--out", required=True, help="results/features/magpie-<version>/{task}.parquet")
    p.set_defaults(func=_cmd_build)

    p = sub.add_parser("version", help="print the Magpie featurizer version (part of the cache file name)")
    p.set_defaults(func=_cmd_version)

    # Structure features (issue 16): one row per distinct structure, keyed by its canonical hash.
    p = sub.add_parser("build-structures", help="Sine Coulomb matrix eigenvalues of every distinct structure, once")
    p.add_argument(
        "--data", nargs="+", required=True, help="results/matbench/data/{task}.parquet files (the DAG: one task's)"
    )
    p.add_argument("--out", required=True, help="results/features/scm-<version>/{task}.parquet")
    p.set_defaults(func=_cmd_build_structures)

    p = sub.add_parser("build-embeddings", help="pretrained-potential embedding of every distinct structure, once")
    p.add_argument(
        "--data", nargs="+", required=True, help="results/matbench/data/{task}.parquet files (the DAG: one task's)"
    )
    p.add_argument("--model", default="chgnet-0.3.0", help="the potential (chgnet-0.3.0)")
    p.add_argument("--device", help="cuda or cpu (default: cuda when torch sees a GPU)")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    p.add_argument("--out", required=True, help="results/features/mlip-embed-<version>/{task}.parquet")
    p.set_defaults(func=_cmd_build_embeddings)
