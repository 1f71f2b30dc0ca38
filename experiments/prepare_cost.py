"""Where corpus preparation's CPU goes (issue 36), side by side so that a shared machine's load falls on both sides:

- ``rounds``: alternating fresh processes, N rounds of tokenizers' own ``encode_batch_fast`` (16 MiB calls, every
  core), ``gpt1.data.corpus.pack`` with num_proc 1 and with num_proc 2, each's CPU seconds (parent and workers);
- ``worker``: in one process, the same batches encoded by ``encode_flat`` in the parent (one thread) and in a forked
  worker of ``Pool(1)``, batch by batch alternating, the CPU timed inside each, and the worker's CPU in all.

    python experiments/prepare_cost.py rounds --files 'DIR/*.txt' --tokenizer bpe8192.json --rounds 6
    python experiments/prepare_cost.py worker --files 'DIR/*.txt' --tokenizer bpe8192.json

(experiments/prepare_bench.py writes such a corpus and tokenizer; experiments/results/benchmarks.md records the
figures.)
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def one(mode: str, files: str, tokenizer_path: str) -> dict:
    """One measurement in this (fresh) process: "tokenizers", or "packN" (num_proc N), or "packN:M" (and batches of
    M MiB of text instead of ``BATCH_CHARS``)."""
    from gpt1.data.corpus import BATCH_CHARS, CorpusSource, pack
    from gpt1.data.data_config import DataConfig
    from gpt1.text.tokenizer import Tokenizer

    tok = Tokenizer.from_str(Path(tokenizer_path).read_text())
    with tempfile.TemporaryDirectory() as tmp:
        src = CorpusSource(DataConfig(train_files=[files]), "train", Path(tmp))
        if mode == "tokenizers":
            batches, batch, size = [], [], 0
            for text, _ in src.pieces():
                batch.append(text)
                size += len(text)
                if size >= 16 << 20:
                    batches.append(batch)
                    batch, size = [], 0
            batches += [batch] if batch else []
            start = cpu(resource.RUSAGE_SELF)
            n = sum(len(e.ids) for b in batches for e in tok.bpe.encode_batch_fast(b, add_special_tokens=False))
            return {"mode": mode, "tokens": n, "cpu_s": cpu(resource.RUSAGE_SELF) - start}
        start = cpu(resource.RUSAGE_SELF) + cpu(resource.RUSAGE_CHILDREN)
        num_proc, _, mib = mode.removeprefix("pack").partition(":")
        chars = int(float(mib) * (1 << 20)) if mib else BATCH_CHARS
        n = pack(src.pieces(), Path(tmp) / "out.bin", tok, tok.special_id("eod"), int(num_proc), batch_chars=chars)
        return {"mode": mode, "tokens": n, "cpu_s": cpu(resource.RUSAGE_SELF) + cpu(resource.RUSAGE_CHILDREN) - start}


_tok = None  # worker()'s tokenizer


def _timed(texts: list[str]) -> float:
    """CPU seconds of ``encode_flat`` on ``texts`` in this process."""
    from gpt1.data.corpus import encode_flat

    start = time.process_time()
    encode_flat(_tok, texts, "uint16")
    return time.process_time() - start


def worker(files: str, tokenizer_path: str, batches_n: int = 12, rounds: int = 3) -> dict:
    import multiprocessing

    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # the parent's encoding on one thread, as a worker's
    from gpt1.data import corpus
    from gpt1.data.data_config import DataConfig
    from gpt1.text.tokenizer import Tokenizer

    global _tok
    _tok = Tokenizer.from_str(Path(tokenizer_path).read_text())  # the forked worker inherits it
    with tempfile.TemporaryDirectory() as tmp:
        src = corpus.CorpusSource(DataConfig(train_files=[files]), "train", Path(tmp))
        batches = [[t for t, _ in b] for b in corpus._batches(src.pieces(), corpus.BATCH_CHARS)][:batches_n]

    pool = multiprocessing.get_context("fork").Pool(1)
    parent = in_worker = 0.0
    for _ in range(rounds):
        for b in batches:
            parent += _timed(b)
            in_worker += pool.apply(_timed, (b,))
    pool.close()
    pool.join()
    return {"parent_encode_s": parent, "worker_encode_s": in_worker, "worker_all_s": cpu(resource.RUSAGE_CHILDREN)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", help="rounds, worker, or one measurement: tokenizers, packN or packN:MiB")
    parser.add_argument("--files", required=True, help="a glob of .txt files")
    parser.add_argument("--tokenizer", required=True, help="a gpt1 tokenizer JSON")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--modes", nargs="+", default=["pack1", "pack2"], help="rounds: what to set beside tokenizers")
    args = parser.parse_args()
    if args.what == "worker":
        print(json.dumps(worker(args.files, args.tokenizer)))
    elif args.what == "rounds":
        for _ in range(args.rounds):
            row = {}
            for mode in ("tokenizers", *args.modes):
                cmd = [sys.executable, __file__, mode, "--files", args.files, "--tokenizer", args.tokenizer]
                row[mode] = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)["cpu_s"]
            row |= {f"ratio_{m}": round(row["tokenizers"] / row[m], 3) for m in args.modes}
            print(json.dumps(row), flush=True)
    else:
        print(json.dumps(one(args.what, args.files, args.tokenizer)))


if __name__ == "__main__":
    main()
