"""``crucible sources ...``: fetch and extract the artifacts pinned in config/sources.yaml."""

from __future__ import annotations

import argparse

from crucible import sources


def _cmd_fetch(args: argparse.Namespace) -> int:
    if args.matminer_task:
        spec = sources.matminer_artifact(args.matminer_task, args.url_prefix, args.sha256)
        name = args.matminer_task
    else:
        spec = dict(sources.get_artifact(sources.load_sources(args.sources), args.artifact))
        name = args.artifact
        if args.url_prefix and spec["kind"] == "http":
            # a mirror keeps the upstream layout below the prefix (mirror_path), else the file name
            spec["url"] = args.url_prefix.rstrip("/") + "/" + spec.get("mirror_path", spec["filename"])
    sources.fetch(name, spec, args.out, lock=args.lock, sources_file=args.sources)
    return 0


def _cmd_extract(args: argparse.Namespace) -> int:
    spec = sources.get_artifact(sources.load_sources(args.sources), args.artifact)
    sources.extract(args.artifact, spec, args.archive, args.out_dir, args.members or None)
    return 0


def _cmd_provide(args: argparse.Namespace) -> int:
    print(sources.provide(args.role, args.resources, sources=args.sources, url_prefix=args.url_prefix))
    return 0


def configure_parser(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    fetch = sub.add_parser("fetch", help="download one artifact and check its SHA-256")
    what = fetch.add_mutually_exclusive_group(required=True)
    what.add_argument("--artifact", help="artifact name in the sources file")
    what.add_argument("--matminer-task", help="upstream matminer dataset of this Matbench task")
    fetch.add_argument(
        "--sources", default="config/sources.yaml", help="the pinned sources file (default: config/sources.yaml)"
    )
    fetch.add_argument("--url-prefix", help="mirror replacing the upstream URL's folder")
    fetch.add_argument("--sha256", help="pinned hash of a mirror's own copy")
    fetch.add_argument("--lock", help="lock file recording the SHA-256 of artifacts pinned by git blob id")
    fetch.add_argument("--out", required=True, help="destination file")
    fetch.set_defaults(func=_cmd_fetch)

    extract = sub.add_parser("extract", help="take hash-checked members out of a downloaded archive")
    extract.add_argument("--artifact", required=True, help="artifact name in the sources file")
    extract.add_argument(
        "--sources", default="config/sources.yaml", help="the pinned sources file (default: config/sources.yaml)"
    )
    extract.add_argument("--archive", required=True, help="the downloaded archive (its SHA-256 is checked first)")
    extract.add_argument("--out-dir", required=True, help="folder the members are written into")
    extract.add_argument("--members", nargs="*", help="default: every pinned member")
    extract.set_defaults(func=_cmd_extract)

    provide = sub.add_parser(
        "provide", help="fetch and extract the file of a role unless it is there with its pin; print its path"
    )
    provide.add_argument("--role", required=True, help="e.g. reactions/cernak (see config/sources.yaml)")
    provide.add_argument(
        "--sources", default=str(sources.SOURCES_FILE), help="the pinned sources file (default: config/sources.yaml)"
    )
    provide.add_argument("--resources", default=str(sources.RESOURCES), help="the folder the workflow fills")
    provide.add_argument("--url-prefix", help="mirror replacing the upstream URL's folder (http artifacts)")
    provide.set_defaults(func=_cmd_provide)
