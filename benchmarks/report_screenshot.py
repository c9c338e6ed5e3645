"""Build the report of a tiny run of every default family and photograph it in a headless browser.

    .venv/bin/python benchmarks/report_screenshot.py [--workdir DIR] [--out report_front.png]

1. a tiny run (Matbench steels × dummy, EOS of Cu and S2EF with EMT, six crystals, one reaction
   table) in DIR with this checkout's Snakefile and profiles/default (about a minute on 2 cores;
   the archives come from the test cache, fetched once);
2. ``snakemake --report DIR/report.zip``, unpacked;
3. Debian's ``chromium --headless --screenshot`` of the landing page (the front page) into
   ``--out``, and of the rule graph's own page beside it (``<out>_rulegraph.png``).

The front page's content is asserted by tests/test_workflow_paths.py; this is for looking at it.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from helpers import provide_downloads  # noqa: E402
from report_pages import (  # noqa: E402
    NO_BROWSER,
    TINY_RUN_CONFIG,
    TINY_RUN_ROLES,
    chromium,
    front_page_html,
    screenshot,
    unpack,
)


def snakemake(workdir: Path, *args: str) -> None:
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--configfile"]
    cmd += [str(workdir / "tiny.yaml"), "--directory", str(workdir), "--cores", "2", *args]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"snakemake {' '.join(args)} failed:\n{proc.stderr[-4000:]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, help="where the tiny run goes (default: a new temporary directory)")
    parser.add_argument("--out", type=Path, default=Path("report_front.png"), help="the front page's screenshot")
    args = parser.parse_args(argv)
    if not chromium():
        sys.exit(NO_BROWSER)
    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="crucible-report-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    # The checkout's own Snakefile (so the front page names its git commit) and profile; the
    # configfile directive reads config/ in the working directory.
    shutil.rmtree(workdir / "config", ignore_errors=True)
    shutil.copytree(REPO / "config", workdir / "config")
    provide_downloads(workdir, *TINY_RUN_ROLES)
    (workdir / "tiny.yaml").write_text(yaml.safe_dump(TINY_RUN_CONFIG))
    snakemake(workdir)
    snakemake(workdir, "--report", str(workdir / "report.zip"))
    unpacked = workdir / "report"
    shutil.rmtree(unpacked, ignore_errors=True)
    html = unpack(workdir / "report.zip", unpacked)
    (unpacked / "front_page.html").write_text(front_page_html(html))
    front = screenshot(html, args.out, size=(1400, 1800))
    graph = screenshot(html, args.out.with_name(f"{args.out.stem}_rulegraph.png"), view="rulegraph")
    print(f"front page: {front}\nrule graph: {graph}\nreport: {html}")


if __name__ == "__main__":
    main()
