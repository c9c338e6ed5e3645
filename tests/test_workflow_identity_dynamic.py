"""A result is what its job actually read and ran (issue 54), through the real Snakefile on
matbench_steels with a user's estimator organised as research code is: a helper imported with
``importlib``, a CSV read beside it, a package of the user's with its data file, a module on
``PYTHONPATH`` outside the run directory and an installed distribution of its own. Each edit
replans exactly the jobs that read the file (one console line names it) and the rerun gives the
number a fresh directory gives; a ``sitecustomize.py`` that appears reruns every job, as does a
``.pth`` file in site-packages (of a throwaway venv the jobs start through); installed
code no RECORD vouches for is refused at planning; an output whose record was removed, or
rewritten to match a tampered file, is remade before anything reads it; files a user declares
(``files:``) are inputs of the jobs of their model."""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path

import pytest

from helpers import planned_jobs, provide_downloads, run_snakemake

TASK = "matbench_steels"
CONFIG = {
    "matbench": {
        "tasks": [TASK],
        "models": ["dummy", "mine"],
        "custom_models": {"mine": {"class": "mymodels:Coef", "input": "composition"}},
    },
    "mlip": {"enabled": False},
    "crystal": {"enabled": False},
    "reactions": {"enabled": False},
}
MINE_JOBS = {"predict_matbench": 5}  # the fits that read the user's files; their summaries follow

ESTIMATOR = """
import importlib
from pathlib import Path

import numpy as np

import coefpkg  # an installed distribution of the user's own (site-packages on PYTHONPATH)
import extmod  # a module on PYTHONPATH outside the run directory
import mypkg  # a package beside the project that reads its own data file


class Coef:
    def __init__(self, alpha=1.0):
        self.alpha = alpha

    def get_params(self, deep=True):
        return {"alpha": self.alpha}

    def fit(self, X, y):
        helper = importlib.import_module("helper_b")  # no static import names it
        scale = float(Path(__file__).with_name("coef.csv").read_text().split(",")[1])
        y = np.asarray(y, dtype=float)
        self.value_ = (helper.center(y) + mypkg.offset() + extmod.offset() + coefpkg.offset()) * scale
        return self

    def predict(self, X):
        return np.full(len(X), self.value_)
"""


def _record_row(root, rel):
    data = (root / rel).read_bytes()
    sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={sha},{len(data)}"


def _install_coefpkg(site):
    """A distribution installed as pip installs one: its files and a RECORD of their SHA-256."""
    (site / "coefpkg").mkdir(parents=True)
    (site / "coefpkg/__init__.py").write_text("def offset():\n    return 0.0\n")
    info = site / "coefpkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: coefpkg\nVersion: 1.0\n\n")
    rows = [_record_row(site, "coefpkg/__init__.py"), _record_row(site, "coefpkg-1.0.dist-info/METADATA")]
    (info / "RECORD").write_text("\n".join([*rows, "coefpkg-1.0.dist-info/RECORD,,"]) + "\n")


def _mae(work, model):
    return json.loads((work / f"results/matbench/scores/{model}/{TASK}.json").read_text())["leaderboard_value"]


@pytest.mark.slow
def test_what_a_job_read_is_its_identity(tmp_path, venv_env):
    work = tmp_path / "run"
    work.mkdir()
    provide_downloads(work, "matbench/metadata", f"matbench/mirror/{TASK}")
    (work / "mymodels.py").write_text(ESTIMATOR)
    (work / "helper_b.py").write_text("import numpy as np\n\ndef center(y):\n    return float(np.mean(y))\n")
    (work / "coef.csv").write_text("scale,1.0\n")
    (work / "mypkg").mkdir()
    (work / "mypkg/__init__.py").write_text(
        "import json\nfrom pathlib import Path\n\ndef offset():\n"
        "    return json.loads(Path(__file__).with_name('coef.json').read_text())['offset']\n"
    )
    (work / "mypkg/coef.json").write_text('{"offset": 0.0}\n')
    ext = tmp_path / "ext"
    ext.mkdir()
    (ext / "extmod.py").write_text("def offset():\n    return 0.0\n")
    site = tmp_path / "lib" / "site-packages"
    _install_coefpkg(site)
    path = os.pathsep.join([str(ext), str(site), venv_env.get("PYTHONPATH", "")])
    env = {**venv_env, "PYTHONPATH": path}

    def run(*args, ok=True):
        proc = run_snakemake(work, CONFIG, "matbench", *args, env=env, timeout=900)
        assert (proc.returncode == 0) == ok, proc.stdout[-3000:] + proc.stderr[-4000:]
        return proc.stdout + proc.stderr

    def dry():
        out = run("--dry-run")
        return planned_jobs(out), out

    run()
    base = {"mine": _mae(work, "mine"), "dummy": _mae(work, "dummy")}
    assert dry()[0] == {}

    # What a job's record holds: the user's files, each with its SHA-256, the installed
    # distributions by version; the standard library and the venv's files are left out.
    record = json.loads((work / f"results/matbench/predictions/mine/{TASK}/.identity/fold_0.json.json").read_text())
    ran = record["ran"]
    assert {"helper_b.py", "coef.csv", "mymodels.py", "mypkg/__init__.py", "mypkg/coef.json"} <= set(ran["files"])
    assert str(ext / "extmod.py") in ran["files"]
    assert ran["distributions"]["coefpkg"] == "1.0" and "scikit-learn" in ran["distributions"]
    assert not any("site-packages" in f or "/lib/python3" in f for f in ran["files"]), ran["files"]
    dummy_record = json.loads(
        (work / f"results/matbench/predictions/dummy/{TASK}/.identity/fold_0.json.json").read_text()
    )
    assert "coef.csv" not in dummy_record["ran"]["files"]  # a file is part of the jobs that read it

    seen = {}
    # 1-4: an edit of any file the fits read replans the fits of that model alone, naming the file.
    edits = [
        ("helper_b.py", "helper_b.py", "return float(np.mean(y))", "return float(np.mean(y)) + 100.0"),
        ("coef.csv", "coef.csv", "1.0", "2.0"),
        ("mypkg/coef.json", "mypkg/coef.json", "0.0", "7.0"),
        (str(ext / "extmod.py"), ext / "extmod.py", "0.0", "11.0"),
    ]
    for shown, file, old, new in edits:
        file = file if os.path.isabs(str(file)) else work / file
        file.write_text(file.read_text().replace(old, new))
        jobs, out = dry()
        assert jobs.get("predict_matbench") == MINE_JOBS["predict_matbench"], (shown, jobs)
        assert "predict_matbench_task" not in jobs and "clean_matbench_task" not in jobs, (shown, jobs)
        assert sum(f"{shown} changed since a job read it" in line for line in out.splitlines()) == 1, out[-3000:]
        run()
        seen[shown] = _mae(work, "mine")
        assert dry()[0] == {}  # stable: the rerun's records hold the new file
    assert len(set(seen.values()) | {base["mine"]}) == 5, seen

    # 5: a sitecustomize.py that appears in the run directory (on every job's path) reruns every
    # job, and the patched numpy.average gives dummy another number.
    (work / "sitecustomize.py").write_text(
        "import numpy\n_avg = numpy.average\nnumpy.average = lambda a, *k, **kw: _avg(a, *k, **kw) * 3 + 1\n"
    )
    jobs, out = dry()
    assert jobs.get("predict_matbench_task") == 1 and jobs.get("predict_matbench") == 5, jobs
    assert "sitecustomize.py: Python runs it at every start" in out, out[-3000:]
    run()
    patched = _mae(work, "dummy")
    assert patched != base["dummy"]
    (work / "sitecustomize.py").unlink()
    assert dry()[0].get("predict_matbench_task") == 1
    run()
    assert _mae(work, "dummy") == base["dummy"]

    # 6: an installed distribution whose RECORD is gone, then edited: refused at planning, naming it
    # and the command that reinstalls it; not dropped from what identifies the fits.
    (site / "coefpkg-1.0.dist-info/RECORD").unlink()
    (site / "coefpkg/__init__.py").write_text("def offset():\n    return 500.0\n")
    out = run("--dry-run", ok=False)
    assert "coefpkg 1.0 is installed without a RECORD" in out and "pip install --force-reinstall" in out, out[-3000:]
    _install_coefpkg_record(site)
    out = run("--dry-run", ok=False)  # the RECORD back, the edit is still refused
    assert "coefpkg/__init__.py differs from its RECORD" in out, out[-3000:]
    (site / "coefpkg/__init__.py").write_text("def offset():\n    return 0.0\n")
    assert dry()[0] == {}

    # 7: a prediction tampered with and its record removed: remade by its rule before its score
    # reads it (the score is that of the untampered fit); the same for a record rewritten to match.
    final = _mae(work, "mine")
    import pandas as pd

    pred = work / f"results/matbench/predictions/mine/{TASK}/fold_0.parquet"
    rec = work / f"results/matbench/predictions/mine/{TASK}/.identity/fold_0.parquet.json"
    frame = pd.read_parquet(pred)
    frame["prediction"] = frame["prediction"] + 400.0
    for how in ("removed", "rewritten"):
        frame.to_parquet(pred)
        if how == "removed":
            rec.unlink()
        else:
            doc = json.loads(rec.read_text())
            doc["sha256"] = hashlib.sha256(pred.read_bytes()).hexdigest()
            rec.write_text(json.dumps(doc))
        jobs, out = dry()
        assert jobs.get("predict_matbench") == 1, (how, jobs)
        assert f"{pred.relative_to(work)}" in out and "remakes it" in out, out[-3000:]
        run()
        assert _mae(work, "mine") == final, how
    # Declared inputs: files: of a custom model become inputs of its jobs (shown in the DAG);
    # a glob that matches nothing is refused, naming the key.
    declared = json.loads(json.dumps(CONFIG))
    declared["matbench"]["custom_models"]["mine"]["files"] = ["mypkg/*.json"]
    proc = run_snakemake(work, declared, "matbench", "--dry-run", "--printshellcmds", env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert planned_jobs(proc.stdout + proc.stderr).get("predict_matbench") == 5
    assert "mypkg/coef.json" in proc.stdout, proc.stdout[-2000:]  # in each fit's inputs (CRUCIBLE_JOB)
    declared["matbench"]["custom_models"]["mine"]["files"] = ["mypkg/*.h5"]
    proc = run_snakemake(work, declared, "matbench", "--dry-run", env=env)
    assert proc.returncode != 0 and "files: 'mypkg/*.h5' matches no file" in proc.stdout + proc.stderr
    print(f"MAE of mine: {base['mine']:.2f} -> after each edit {seen}; dummy {base['dummy']:.2f} -> {patched:.2f}")


def _install_coefpkg_record(site):
    rows = [_record_row(site, "coefpkg/__init__.py"), _record_row(site, "coefpkg-1.0.dist-info/METADATA")]
    # the RECORD as pip wrote it: of the files as installed (the edit is not in it)
    rows[0] = _record_row_of(b"def offset():\n    return 0.0\n", "coefpkg/__init__.py")
    (site / "coefpkg-1.0.dist-info/RECORD").write_text("\n".join([*rows, "coefpkg-1.0.dist-info/RECORD,,"]) + "\n")


def _record_row_of(data: bytes, rel: str) -> str:
    sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{rel},sha256={sha},{len(data)}"


def _throwaway_venv(where):
    """A venv of its own (no pip) whose site-packages reaches this one's packages through a
    ``.pth`` line that adds this venv's site-packages (their ``.pth`` files run too), with a
    ``crucible`` command of its own interpreter: a Snakemake run by its Python puts its ``bin``
    first on the jobs' PATH (workflow/rules/common.smk), so every job starts through its
    site-packages, and the shared venv is never written."""
    import subprocess
    import sys
    import sysconfig

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    ours = list(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]))
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in ours)
    (site / "00_project_venv.pth").write_text(lines)
    crucible = where / "bin" / "crucible"
    crucible.write_text(f"#!{python}\nimport sys\nfrom crucible.cli import main\nsys.exit(main())\n")
    crucible.chmod(0o755)
    return python, site


@pytest.mark.slow
def test_a_pth_file_in_site_packages_reruns_every_job(tmp_path, venv_env):
    """Case 5's other half: a ``.pth`` file in site-packages whose line imports a module that
    patches numpy.average, as pip's own ``.pth`` files import theirs. Python runs it at each job's
    start, before any audit hook: the start-up check finds it at planning and reruns the jobs
    (one console line names it); its removal does the same, and the number comes back."""
    work = tmp_path / "run"
    work.mkdir()
    provide_downloads(work, "matbench/metadata", f"matbench/mirror/{TASK}")
    python, site = _throwaway_venv(tmp_path / "venv")
    config = {**CONFIG, "matbench": {"tasks": [TASK], "models": ["dummy"]}}
    target = f"results/matbench/scores/dummy/{TASK}.json"

    def run(*args):
        proc = run_snakemake(work, config, target, *args, env=venv_env, python=python, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
        return proc.stdout + proc.stderr

    run()
    base = _mae(work, "dummy")
    record = json.loads((work / f"results/matbench/predictions/dummy/{TASK}/.identity/fold_0.json.json").read_text())
    assert str(site / "00_project_venv.pth") in record["ran"]["startup"], record["ran"]["startup"]
    assert planned_jobs(run("--dry-run")) == {}

    (site / "numpatch.py").write_text(
        "import numpy\n_avg = numpy.average\nnumpy.average = lambda a, *k, **kw: _avg(a, *k, **kw) * 3 + 1\n"
    )
    (site / "zz_patch.pth").write_text("import numpatch\n")
    out = run("--dry-run")
    jobs = planned_jobs(out)
    assert jobs.get("predict_matbench_task") == 1 and jobs.get("score_matbench") == 1, jobs
    assert sum("zz_patch.pth: Python runs it at every start" in line for line in out.splitlines()) == 1, out[-3000:]
    run()
    patched = _mae(work, "dummy")
    assert patched != base
    record = json.loads((work / f"results/matbench/predictions/dummy/{TASK}/.identity/fold_0.json.json").read_text())
    assert str(site / "numpatch.py") in record["ran"]["files"], sorted(record["ran"]["files"])
    assert planned_jobs(run("--dry-run")) == {}  # stable: the rerun's records hold it

    (site / "zz_patch.pth").unlink()
    assert planned_jobs(run("--dry-run")).get("predict_matbench_task") == 1
    run()
    assert _mae(work, "dummy") == base
    print(f"MAE of dummy through a venv's .pth: {base:.2f} -> {patched:.2f} -> {base:.2f}")
