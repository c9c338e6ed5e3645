"""CPU throughput of the transformers backend with the tests' tiny random GPT-2 (2 layers, d=32).

    PYTHONPATH=src python benchmarks/bench_llm_transformers.py [--threads 2]

Prints generated tokens per second for several batch sizes; 64 prompts, 32 new tokens each,
greedy. The number measures crucible's batching and decoding overhead, not a real model.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from conftest import build_tiny_causal_lm  # noqa: E402

from crucible.llm.files import Prompt  # noqa: E402
from crucible.llm.transformers_backend import TransformersBackend  # noqa: E402

WORDS = "the a of crystal reaction yield catalyst base solvent ligand oxide metal cubic phase".split()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    prompts = [
        Prompt(f"q{k}", ({"role": "user", "content": " ".join(WORDS[(k + j) % len(WORDS)] for j in range(3 + k % 9))},))
        for k in range(args.prompts)
    ]
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = build_tiny_causal_lm(Path(tmp))
        for batch_size in (1, 8, 32):
            backend = TransformersBackend("tiny", str(ckpt), batch_size=batch_size, device="cpu")
            backend.load()
            t0, c0 = time.perf_counter(), time.process_time()
            out = backend.generate(prompts, {"max_tokens": args.max_tokens, "temperature": 0.0})
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            tokens = sum(c.usage["completion_tokens"] for c in out)
            # CPU seconds too: on a shared machine the wall time says as much about the neighbours.
            print(
                f"batch_size {batch_size:3d}: {len(out)} prompts, {tokens} tokens in {wall:.2f} s wall = "
                f"{tokens / wall:.0f} tokens/s ({len(out) / wall:.1f} prompts/s); {cpu:.2f} CPU s = "
                f"{tokens / cpu:.0f} tokens per CPU second; {args.threads} threads; load {os.getloadavg()[0]:.1f}"
            )


if __name__ == "__main__":
    main()
