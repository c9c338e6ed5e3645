"""What every benchmark family registered in crucible.dag.families promises, checked for each of them:

1. the registry matches the repository: every family package with a ``FAMILY`` is registered, and
   every rule file, report caption, conda env and config section belongs to a family; the shared
   files (Snakefile, common.smk, fetch.smk, the crucible.sources modules) name no family; every
   rule file (report.smk and features.smk too) uses no other family's modules;
2. its rules are what it declares: defined in its rule files, using its envs and captions, its
   wildcards constrained (global constraints claimed by one family only);
3. ``snakemake <family> -n`` plans on ``.test/<family>/config.yaml``, a config that holds only that
   family's section, and plans only its own (and the shared fetch) rules;
4. a typo in its section stops the run, naming the key;
5. every rule that asks for a GPU, in the DAG of every shipped config and of .test/all-stages.yaml
   (every optional stage; its DAG holds every rule of the workflow), is sent to the GPU partition by
   profiles/slurm, and only those; and every rule of the workflow that declares a GPU has its
   profiles/slurm entry (so no config can plan an unrouted one);
6. every table and figure among its final outputs is in the report with an .rst caption;
7. a sixth family is its package, a rule file and one registry line: the loops pick it up.
"""

from __future__ import annotations

import os
import re
import shutil
import textwrap
from pathlib import Path

import pytest
import yaml

from crucible.cli import GROUPS
from crucible.dag import families as registry
from crucible.dag.config import SERVICE_SECTIONS
from crucible.dag.families import families
from crucible.stages.groups import FAMILY_PACKAGES

from helpers import REPO, load_test_config, run_snakemake, test_config, workflow_rules

FAMILIES = families()
NAMES = [f.name for f in FAMILIES]
SHARED_RULE_FILES = {"common.smk", "fetch.smk"}  # the config checks and the pinned downloads
ALL_STAGES = REPO / ".test" / "all-stages.yaml"
SLURM = REPO / "profiles" / "slurm"
slow = pytest.mark.slow


def stand_ins(workdir: Path) -> Path:
    """Empty files where .test/all-stages.yaml and .test/catalysis/config.yaml name inputs that
    no rule makes (a dry run only checks that they exist)."""
    for k in range(5):
        (workdir / "preds/matbench_jdft2d").mkdir(parents=True, exist_ok=True)
        (workdir / f"preds/matbench_jdft2d/fold_{k}.parquet").touch()
    for d in ("emt-demo_surface", "emt-demo_formation", "emt-demo_vasp"):
        (workdir / "demo" / d).mkdir(parents=True, exist_ok=True)
    (workdir / "demo/emt-demo_adsorption.json").touch()
    (workdir / "answers/crystal").mkdir(parents=True, exist_ok=True)
    for d in ("aflow-prototypes", "mp-20"):
        (workdir / f"answers/crystal/{d}.jsonl").touch()
    (workdir / "answers/crystal-samples.jsonl").touch()  # crystal.csp.samples_files
    return workdir


# A job's block in a dry run: "rule NAME:" at the start of a line, or indented by four inside the
# block of a group job ("Group job GROUP (jobs in lexicogr. order):"), its fields indented below it.
JOB_START = re.compile(r"^(?P<indent>(?: {4})?)(?:local)?rule (?P<rule>\w+):$", re.M)
GROUP_START = re.compile(r"^(?:\[[^\]]*\] )?Group job (?P<group>\w+) ", re.M)


def _fields(block: str) -> tuple[str, int, list[str], str]:
    res = re.search(r"\n +resources: (.*)", block)
    res = res.group(1) if res else ""
    part = re.search(r"slurm_partition=(\w+)", res)
    gpu = re.search(r"\bgpu=(\d+)", res)
    outputs = re.search(r"\n +output: (.*)", block)
    return (
        part.group(1) if part else "",
        int(gpu.group(1)) if gpu else 0,
        outputs.group(1).split(", ") if outputs else [],
        res,
    )


def planned_jobs(stdout: str) -> list[dict]:
    """Every job a dry run prints: rule, partition, gpu count, outputs, resources text and the group
    job it is part of (None when ungrouped; each group job gets its own number)."""
    starts = sorted(
        [(m.start(), "job", m) for m in JOB_START.finditer(stdout)]
        + [(m.start(), "group", m) for m in GROUP_START.finditer(stdout)],
        key=lambda t: t[0],
    )
    out, group_no = [], 0
    for i, (pos, kind, m) in enumerate(starts):
        if kind == "group":
            group_no += 1
            continue
        end = starts[i + 1][0] if i + 1 < len(starts) else len(stdout)
        partition, gpu, outputs, res = _fields(stdout[pos:end])
        grouped = group_no if m.group("indent") else None
        out.append(
            {
                "rule": m.group("rule"),
                "partition": partition,
                "gpu": gpu,
                "outputs": outputs,
                "resources": res,
                "group_job": grouped,
            }
        )
    return out


def jobs(stdout: str) -> list[tuple[str, str, int, list[str]]]:
    """(rule, slurm partition or '', gpu count, outputs) of every job a dry run prints, grouped or not."""
    return [(j["rule"], j["partition"], j["gpu"], j["outputs"]) for j in planned_jobs(stdout)]


def submissions(stdout: str, rules: dict[str, dict]) -> dict[str, int]:
    """sbatch calls of a dry run under profiles/slurm: one per group job, one per ungrouped job of a
    rule that is not local (local rules run on the submit host), by kind."""
    planned = planned_jobs(stdout)
    groups = {j["group_job"] for j in planned if j["group_job"] is not None}
    single = [j for j in planned if j["group_job"] is None and not rules[j["rule"]]["local"]]
    return {"group jobs": len(groups), "single jobs": len(single), "total": len(groups) + len(single)}


@pytest.fixture(scope="module")
def rules(tmp_path_factory, venv_env) -> dict[str, dict]:
    """Every rule of the workflow (loaded on the all-stages config, nothing run)."""
    return workflow_rules(stand_ins(tmp_path_factory.mktemp("rules")), [ALL_STAGES], venv_env)


def family_of_rule(rule: dict) -> str | None:
    name = Path(rule["snakefile"]).name
    for f in FAMILIES:
        if name in f.rule_files:
            return f.name
    return None


# ------------------------------------------------------------------------- 1. the registry


def test_every_family_package_is_registered_once():
    declared = sorted(
        f"crucible.{p.parent.name}"
        for p in (REPO / "src/crucible").glob("*/workflow.py")
        if re.search(r"^FAMILY = Family\(", p.read_text(), re.M)
    )
    assert sorted(FAMILY_PACKAGES) == declared
    assert len(set(NAMES)) == len(NAMES)
    for f in FAMILIES:
        assert f.package == f"crucible.{f.name}", f.name  # one name: section, target, CLI group, package
        assert f.schema_file.is_file(), f.name
        assert GROUPS[f.name] == f"{f.package}.stages", f"crucible {f.name}: its CLI group is not its stages.py"


@pytest.mark.parametrize("name", NAMES)
def test_each_name_key_path_is_a_key_of_its_section(name):
    """A key path a family declares for its names (Family.defined_names, listed_names,
    single_names) names a key of its section's schema of the kind it says: a path that names
    nothing would check nothing."""
    from crucible.dag.config import family_schema

    family = registry.family(name)
    kinds = (("object", family.defined_names), ("array", family.listed_names), ("string", family.single_names))
    for kind, paths in kinds:
        for path in paths:
            schema = family_schema(name)
            for part in path:
                assert part in schema.get("properties", {}), f"{name}.{'.'.join(path)}: not in its schema"
                schema = schema["properties"][part]
            assert schema.get("type") == kind, f"{name}.{'.'.join(path)}: a {schema.get('type')}, not an {kind}"


def test_every_rule_file_caption_env_and_section_belongs_to_a_family():
    claimed = [r for f in FAMILIES for r in f.rule_files]
    assert len(claimed) == len(set(claimed)), "a rule file claimed by two families"
    assert set(claimed) | SHARED_RULE_FILES == {p.name for p in (REPO / "workflow/rules").glob("*.smk")}
    captions = [c for f in FAMILIES for c in f.captions]
    assert len(captions) == len(set(captions)), "a caption claimed by two families"
    assert set(captions) | {"workflow.rst"} == {p.name for p in (REPO / "workflow/report").glob("*.rst")}
    envs = {e for f in FAMILIES for e in f.envs}
    assert envs == {p.name for p in (REPO / "envs").glob("*.yaml")}
    for shipped in ("config/config.yaml", "config/paper.yaml"):
        assert set(yaml.safe_load((REPO / shipped).read_text())) <= set(NAMES) | set(SERVICE_SECTIONS), shipped


@pytest.mark.parametrize("name", NAMES)
def test_each_family_has_a_test_config_of_its_own_section(name):
    assert set(load_test_config(name)) == {name}, f".test/{name}/config.yaml holds other sections"


def test_the_shared_files_name_no_family():
    """Snakefile, common.smk and fetch.smk loop over the registry and config/sources.yaml: a family
    named there is drift (a family's own download, as matbench's from matminer, is its rule)."""
    for path in (REPO / "Snakefile", *(REPO / "workflow/rules" / f for f in sorted(SHARED_RULE_FILES))):
        code = "\n".join(line.split("#")[0] for line in path.read_text().splitlines())
        for name in NAMES:
            assert not re.search(rf"\b{name}\b", code), f"{path.name} names the {name} family"


# `from crucible.<module> import <name> as <alias>` or `from crucible import <module> as <alias>`
RULE_IMPORT = re.compile(r"^from crucible(?:\.(?P<pkg>[\w.]+))? import (?P<name>\w+)(?: as (?P<alias>\w+))?$", re.M)


def rule_file_imports(path: Path) -> dict[str, str]:
    """{alias: module} of every crucible import at the top level of a rule file."""
    out = {}
    for m in RULE_IMPORT.finditer(path.read_text()):
        module = f"crucible.{m['pkg']}.{m['name']}" if m["pkg"] else f"crucible.{m['name']}"
        out[m["alias"] or m["name"]] = module
    return out


def family_of_module(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 and parts[1] in NAMES else None


def test_every_rule_file_uses_only_its_own_family_and_the_shared_modules():
    """Rule files share one namespace (the Snakefile includes them all): a rule of one family that
    calls another's workflow module (as features.smk calls matbench_wf, imported by matbench.smk)
    must be that family's. Every rule file is read, the shared ones and report.smk included."""
    owner = {r: f.name for f in FAMILIES for r in f.rule_files}
    paths = sorted((REPO / "workflow/rules").glob("*.smk"))
    assert {p.name for p in paths} >= SHARED_RULE_FILES | {"report.smk"}
    aliases: dict[str, str] = {}  # alias -> the family whose module it is
    for path in paths:
        for alias, module in rule_file_imports(path).items():
            family = family_of_module(module)
            where = owner.get(path.name)
            assert family in (None, where), f"{path.name} imports {module}, a module of {family}"
            if family:
                assert aliases.setdefault(alias, family) == family, f"{alias}: a module of two families"
    assert set(aliases.values()) == set(NAMES), "a family whose rules import none of its modules"
    for path in paths:
        code = "\n".join(line.split("#")[0] for line in path.read_text().splitlines())
        for alias, family in aliases.items():
            if re.search(rf"\b{alias}\.", code):
                assert owner.get(path.name) == family, f"{path.name} calls {alias} ({family}'s module)"


def test_the_sources_modules_import_no_family():
    """crucible.sources.downloads and pinned_files (and the fetch rules' functions, crucible.sources.workflow, and the CLI) serve every
    family from config/sources.yaml alone: importing a family's package there would make the
    shared fetch stage one family's."""
    import ast

    modules = sorted((REPO / "src/crucible").glob("sources/*.py"))
    assert {p.name for p in modules} >= {"workflow.py", "stages.py", "downloads.py"}
    for path in modules:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                if isinstance(node, ast.Name | ast.Attribute | ast.FunctionDef | ast.ClassDef):
                    ident = node.id if isinstance(node, ast.Name) else getattr(node, "attr", None) or node.name
                    for name in NAMES:
                        assert not re.search(rf"(^|_){name}($|_)", ident, re.I), f"{path.name}: {ident}"
                continue
            for module in names:
                assert family_of_module(module) is None, f"{path.name} imports {module}"


def test_global_wildcard_constraints_are_claimed_by_one_family():
    config = yaml.safe_load(ALL_STAGES.read_text())
    seen: dict[str, str] = {}
    for f in FAMILIES:
        for wildcard in f.wildcard_constraints(config):
            assert wildcard not in seen, f"{wildcard}: global in {seen.get(wildcard)} and {f.name}"
            seen[wildcard] = f.name


# ---------------------------------------------------------------- 2. rules of each family


@slow
def test_every_rule_is_declared_by_its_family(rules):
    aggregates = {t for f in FAMILIES for t in f.targets({})} | {"all"}
    for name, rule in rules.items():
        where = Path(rule["snakefile"]).name
        if name in aggregates:
            assert where == "Snakefile", name
            continue
        family = family_of_rule(rule)
        assert family or where in SHARED_RULE_FILES, f"rule {name} in {where}: no family declares that file"
        if family:
            env = rule["conda_env"] and Path(rule["conda_env"]).name
            assert env in registry.family(family).envs, f"rule {name} uses {env}, not declared by {family}"
            for out in rule["output"]:
                if out["caption"]:
                    caption = Path(out["caption"]).name
                    assert caption in registry.family(family).captions, f"{name}: caption {caption} not declared"
                    assert (REPO / "workflow/report" / caption).is_file(), caption


@slow
def test_every_gpu_rule_of_the_workflow_has_its_slurm_entry(rules):
    """Exhaustive over the rules, not over one DAG: a GPU rule that no shipped config plans (as
    compute_relative_energies was) still needs its entry."""
    profile = yaml.safe_load((SLURM / "config.yaml").read_text())
    routed = {r for r, res in profile["set-resources"].items() if res.get("slurm_partition") == "gpu"}
    gpu_rules = {name for name, rule in rules.items() if "gpu" in rule["resources"]}
    assert gpu_rules, "no rule asks for a GPU"
    assert gpu_rules - routed == set(), "GPU rules that profiles/slurm leaves on the CPU partition"
    assert routed - gpu_rules == set(), "profiles/slurm sends rules to the GPU partition that ask for no GPU"
    assert set(profile["set-resources"]) <= set(rules), "set-resources names rules that do not exist"


# ------------------------------------------------------------ 3. family alone (and 5. on it)


@slow
@pytest.mark.parametrize("name", NAMES)
def test_family_plans_alone_on_its_own_section(name, tmp_path, venv_env, rules):
    family = registry.family(name)
    config = load_test_config(name)
    proc = run_snakemake(
        stand_ins(tmp_path), [test_config(name)], name, "--dry-run", "--workflow-profile", str(SLURM), env=venv_env
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    planned = jobs(proc.stdout)
    assert_gpu_partition(planned)
    for rule, *_ in planned:
        where = Path(rules[rule]["snakefile"]).name if rule in rules else "?"
        assert rule == name or where in family.rule_files or where in SHARED_RULE_FILES, (rule, where)
    made = {o for *_, outs in planned for o in outs}
    missing = [o for o in family.final_outputs(config) if o not in made]
    assert not missing, missing[:5]
    # a service (llm) makes what the families ask of it, and none asks in its own section
    assert family.final_outputs(config) or family.layer == "services", f"{name}: its test config builds nothing"


@slow
@pytest.mark.parametrize("name", NAMES)
def test_a_typo_in_its_section_is_refused_naming_the_key(name, tmp_path, venv_env):
    config = load_test_config(name)
    config[name]["datasetz"] = 1
    proc = run_snakemake(tmp_path, config, name, "--dry-run", env=venv_env)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"config error at {name}: unexpected key 'datasetz'" in out, out[-2000:]
    assert not (tmp_path / "results").exists()


@slow
@pytest.mark.parametrize("name", NAMES)
def test_a_family_switched_off_plans_no_job_of_its_own(name, tmp_path, venv_env, rules):
    """`<family>: {enabled: false}` over the all-stages config (every rule of the workflow): rule
    all plans none of that family's jobs and every final output of the others. The language
    models' jobs still answer the prompts of the families switched on, so for llm it is its own
    target, `snakemake llm`, that plans nothing."""
    config = yaml.safe_load(ALL_STAGES.read_text())
    config[name] = {**(config.get(name) or {}), "enabled": False}
    family = registry.family(name)
    proc = run_snakemake(
        stand_ins(tmp_path), config, "--dry-run", "--workflow-profile", str(SLURM), env=venv_env
    )  # profiles/slurm prints every job's outputs
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    planned = jobs(proc.stdout)
    made = {o for *_, outs in planned for o in outs}
    for other in FAMILIES:
        if other.name != name:
            missing = [o for o in other.final_outputs(config) if o not in made]
            assert other.final_outputs(config) or other.layer == "services", other.name
            assert not missing, (other.name, missing[:5])
    own = sorted({r for r, *_ in planned if Path(rules[r]["snakefile"]).name in family.rule_files})
    if name == "llm":
        from crucible.llm import workflow as llm_workflow

        asked = set(llm_workflow.final_outputs(config))
        assert all(o in asked for r, *_, outs in planned if r in own for o in outs if o.endswith(".jsonl"))
        proc = run_snakemake(tmp_path, config, "llm", "--dry-run", "--workflow-profile", str(SLURM), env=venv_env)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
        assert [(r, outs) for r, _, _, outs in jobs(proc.stdout)] == [("llm", [])], "only the empty aggregate"
    else:
        assert own == [], f"{name} switched off plans {own}"


# --------------------------------------------------------------------- 4. GPU partition

SHIPPED = {
    "config/config.yaml": [REPO / "config/config.yaml"],
    # as README runs it from the repository: config/config.yaml, then paper.yaml over it
    "config/paper.yaml": [REPO / "config/config.yaml", REPO / "config/paper.yaml"],
    ".test/matbench/structures.yaml": [test_config("matbench", "structures.yaml")],
    ".test/all-stages.yaml": [ALL_STAGES],
}  # and each .test/<family>/config.yaml, in test_family_plans_alone_on_its_own_section


@pytest.fixture(scope="module")
def slurm_plan(tmp_path_factory, venv_env):
    """``plan(configs)``: the dry run's stdout under profiles/slurm, planned once per config
    (three tests read the same plan of a shipped config; paper.yaml's takes ~40 s)."""
    plans: dict[tuple[str, ...], str] = {}

    def plan(configs) -> str:
        key = tuple(str(c) for c in configs)
        if key not in plans:
            workdir = stand_ins(tmp_path_factory.mktemp("plan"))
            proc = run_snakemake(workdir, configs, "--dry-run", "--workflow-profile", str(SLURM), env=venv_env)
            assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
            plans[key] = proc.stdout
        return plans[key]

    return plan


def assert_gpu_partition(planned) -> None:
    for rule, partition, gpu, _ in planned:
        assert (partition == "gpu") == (gpu > 0), f"{rule}: partition {partition!r}, gpu={gpu}"


@slow
@pytest.mark.parametrize("configs", SHIPPED.values(), ids=SHIPPED.keys())
def test_gpu_rules_and_only_they_go_to_the_gpu_partition(configs, slurm_plan, rules):
    planned = jobs(slurm_plan(configs))
    assert planned
    assert_gpu_partition(planned)
    if configs == [ALL_STAGES]:  # every rule of the workflow, so the check above covers them all
        aggregates = {t for f in FAMILIES for t in f.targets({})} - {"all"}
        assert {r for r, *_ in planned} | aggregates == set(rules)


@slow
def test_kappa_force_jobs_of_a_cpu_potential_take_the_plain_rules(tmp_path, venv_env):
    """κ's force rules follow the potentials' variant scheme: emt (device cpu) runs relax_kappa,
    kappa_fc2 and kappa_fc3 on CPU nodes, asking for no GPU; chgnet-0.3.0 their _neural variants
    on the GPU partition; the conductivity of both is a CPU job."""
    config = {
        "discovery": {
            "diatomics": {"potentials": []},
            "phonons": {"potentials": ["emt", "chgnet-0.3.0"], "materials": ["mp-1265"], "chunk_size": 100},
        }
    }
    proc = run_snakemake(
        stand_ins(tmp_path), config, "discovery", "--dry-run", "--workflow-profile", str(SLURM), env=venv_env
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    planned = planned_jobs(proc.stdout)
    assert_gpu_partition([(j["rule"], j["partition"], j["gpu"], j["outputs"]) for j in planned])
    force_rules = ("relax_kappa", "kappa_fc2", "kappa_fc3")
    by_potential: dict[str, set[tuple[str, str, int]]] = {}
    for j in planned:
        if j["rule"].removesuffix("_neural") in force_rules + ("kappa_conductivity",):
            potential = j["outputs"][0].split("/")[3]  # results/discovery/phonons/{potential}/...
            by_potential.setdefault(potential, set()).add((j["rule"], j["partition"], j["gpu"]))
    cpu_side = {(r, "cpu", 0) for r in force_rules}  # the profile's default partition
    gpu_side = {(f"{r}_neural", "gpu", 1) for r in force_rules}
    conductivity = {("kappa_conductivity", "cpu", 0)}
    # fc3: 146 displacements in chunks of 100 are two jobs of the same rule
    assert by_potential == {"emt": cpu_side | conductivity, "chgnet-0.3.0": gpu_side | conductivity}
    groups = re.findall(r"Group job (\w+) ", proc.stdout)
    assert {"kappa_forces", "kappa_forces_cpu", "kappa_conductivity"} <= set(groups), groups


# The submissions budget of issue 32: on a cluster each submission is an sbatch call, and sites
# rate-limit them; profiles/slurm's job groups keep the shipped configs within these.
MAX_SUBMISSIONS = {"config/config.yaml": 40, "config/paper.yaml": 80}


@slow
@pytest.mark.parametrize("name", MAX_SUBMISSIONS)
def test_job_groups_keep_submissions_few_and_gpu_jobs_apart(name, slurm_plan, rules):
    stdout = slurm_plan(SHIPPED[name])
    planned = planned_jobs(stdout)
    counts = submissions(stdout, rules)
    print(f"{name}: {len(planned)} jobs, {counts['total']} submissions ({counts})")
    assert counts["group jobs"] > 0, "profiles/slurm groups no job"
    assert counts["total"] <= MAX_SUBMISSIONS[name], counts
    members: dict[int, list[dict]] = {}
    for j in planned:
        if j["group_job"] is not None:
            members.setdefault(j["group_job"], []).append(j)
    for group in members.values():
        kinds = {(j["partition"], j["gpu"] > 0) for j in group}
        assert len(kinds) == 1, f"a group job mixes GPU and CPU jobs: {sorted({j['rule'] for j in group})}"
        assert not any(rules[j["rule"]]["local"] for j in group), "a local rule in a group job"


@slow
def test_gpu_requests_follow_the_slurm_plugin_conventions(slurm_plan, rules):
    """Every GPU rule's job (all-stages config: every rule of the workflow) asks for its GPU the
    way snakemake-executor-plugin-slurm 2.x reads it: `gpu` (--gpus) or `gres` (--gres), not both;
    `cpus_per_gpu` (--cpus-per-gpu); no `tasks`/`tasks_per_gpu` above 1, which the plugin turns into
    --ntasks-per-gpu and so one copy of the job per GPU (plugin issues 316, 459)."""
    gpu_rules = {name for name, rule in rules.items() if "gpu" in rule["resources"]}
    seen = set()
    for j in planned_jobs(slurm_plan([ALL_STAGES])):
        if j["rule"] not in gpu_rules:
            assert j["gpu"] == 0 and "gres=" not in j["resources"], j["rule"]
            continue
        seen.add(j["rule"])
        res = dict(kv.split("=", 1) for kv in j["resources"].split(", ") if "=" in kv)
        assert (int(res.get("gpu", 0)) > 0) != ("gpu" in res.get("gres", "")), (j["rule"], res)
        assert int(res.get("gpu", 1)) == 1, f"{j['rule']}: one GPU per job (jobs do not split devices)"
        assert int(res.get("cpus_per_gpu", 0)) >= 1, (j["rule"], res)
        assert int(res.get("tasks", 1)) == 1 and int(res.get("tasks_per_gpu", 1)) == 1, (j["rule"], res)
        assert "cpus_per_task" not in res, f"{j['rule']}: cpus_per_task is ignored on GPU jobs"
    assert seen == gpu_rules, f"GPU rules the all-stages plan does not hold: {sorted(gpu_rules - seen)}"


# --------------------------------------------------------------------------- 5. captions


@slow
@pytest.mark.parametrize("name", NAMES)
def test_every_table_and_figure_has_a_caption(name, rules):
    """A table's CSV and a figure's PNG are report entries with a caption (every family's tables
    enter as the same kind of file); their other formats (.md/.tex, .pdf) are the same entry's
    siblings, made by the same job."""
    from snakemake.io import regex_from_filepattern

    config = yaml.safe_load(ALL_STAGES.read_text())
    papers = [
        o for o in registry.family(name).final_outputs(config) if o.startswith(("results/tables/", "results/figures/"))
    ]
    if registry.family(name).layer == "services":  # what a service makes, the families report
        assert not papers
        return
    assert papers, f"{name}: no table or figure in the all-stages config"
    patterns = [
        (rule, re.compile(regex_from_filepattern(o["pattern"])), o["caption"])
        for rule, r in rules.items()
        for o in r["output"]
    ]
    for path in papers:
        makers = {rule for rule, rx, _ in patterns if rx.match(path)}
        assert len(makers) == 1, (path, makers)
        stem = path.rsplit(".", 1)[0]
        entries = [
            caption
            for rule, rx, caption in patterns
            if rule in makers and caption and any(rx.match(f"{stem}.{e}") for e in ("csv", "png", "xlsx"))
        ]
        assert entries, f"{path}: not in the report (no report() with a caption on it or a sibling)"
        assert all(Path(c).is_file() for c in entries), entries


# --------------------------------------------------------------------- 6. a sixth family


TOY_WORKFLOW = '''
"""A family that counts to three."""
from crucible.dag.config import section
from crucible.core.errors import ConfigError
from crucible.dag.families import Family


def final_outputs(config):
    return [f"results/tables/toyfam_{n}.csv" for n in range(section(config, "toyfam")["count"])]


def check(config):
    if section(config, "toyfam")["count"] > 3:
        raise ConfigError("config toyfam.count: more than three")


FAMILY = Family(
    name="toyfam",
    package="toyfam",
    final_outputs=final_outputs,
    check=check,
    captions=(),
    defined_names=(("things",),),
)
'''
TOY_STAGES = '''
"""``crucible toyfam ...``: count."""
from crucible.stages.declaration import Stage

HELP = "a family that counts to three"
STAGES = (Stage("count", "write one number", ".work:count"),)
'''
TOY_WORK = '''
import os


def count(n: int, out: str | os.PathLike) -> None:
    """Write ``n``.

    Args:
        n: the number
        out: the file to write
    """
    with open(out, "w") as f:
        f.write(f"{n}\\n")
'''
TOY_RULES = """
rule count_toyfam:
    output:
        "results/tables/toyfam_{n}.csv",
    shell:
        "echo {wildcards.n} > {output}"
"""


def toy_family(site: Path) -> Path:
    """The toy family's package, outside crucible (``site/toyfam``): everything it is, in its own files."""
    package = site / "toyfam"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""toy"""\n')
    (package / "workflow.py").write_text(textwrap.dedent(TOY_WORKFLOW))
    (package / "stages.py").write_text(textwrap.dedent(TOY_STAGES))
    (package / "work.py").write_text(textwrap.dedent(TOY_WORK))
    (package / "config.schema.yaml").write_text(
        "type: object\nadditionalProperties: false\nproperties:\n"
        "  count: {type: integer, default: 0}\n  things: {type: object, default: {}}\n"
    )
    return package


@pytest.fixture
def toy_registered(tmp_path, monkeypatch):
    """The toy family with its one registry line (crucible.stages.groups.FAMILY_PACKAGES), and nothing
    else of crucible touched."""
    from crucible.dag import config as dag_config
    from crucible.identity import job_code
    from crucible.stages import declaration as stage
    from crucible.stages import groups

    package = toy_family(tmp_path / "site")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    caches = (registry.families, stage.stages_of, job_code.command_handler, dag_config.family_schema)
    for cached in caches:
        cached.cache_clear()
    monkeypatch.setattr(groups, "FAMILY_PACKAGES", (*groups.FAMILY_PACKAGES, "toyfam"))
    yield package
    monkeypatch.undo()
    for cached in caches:
        cached.cache_clear()


def test_a_registered_family_is_a_cli_group_checks_its_names_and_has_a_floor(toy_registered, tmp_path, capsys):
    """The one registry line makes the toy package a family everywhere: its CLI group (from its
    stages.py: commands, help, shell lines), the key paths of the names its section defines (from
    its Family), and its floor in the import graph (from its Family, read by ast)."""
    import sys

    from crucible.cli import main
    from crucible.core.errors import ConfigError
    from crucible.dag.config_names import check_config_names, name_key_paths
    from crucible.stages import declaration as stage

    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        import import_graph
    finally:
        sys.path.remove(str(REPO / "benchmarks"))

    assert GROUPS["toyfam"] == "toyfam.stages" and list(GROUPS)[-1] == "toyfam"
    assert registry.family("toyfam").layer == "families"
    assert main(["toyfam", "count", "--n", "2", "--out", str(tmp_path / "two.txt")]) == 0
    assert (tmp_path / "two.txt").read_text() == "2\n"
    assert stage.shell("toyfam count", n="{wildcards.n}").endswith(
        "crucible toyfam count --n {wildcards.n} --out {output.out:q} 2> {log:q}"
    )
    with pytest.raises(SystemExit):
        main(["--help"])
    assert re.search(r"toyfam +a family that counts to three", capsys.readouterr().out)
    assert ("toyfam", "things") in name_key_paths()[0]
    check_config_names({"toyfam": {"things": {"apples": 1}}})
    with pytest.raises(ConfigError, match="config error at toyfam.things.a/b: 'a/b' holds a path separator"):
        check_config_names({"toyfam": {"things": {"a/b": 1}}})
    assert import_graph.family_layer(toy_registered) == "families"
    llm = REPO / "src/crucible/llm"
    assert import_graph.family_layer(llm) == "services" == registry.family("llm").layer


def test_without_its_registry_line_the_toy_is_nothing(tmp_path):
    toy_family(tmp_path / "site")
    assert "toyfam" not in GROUPS
    with pytest.raises(KeyError, match="no benchmark family 'toyfam'"):
        registry.family("toyfam")


@slow
def test_a_sixth_family_is_its_package_its_rules_and_one_registry_line(tmp_path, venv_env):
    clone = tmp_path / "clone"
    clone.mkdir()
    for name in ("Snakefile", "workflow", "config", "envs"):
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy)(REPO / name, clone / name)
    (clone / "workflow/rules/toyfam.smk").write_text(TOY_RULES)
    toy_family(tmp_path / "site")
    # the toy package first, then the crucible under test (a worktree's src/, where one is on the path)
    site = [str(tmp_path / "site"), *filter(None, [venv_env.get("PYTHONPATH")])]
    env = {**venv_env, "PYTHONPATH": os.pathsep.join(site)}
    work = tmp_path / "work"
    work.mkdir()

    def run(config, *args):
        return run_snakemake(work, config, *args, env=env, snakefile=clone / "Snakefile", register=["toyfam"])

    proc = run({"toyfam": {"count": 2}}, "toyfam")
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert (work / "results/tables/toyfam_1.csv").read_text() == "1\n"
    proc = run({"toyfam": {"count": 3}, "reactions": {}}, "--dry-run")  # rule all: the union
    assert proc.returncode == 0 and "results/tables/toyfam_2.csv" in proc.stdout, proc.stdout[-3000:]
    proc = run({"toyfam": {"count": 4}}, "--dry-run")
    assert proc.returncode != 0 and "config toyfam.count: more than three" in proc.stdout + proc.stderr
    proc = run({"toyfam": {"cuont": 1}}, "--dry-run")
    assert proc.returncode != 0 and "toyfam: unexpected key 'cuont'" in proc.stdout + proc.stderr
    # the names its section defines are checked from its declaration's key paths, at start-up
    proc = run({"toyfam": {"count": 1, "things": {"a/b": 1}}}, "--dry-run")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "config error at toyfam.things.a/b: 'a/b' holds a path separator" in out, out


# ------------------------------------------------------------------------- 8. bookkeeping


def test_every_job_writes_its_time_and_memory_under_benchmarks_runs(rules):
    """The README says per-job wall time and memory go to benchmarks/runs/: every rule that makes
    files has a ``benchmark:`` there (the aggregate targets make none)."""
    untimed = sorted(name for name, rule in rules.items() if rule["output"] and not rule["benchmark"])
    assert untimed == []
    timed = [r["benchmark"] for r in rules.values() if r["benchmark"]]
    assert timed and all(b.startswith("benchmarks/runs/") for b in timed)
