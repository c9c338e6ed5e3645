"""crucible.potentials.custom and .workflow: a user's own potential (config ``potentials:``, before
``mlip.custom_potentials``) loads like a registered one, runs in EOS, s2ef, catalysis and crystal mlip-search through the same commands,
and its class path, params and version are recorded with every result. The potentials are those
of tests/custom_calculators.py, imported by class path as a user's module beside the project."""

from __future__ import annotations

import json
import math

import custom_calculators
import numpy as np
import pandas as pd
import pytest
from ase.build import bulk
from ase.calculators.emt import EMT

from crucible.cli import main
from crucible.core.errors import ConfigError
from crucible.core.io import read_json, read_parquet
from crucible.dag.config import check_config
from crucible.potentials import workflow as potentials_wf
from crucible.potentials.provenance import provenance_text, read_provenance
from crucible.potentials.registry import load_potential

SCALED = {"class": "custom_calculators:scaled_emt", "params": {"scale": 2.0}}
IDENTITY = {"class": "custom_calculators:scaled_emt", "params": {"scale": 1.0}}


def _custom(name, entry):
    return json.dumps({name: entry})


# --------------------------------------------------------------------------- loading


def test_a_custom_potential_loads_like_a_registered_one_and_says_what_it_is():
    potential = load_potential("mine", device="cpu", custom={"mine": SCALED})
    calc = potential.calculator
    assert isinstance(calc, custom_calculators.ScaledEMT) and calc.scale == 2.0 and calc.device == "cpu"
    assert potential.name == "mine" and potential.device == "cpu"
    atoms = bulk("Cu", "fcc", a=3.6)
    atoms.calc = calc
    reference = bulk("Cu", "fcc", a=3.6)
    reference.calc = EMT()
    assert atoms.get_potential_energy() == 2.0 * reference.get_potential_energy()
    prov = potential.provenance
    assert prov["class"] == "custom_calculators:scaled_emt" and prov["params"] == {"scale": 2.0}
    assert prov["kind"] == "custom" and prov["potential"] == "mine" and prov["device"] == "cpu"
    # a module beside the project: no distribution, so its __version__ and the hash of its source
    assert prov["package"] is None and prov["version"] == "0.0.test" and len(prov["code_sha256"]) == 64
    assert provenance_text(prov).startswith('custom_calculators:scaled_emt {"scale": 2.0} (version 0.0.test, sha256 ')


def test_registered_potentials_record_their_class_and_package_version():
    import ase

    prov = load_potential("emt").provenance
    assert prov["class"] == "ase.calculators.emt:EMT" and prov["params"] == {}
    assert prov["package"] == "ase" and prov["version"] == ase.__version__ and prov["kind"] == "builtin"
    assert provenance_text(prov) == f"ase.calculators.emt:EMT (ase {ase.__version__})"


@pytest.mark.parametrize(
    "entry, message",
    [
        (
            {"class": "no_such_module:make"},
            r"potentials\.mine\.class: cannot import module 'no_such_module'",
        ),
        (
            {"class": "custom_calculators:missing"},
            r"potentials\.mine\.class: module 'custom_calculators' has no 'missing'",
        ),
        ({"class": "custom_calculators:__version__"}, r"potentials\.mine\.class: .* is not callable"),
        (
            {"class": "custom_calculators"},
            r"potentials\.mine\.class: .* is not \"package\.module:factory\"",
        ),
    ],
)
def test_a_class_path_that_does_not_import_names_the_config_key(entry, message):
    with pytest.raises(ConfigError, match=message):
        load_potential("mine", custom={"mine": entry})
    with pytest.raises(ConfigError, match=message):
        potentials_wf.check({"potentials": {"mine": entry}, "mlip": {"models": ["mine"]}})


def test_a_factory_that_does_not_give_an_ase_calculator_or_rejects_its_params_is_refused():
    with pytest.raises(ConfigError, match=r"potentials\.mine\.class: .* returned dict, not an ASE"):
        load_potential("mine", custom={"mine": {"class": "custom_calculators:not_a_calculator"}})
    wrong = {"class": "custom_calculators:scaled_emt", "params": {"scael": 2.0}}
    with pytest.raises(ConfigError, match=r"potentials\.mine: .*scael"):
        load_potential("mine", custom={"mine": wrong})


def test_a_param_the_factory_does_not_take_is_refused_at_start_up_naming_the_key_and_the_names():
    """A typo (scael) passed planning and stopped every job of the potential with a TypeError."""
    wrong = {"potentials": {"mine": {"class": "custom_calculators:scaled_emt", "params": {"scael": 2.0}}}}
    with pytest.raises(ConfigError) as err:
        potentials_wf.check(wrong)
    assert str(err.value) == (
        "config potentials.mine.params.scael: custom_calculators:scaled_emt takes no parameter 'scael'; it takes: scale"
    )
    with pytest.raises(ConfigError, match=r"potentials\.mine\.params\.device: crucible passes device itself"):
        potentials_wf.check(
            {"potentials": {"mine": {"class": "custom_calculators:scaled_emt", "params": {"device": "cpu"}}}}
        )
    with pytest.raises(ConfigError, match=r"potentials\.mine\.class: .*without_device takes no keyword 'device'"):
        potentials_wf.check({"potentials": {"mine": {"class": "custom_calculators:without_device"}}})
    # what the factory takes passes; so does anything for a factory of **kwargs (ASE's EMT)
    potentials_wf.check({"potentials": {"mine": SCALED}})
    potentials_wf.check(
        {"potentials": {"mine": {"class": "ase.calculators.emt:EMT", "params": {"fixed_cutoff": False}}}}
    )


def test_config_schema_names_and_args():
    good = {"potentials": {"mine": SCALED}, "mlip": {"models": ["emt", "mine"]}}
    check_config(good)
    assert "emt" in potentials_wf.potential_names(good) and "mine" in potentials_wf.potential_names(good)
    # only the job's own entry goes on its command line: another potential's change reruns nothing
    assert potentials_wf.custom_potential_json(good, "emt") == ""
    assert json.loads(potentials_wf.custom_potential_json(good, "mine")) == {"mine": SCALED}
    with pytest.raises(ConfigError, match=r"potentials\.mine: unexpected key 'parms'"):
        check_config({"potentials": {"mine": {"class": "a.b:c", "parms": {}}}})
    with pytest.raises(ConfigError, match=r"potentials\.mine: 'class' is a required property"):
        check_config({"potentials": {"mine": {"params": {}}}})
    with pytest.raises(ConfigError, match=r"potentials\.mine\.device: 'tpu' is not one of"):
        check_config({"potentials": {"mine": {**SCALED, "device": "tpu"}}})
    with pytest.raises(ConfigError, match=r"potentials\.emt: 'emt' is a registered potential"):
        check_config({"potentials": {"emt": SCALED}, "mlip": {"models": ["emt"]}})
    with pytest.raises(ConfigError, match=r"mlip\.models: unknown potential\(s\) mien; known: .*mine"):
        check_config({"potentials": {"mine": SCALED}, "mlip": {"models": ["mien"]}})


def test_the_deprecated_key_still_works_says_so_once_and_may_not_define_a_name_twice(caplog, monkeypatch):
    old = {"mlip": {"models": ["mine"], "custom_potentials": {"mine": SCALED}}}
    new = {"potentials": {"mine": SCALED}, "mlip": {"models": ["mine"]}}
    monkeypatch.setattr(potentials_wf, "_deprecation_logged", False)
    with caplog.at_level("WARNING", logger="crucible.potentials.workflow"):
        check_config(old)
        assert potentials_wf.custom_potentials(old) == potentials_wf.custom_potentials(new)
        potentials_wf.custom_potentials(old)
    messages = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert len(messages) == 1 and "mlip.custom_potentials" in messages[0] and "potentials:" in messages[0]
    # the same entry under either key: the same job command, so moving it reruns nothing
    assert potentials_wf.custom_potential_json(old, "mine") == potentials_wf.custom_potential_json(new, "mine")
    # an entry's errors name the key it is under
    with pytest.raises(ConfigError, match=r"potentials\.mine\.class: cannot import module"):
        check_config({"mlip": {"models": ["mine"], "custom_potentials": {"mine": {"class": "no_such_module:make"}}}})
    both = {"potentials": {"mine": SCALED}, "mlip": {"models": ["mine"], "custom_potentials": {"mine": IDENTITY}}}
    with pytest.raises(ConfigError, match=r"potentials\.mine: potential 'mine' is also defined under potentials\.mine"):
        check_config(both)
    # two names, one under each key: both usable
    split = {
        "potentials": {"mine": SCALED},
        "mlip": {"models": ["mine", "old"], "custom_potentials": {"old": IDENTITY}},
    }
    check_config(split)
    assert sorted(potentials_wf.custom_potentials(split)) == ["mine", "old"]


def test_a_potential_asks_for_a_gpu_only_when_its_spec_says_gpu():
    cfg = {"potentials": {"mine": SCALED, "light": {**IDENTITY, "device": "cpu"}}}
    assert potentials_wf.device(cfg, "emt") == "cpu" and potentials_wf.device(cfg, "chgnet-0.3.0") == "gpu"
    assert potentials_wf.device(cfg, "mine") == "gpu" and potentials_wf.device(cfg, "light") == "cpu"
    names = ["emt", "chgnet-0.3.0", "mine", "light"]
    assert potentials_wf.potentials_on(cfg, "cpu", names) == ["emt", "light"]
    assert potentials_wf.potentials_on(cfg, "gpu", names) == ["chgnet-0.3.0", "mine"]
    # a cpu potential also runs on the CPU when a GPU is there
    assert load_potential("light", device="cuda", custom=cfg["potentials"]).device == "cpu"


def test_a_custom_potential_declares_its_elements_and_eos_reports_the_others_as_not_modelled(tmp_path):
    from crucible.mlip.eos import UNSUPPORTED

    declared = {**IDENTITY, "elements": ["Cu"]}
    out = tmp_path / "mine.parquet"
    args = ["mlip", "eos", "--model", "mine", "--custom-potentials", _custom("mine", declared)]
    assert main([*args, "--elements", "Cu,Ag", "--out", str(out)]) == 0
    rows = read_parquet(out).set_index("element")
    assert rows.loc["Ag", "status"] == UNSUPPORTED
    assert "mine has no parameters for Ag (it models Cu)" in rows.loc["Ag", "failure_reason"]
    assert rows.loc["Cu", "status"] == "ok" and np.isfinite(rows.loc["Cu", "v0"])
    # not declared: Ag is tried (scaled EMT models it) and fitted
    undeclared = tmp_path / "undeclared.parquet"
    assert main([*args[:-1], _custom("mine", IDENTITY), "--elements", "Ag", "--out", str(undeclared)]) == 0
    assert read_parquet(undeclared)["status"].tolist() == ["ok"]
    for bad, message in (("Cu", "a non-empty list"), (["Cu", "Xx"], r"\['Xx'\] are not element symbols")):
        with pytest.raises(ConfigError, match=rf"potentials\.mine\.elements: {message}"):
            potentials_wf.check({"potentials": {"mine": {**IDENTITY, "elements": bad}}, "mlip": {"models": ["mine"]}})


def test_catalysis_and_crystal_take_a_custom_potential_by_name():
    from crucible.catalysis import workflow as cat_wf
    from crucible.crystal import workflow as crystal_wf

    cfg = {
        "potentials": {"mine": SCALED},
        "catalysis": {"models": ["mine"], "datasets": {"d": {"path": "x.json"}}},
        "crystal": {"generators": ["mlip-search"], "generator_params": {"mlip-search": {"model": "mine"}}},
    }
    assert cat_wf.problems(cfg) == []
    assert json.loads(cat_wf.custom_potentials(cfg, "mine")) == {"mine": SCALED}
    crystal_wf.check_mlip_search(cfg)
    assert json.loads(crystal_wf.generator_params(cfg, "mlip-search")) == {
        "model": "mine",
        "custom_potentials": {"mine": SCALED},
    }
    # the files a user's potential declares are inputs of mlip-search's jobs as of its own
    with_files = {**cfg, "potentials": {"mine": {**SCALED, "files": ["weights/*.npz"]}}}
    meanings = crystal_wf.names(with_files)
    assert meanings["crystal/generator/mlip-search"].declared == ("weights/*.npz",)
    assert crystal_wf.names(cfg)["crystal/generator/mlip-search"].declared == ()
    typo = {**cfg, "catalysis": {"models": ["mien"], "datasets": {"d": {"path": "x.json"}}}}
    assert any("catalysis.models: unknown potential(s) mien" in p for p in cat_wf.problems(typo))
    bad = {**cfg, "crystal": {"generators": ["mlip-search"], "generator_params": {"mlip-search": {"model": "x"}}}}
    with pytest.raises(ConfigError, match=r"crystal\.generator_params\.mlip-search\.model: unknown potential"):
        crystal_wf.check_mlip_search(bad)


# --------------------------------------------------------------------------- every stage


def test_eos_and_s2ef_commands_run_it_and_record_its_provenance(tmp_path):
    for name, extra in (("emt", []), ("mine", ["--custom-potentials", _custom("mine", SCALED)])):
        assert (
            main(
                [
                    "mlip",
                    "eos",
                    "--model",
                    name,
                    *extra,
                    "--elements",
                    "Cu,Ag",
                    "--out",
                    str(tmp_path / f"eos/{name}.parquet"),
                ]
            )
            == 0
        )
        out = tmp_path / f"s2ef/vasp/{name}.parquet"
        assert (
            main(["mlip", "s2ef-predict", "--dataset", "ase-vasp-testdata", "--model", name, *extra, "--out", str(out)])
            == 0
        )
    emt, mine = (read_parquet(tmp_path / f"eos/{m}.parquet").set_index("element") for m in ("emt", "mine"))
    # the same volumes, twice EMT's energies: the same V0, twice the bulk modulus
    assert np.allclose(np.stack(mine["energies"]), 2 * np.stack(emt["energies"]), rtol=0, atol=1e-12)
    assert np.allclose(mine["v0"], emt["v0"], rtol=1e-9) and np.allclose(mine["b0"], 2 * emt["b0"], rtol=1e-6)
    assert read_provenance(tmp_path / "eos/mine.parquet")["params"] == {"scale": 2.0}
    assert read_provenance(tmp_path / "eos/emt.parquet")["class"] == "ase.calculators.emt:EMT"
    main(
        [
            "mlip",
            "eos-table",
            "--inputs",
            *(str(tmp_path / f"eos/{m}.parquet") for m in ("emt", "mine")),
            "--out-csv",
            str(tmp_path / "eos.csv"),
        ]
    )
    table = pd.read_csv(tmp_path / "eos.csv").set_index("model")
    assert table.loc["mine", "potential"].startswith('custom_calculators:scaled_emt {"scale": 2.0}')
    assert table.loc["emt", "potential"].startswith("ase.calculators.emt:EMT (ase ")
    s_emt, s_mine = (read_parquet(tmp_path / f"s2ef/vasp/{m}.parquet") for m in ("emt", "mine"))
    ok = s_emt["status"] == "ok"
    assert (s_mine["status"] == s_emt["status"]).all()
    assert np.allclose(s_mine.loc[ok, "energy_pred"], 2 * s_emt.loc[ok, "energy_pred"], rtol=1e-12)
    main(
        [
            "mlip",
            "s2ef-table",
            "--inputs",
            *(str(tmp_path / f"s2ef/vasp/{m}.parquet") for m in ("emt", "mine")),
            "--out-csv",
            str(tmp_path / "s2ef.csv"),
        ]
    )
    s2ef = pd.read_csv(tmp_path / "s2ef.csv").set_index("model")
    assert s2ef.loc["mine", "potential"].startswith('custom_calculators:scaled_emt {"scale": 2.0}')


def _catalysis(tmp_path, demo, name, extra, seeds=1):
    d = tmp_path / name
    d.mkdir()
    main(["catalysis", "clean", "--format", "catbench-json", "--input", str(demo / "emt-demo_adsorption.json"),
          "--out", str(d / "r.parquet"), "--out-db", str(d / "s.db"), "--out-card", str(d / "card.json")])  # fmt: skip
    assert main(["catalysis", "relax", "--reactions", str(d / "r.parquet"), "--db", str(d / "s.db"), "--model", name,
                 *extra, "--params", json.dumps({"seeds": seeds}), "--out", str(d / "chunk_0.json")]) == 0  # fmt: skip
    assert main(["catalysis", "score", "--inputs", str(d / "chunk_0.json"), "--card", str(d / "card.json"),
                 "--model", name, "--out", str(d / "a.json"), "--out-reactions", str(d / "a.parquet")]) == 0  # fmt: skip
    return d


def test_catalysis_relaxes_with_it_exactly_as_with_the_registered_potential(tmp_path, catalysis_demo):
    """scale 1.0: EMT's numbers, so the custom path must give exactly the registered one's."""
    emt = _catalysis(tmp_path, catalysis_demo, "emt", [])
    mine = _catalysis(tmp_path, catalysis_demo, "mine", ["--custom-potentials", _custom("mine", IDENTITY)])
    a, b = read_parquet(emt / "a.parquet"), read_parquet(mine / "a.parquet")
    assert a["reaction_id"].tolist() == b["reaction_id"].tolist()
    cols = [c for c in a.columns if a[c].dtype.kind == "f" and "time" not in c]
    assert cols and np.array_equal(a[cols].to_numpy(), b[cols].to_numpy(), equal_nan=True)
    ra, rb = read_json(emt / "a.json"), read_json(mine / "a.json")
    assert ra["mlip"]["MAE_total"] == rb["mlip"]["MAE_total"] and rb["mlip"]["Num_failed"] == 0
    assert rb["potential"]["class"] == "custom_calculators:scaled_emt" and rb["potential"]["params"] == {"scale": 1.0}
    assert rb["coverage"]["calculator"].startswith('custom_calculators:scaled_emt {"scale": 1.0}')
    assert ra["coverage"]["calculator"].startswith("ase.calculators.emt:EMT (ase ")
    assert read_json(mine / "chunk_0.json")["potential"]["params"] == {"scale": 1.0}


def test_parts_of_another_configuration_of_the_potential_are_not_resumed():
    from crucible.catalysis.chunks import settings_key

    one = load_potential("mine", custom={"mine": IDENTITY}).provenance
    two = load_potential("mine", custom={"mine": SCALED}).provenance
    assert settings_key({}, "mine", one) != settings_key({}, "mine", two)
    # the device is not part of what the potential is
    assert settings_key({}, "mine", one) == settings_key({}, "mine", {**one, "device": "cuda"})


def test_crystal_mlip_search_relaxes_with_it_and_its_sidecar_says_so():
    from pymatgen.core import Lattice, Structure

    from crucible.crystal import generators, items, mlip_search
    from crucible.crystal.report import generator_table

    from helpers import REPO

    templates = items.load_templates(REPO / "config" / "crystal_prompts.yaml")

    cu3au = Structure(
        Lattice.cubic(3.75), ["Au", "Cu", "Cu", "Cu"], [[0, 0, 0], [0, 0.5, 0.5], [0.5, 0, 0.5], [0.5, 0.5, 0]]
    )
    item = items.make_item(
        "t", "cu3au", cu3au, "composition-spacegroup-v1", templates["composition-spacegroup-v1"], set()
    )
    blind = {k: v for k, v in item.items() if k != "ground_truth"}
    params = {"model": "mine", "n_candidates": 1, "steps": 5, "custom_potentials": {"mine": SCALED}}
    responses, info = generators.generate("mlip-search", [blind], params=params)
    assert responses[0]["error"] is None
    assert info["potential"]["class"] == "custom_calculators:scaled_emt" and info["potential"]["params"] == {
        "scale": 2.0
    }
    # no optimizer step (twice the forces take other FIRE steps): twice EMT's energy, so it is what ran
    gen = mlip_search.MlipSearchGenerator(model="mine", custom_potentials={"mine": SCALED}, n_candidates=1, steps=0)
    energy, _ = gen._relax(cu3au)
    reference = mlip_search.MlipSearchGenerator(model="emt", n_candidates=1, steps=0)
    assert math.isclose(energy, 2 * reference._relax(cu3au)[0], rel_tol=1e-9)
    summary = {"generator": "mlip-search", "match_rate": 0.0, "mean_rms_dist": None, "matched": 0, "total": 1}
    row = generator_table([{**summary, "failures": {}, "generation": info}]).iloc[0]
    assert row["potential"].startswith('custom_calculators:scaled_emt {"scale": 2.0}')


def test_only_a_module_beside_the_project_is_a_job_input_and_imports_by_hand(tmp_path, monkeypatch):
    import os
    import shutil
    import sys

    from helpers import REPO

    beside = tmp_path / "my_potentials.py"
    shutil.copy(REPO / "tests" / "custom_calculators.py", beside)
    monkeypatch.chdir(tmp_path)
    # what put_on_python_path changes, restored afterwards
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    cfg = {
        "potentials": {
            "here": {"class": "my_potentials:scaled_emt"},
            "installed": {"class": "ase.calculators.emt:EMT"},
        }
    }
    # by hand (crucible mlip eos ... --custom-potentials), from the project directory: it imports
    assert str(tmp_path) not in sys.path
    potential = load_potential("here", custom=cfg["potentials"])
    assert type(potential.calculator).__module__ == "my_potentials"
    assert potentials_wf.custom_potential_sources(cfg, "here") == ["my_potentials.py"]
    assert potentials_wf.custom_potential_sources(cfg, "installed") == []  # its package version says what it is
    assert potentials_wf.custom_potential_sources(cfg, "emt") == []
    sys.modules.pop("my_potentials", None)
    # a package "pkg.make:factory": every file of pkg is an input (editing params.py reruns), and
    # the provenance's code_sha256 covers them all
    pkg = tmp_path / "mypots"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "params.py").write_text("SCALE = 2.0\n")
    (pkg / "make.py").write_text(
        "from my_potentials import scaled_emt\nfrom mypots.params import SCALE\n\n\n"
        "def make(device='cpu'):\n    return scaled_emt(device=device, scale=SCALE)\n"
    )
    cfg["potentials"]["pkg"] = {"class": "mypots.make:make"}
    first = load_potential("pkg", custom=cfg["potentials"]).provenance["code_sha256"]
    assert potentials_wf.custom_potential_sources(cfg, "pkg") == [
        "mypots/__init__.py",
        "mypots/make.py",
        "mypots/params.py",
    ]
    (pkg / "params.py").write_text("SCALE = 3.0\n")
    for mod in ("mypots", "mypots.make", "mypots.params", "my_potentials"):
        sys.modules.pop(mod, None)
    assert load_potential("pkg", custom=cfg["potentials"]).provenance["code_sha256"] != first
    for mod in ("mypots", "mypots.make", "mypots.params", "my_potentials"):
        sys.modules.pop(mod, None)


def test_catalysis_relative_energies_run_it_and_the_table_says_so(tmp_path, catalysis_demo):
    for name, extra in (("emt", []), ("mine", ["--custom-potentials", _custom("mine", SCALED)])):
        args = ["catalysis", "relative", "--task", "surface", "--input", str(catalysis_demo / "emt-demo_surface")]
        assert main([*args, "--model", name, *extra, "--out", str(tmp_path / f"{name}.parquet")]) == 0
    emt, mine = (read_parquet(tmp_path / f"{m}.parquet") for m in ("emt", "mine"))
    assert np.allclose(mine["mlip"], 2 * emt["mlip"], rtol=1e-9)  # surface energies scale with the energies
    assert read_provenance(tmp_path / "mine.parquet")["params"] == {"scale": 2.0}
    inputs = [str(tmp_path / f"{m}.parquet") for m in ("emt", "mine")]
    main(["catalysis", "relative-table", "--task", "surface", "--inputs", *inputs, "--out-prefix", str(tmp_path / "t")])
    table = pd.read_csv(tmp_path / "t.csv").set_index("model")
    assert table.loc["mine", "potential"].startswith('custom_calculators:scaled_emt {"scale": 2.0}')
    assert table.loc["emt", "potential"].startswith("ase.calculators.emt:EMT (ase ")


def test_implausible_numbers_are_counted_beside_the_eos_and_s2ef_scores(tmp_path):
    """A potential answering 1e17 eV (and eV/Å): its EOS element and s2ef frames stay scored as
    the code always scored them, and the tables count them in a column beside."""
    huge = [
        "--custom-potentials",
        _custom("huge", {"class": "custom_calculators:huge_potential", "params": {"element": "Cu"}}),
    ]
    everywhere = ["--custom-potentials", _custom("huge", {"class": "custom_calculators:huge_potential"})]
    eos = tmp_path / "eos/huge.parquet"
    assert main(["mlip", "eos", "--model", "huge", *huge, "--elements", "Cu,Ag", "--out", str(eos)]) == 0
    assert main(["mlip", "eos-table", "--inputs", str(eos), "--out-csv", str(tmp_path / "eos.csv")]) == 0
    row = pd.read_csv(tmp_path / "eos.csv").set_index("model").loc["huge"]
    assert row["n_implausible"] == 1 and row["n_elements"] == 2
    s2ef = tmp_path / "s2ef/vasp/huge.parquet"
    args = [
        "mlip",
        "s2ef-predict",
        "--dataset",
        "ase-vasp-testdata",
        "--model",
        "huge",
        *everywhere,
        "--out",
        str(s2ef),
    ]
    assert main(args) == 0
    assert main(["mlip", "s2ef-table", "--inputs", str(s2ef), "--out-csv", str(tmp_path / "s2ef.csv")]) == 0
    table = pd.read_csv(tmp_path / "s2ef.csv").set_index("model").loc["huge"]
    assert table["n_implausible"] == table["n_frames"] - table["n_failed"] > 0
    assert table["energy_mae"] > 1e16  # the Evaluator's number, kept
