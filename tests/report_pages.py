"""Reading a Snakemake report as a reader meets it: the zip unpacked, its front page's HTML, and
pages rendered by a real headless browser (Debian's ``chromium``; ``$CRUCIBLE_CHROMIUM`` names
another binary). Used by tests/test_workflow_paths.py and benchmarks/report_screenshot.py."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import zipfile
from pathlib import Path

# A tiny run of every default family (Matbench steels × dummy, EOS of Cu and S2EF with EMT, six
# crystals, one reaction table), and the pinned files it reads: the run whose report the front-page
# test checks and the screenshot script photographs.
TINY_RUN_CONFIG = {
    # the tiny run is its folder's whole run: aggregates under results/ (crucible.dag.runs would
    # otherwise name a config that leaves out part of config/config.yaml's set)
    "matbench": {"run_name": "default", "tasks": ["matbench_steels"], "models": ["dummy"]},
    "mlip": {"models": ["emt"], "eos": {"elements": ["Cu"]}, "s2ef": {"datasets": {"vasp": "ase-vasp-testdata"}}},
    "crystal": {"max_test_items": 6},
    "reactions": {"datasets": ["direct-arylation"]},
    # from the reference and cards that ship in data/matbench-discovery/ (36 fetch jobs that copy)
    # (the phonons task's MgO with CHGNet, minutes of CPU, is tested in tests/test_discovery_kappa.py)
    "discovery": {"diatomics": {"potentials": ["emt"], "elements": ["H"]}, "phonons": {"potentials": []}},
}
TINY_RUN_ROLES = (
    "matbench/metadata",
    "matbench/mirror/matbench_steels",
    "crystal/aflow-prototypes",
    "reactions/direct-arylation",
)

# The report's views (its React app's `content`): the landing page shows "metadata" when the
# report has metadata (profiles/default gives it), else "rulegraph".
VIEWS = ("metadata", "rulegraph", "stats")


def chromium() -> str | None:
    """The headless browser binary, or None when none is installed."""
    named = os.environ.get("CRUCIBLE_CHROMIUM")
    if named:
        return named
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if shutil.which(name):
            return shutil.which(name)
    return None


NO_BROWSER = (
    "no headless browser: install Debian's chromium (apt-get install chromium) or set CRUCIBLE_CHROMIUM; "
    "the report's front page HTML is still checked without one"
)


def unpack(report_zip: Path, dest: Path) -> Path:
    """The report's ``report.html`` after unpacking ``report_zip`` into ``dest``."""
    with zipfile.ZipFile(report_zip) as zf:
        zf.extractall(dest)
    (html,) = dest.glob("*/report.html")
    return html


def front_page_html(report_html: Path) -> str:
    """The HTML of the report's front page (the rendered workflow.rst), as the page embeds it."""
    text = report_html.read_text(encoding="utf-8")
    match = re.search(r'<script id="workflow-desc">\s*var workflow_desc = (".*?");\s*</script>', text, re.S)
    assert match, f"{report_html}: no workflow description"
    return json.loads(match.group(1))


def _page(report_html: Path, view: str | None) -> Path:
    """The report, opening on ``view`` (a copy beside it that switches to it once loaded)."""
    if view is None:
        return report_html
    assert view in VIEWS, view
    text = report_html.read_text(encoding="utf-8")
    switch = f'<script>setTimeout(function () {{ app.setView({{content: "{view}"}}); }}, 200);</script>'
    page = report_html.with_name(f"report.{view}.html")
    head, tail = text.rsplit("</body>", 1)  # the last one: the page's scripts hold the string too
    page.write_text(f"{head}{switch}\n</body>{tail}", encoding="utf-8")
    return page


def _browser(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    binary = chromium()
    assert binary, NO_BROWSER
    # --no-sandbox: the tests may run as root (containers); the page is a local file.
    cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=15000"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=timeout)


def rendered_dom(report_html: Path, view: str | None = None) -> str:
    """The page's DOM after the report's scripts ran (React renders the whole page)."""
    proc = _browser("--dump-dom", _page(report_html, view).resolve().as_uri())
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def screenshot(report_html: Path, png: Path, view: str | None = None, size: tuple[int, int] = (1400, 1000)) -> Path:
    png.parent.mkdir(parents=True, exist_ok=True)
    page = _page(report_html, view)
    proc = _browser(f"--window-size={size[0]},{size[1]}", f"--screenshot={png.resolve()}", page.resolve().as_uri())
    assert proc.returncode == 0 and png.stat().st_size > 0, proc.stderr[-2000:]
    return png
