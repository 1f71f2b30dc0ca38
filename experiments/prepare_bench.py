"""Corpus preparation at scale (issue 36): time, tokens/s beside ``tokenizers``' own rate on the same text and
pipeline in the same run, and peak memory, for ``data.num_proc`` 1 and 2.

The corpus is generated deterministically from the sample books' paragraphs (their non-empty lines), shuffled with a
seed, and is not committed: ``books`` writes book-sized files (0.8 MB each), ``one-file`` one .txt file (one
document), ``jsonl`` a paragraph per row. The tokenizer is a BPE of 8,192 trained on the sample books' training split
(the quickstart's), loaded through ``tokenizer.path``. Each measurement runs in a fresh process (its peak RSS is its
own, from ``resource.getrusage``), and they alternate: tokenizers' rate, then preparation, so that the two sides of
each ratio are timed minutes apart on a shared machine.

    python experiments/prepare_bench.py --mb 100 200 --out /tmp/prepare-bench  # what experiments/benchmarks.md records
    python experiments/prepare_bench.py --mb 2048 --out /scratch/prepare-bench        # the issue's 2 GB corpus
    python experiments/prepare_bench.py --mb 100 --shape one-file jsonl --num-proc 1

The tokenizers' rate: ``Tokenizer.encode_batch_fast`` (the pipeline's normaliser, pre-tokenizer and BPE, on every core)
over the whole corpus in 16 MiB calls of 64K-character pieces, timing only the calls. gpt1's: ``prepare_data`` on an
empty cache, timed around the call (reading the files, splitting, encoding, writing the .bin; for jsonl also datasets'
conversion to Arrow). Both also in CPU seconds (this process and its workers), which a loaded machine disturbs less.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

BOOK_BYTES = 800_000

CHILD = r"""
import json, resource, sys, time
from pathlib import Path
what, corpus, tokenizer, cache, num_proc = sys.argv[1:6]
def cpu():  # seconds of CPU of this process and its waited-for workers
    usages = map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return sum(r.ru_utime + r.ru_stime for r in usages)
from gpt1.text.tokenizer import Tokenizer
tok = Tokenizer.from_str(Path(tokenizer).read_text())
if what == "tokenizers":
    from gpt1.data.corpus import CorpusSource
    from gpt1.data.data_config import DataConfig
    src = CorpusSource(DataConfig(train_files=[corpus]), "train", Path(cache))
    batch, size, tokens, spent, cpu_s = [], 0, 0, 0.0, 0.0
    def encode(batch):
        start, start_cpu = time.perf_counter(), cpu()
        out = tok.bpe.encode_batch_fast(batch, add_special_tokens=False)
        return sum(len(e.ids) for e in out), time.perf_counter() - start, cpu() - start_cpu
    for text, _ in src.pieces():
        batch.append(text); size += len(text)
        if size >= 16 << 20:
            n, s, c = encode(batch); tokens += n; spent += s; cpu_s += c; batch, size = [], 0
    if batch:
        n, s, c = encode(batch); tokens += n; spent += s; cpu_s += c
    seconds = spent
else:
    from gpt1.data.data_config import DataConfig
    from gpt1.data.pretrain_data import PretrainDataModule
    from gpt1.text.tokenizer import TokenizerConfig
    dm = PretrainDataModule(DataConfig(train_files=[corpus], valid_fraction=0.001, num_proc=int(num_proc)),
                            TokenizerConfig(path=tokenizer), n_ctx=512, seed=0, cache_dir=cache)
    start, start_cpu = time.perf_counter(), cpu()
    dm.prepare_data()
    seconds, cpu_s = time.perf_counter() - start, cpu() - start_cpu
    tokens = sum(p.stat().st_size for p in dm.paths.values()) // 2  # uint16
print(json.dumps({"tokens": tokens, "seconds": seconds, "cpu_s": cpu_s,
                  "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def sample_books() -> Path:
    from gpt1.app.config import default_sample_data

    return Path(os.environ.get("GPT1_SAMPLE_DATA", default_sample_data())) / "books"


def paragraphs() -> list[str]:
    return [
        line
        for path in sorted(sample_books().glob("*/*.txt"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def generate(root: Path, mb: int, shape: str, seed: int = 0) -> str:
    """Write a corpus of about ``mb`` MB under ``root``; return its glob."""
    rng, paras, target = random.Random(seed), paragraphs(), mb * 1_000_000
    root.mkdir(parents=True, exist_ok=True)
    if shape == "jsonl":
        path, written = root / "corpus.jsonl", 0
        with open(path, "w") as f:
            while written < target:
                line = json.dumps({"text": rng.choice(paras)}) + "\n"
                f.write(line)
                written += len(line)
        return str(path)
    books, written = [], 0
    while written < target:
        book, size = [], 0
        while size < BOOK_BYTES:
            book.append(rng.choice(paras))
            size += len(book[-1]) + 1
        books.append("\n".join(book) + "\n")
        written += size
    if shape == "one-file":
        (root / "corpus.txt").write_text("".join(books))
        return str(root / "corpus.txt")
    for i, book in enumerate(books):
        (root / f"book{i:05d}.txt").write_text(book)
    return str(root / "*.txt")


def measure(what: str, corpus: str, tokenizer: Path, cache: Path, num_proc: int = 1) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, what, corpus, str(tokenizer), str(cache), str(num_proc)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"error: {what} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["tokens_per_s"] = result["tokens"] / result["seconds"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, nargs="+", default=[100], help="corpus sizes in MB")
    parser.add_argument("--shape", nargs="+", default=["books"], choices=["books", "one-file", "jsonl"])
    parser.add_argument("--num-proc", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--out", type=Path, required=True, help="a scratch directory (corpora, caches, results)")
    args = parser.parse_args()
    from gpt1.text.tokenizer import train_bpe

    tokenizer = args.out / "bpe8192.json"
    if not tokenizer.is_file():
        args.out.mkdir(parents=True, exist_ok=True)
        texts = [p.read_text() for p in sorted((sample_books() / "train").glob("*.txt"))]
        tokenizer.write_text(train_bpe(texts, vocab_size=8192).to_str())
    rows = []
    for shape in args.shape:
        for mb in args.mb:
            corpus = generate(args.out / f"{shape}-{mb}mb", mb, shape)
            for num_proc in args.num_proc:
                base = measure("tokenizers", corpus, tokenizer, args.out / "cache-scratch")
                ours = measure(
                    "prepare", corpus, tokenizer, args.out / f"cache-{shape}-{mb}-{num_proc}-{time.time_ns()}", num_proc
                )
                row = {
                    "shape": shape,
                    "mb": mb,
                    "num_proc": num_proc,
                    "tokens": ours["tokens"],
                    "seconds": round(ours["seconds"], 1),
                    "tokens_per_s": round(ours["tokens_per_s"]),
                    "tokenizers_per_s": round(base["tokens_per_s"]),
                    "ratio": round(ours["tokens_per_s"] / base["tokens_per_s"], 3),
                    "cpu_s": round(ours["cpu_s"], 1),
                    "tokenizers_cpu_s": round(base["cpu_s"], 1),
                    "peak_rss_mb": round(ours["peak_rss_mb"]),
                    "tokenizers_peak_rss_mb": round(base["peak_rss_mb"]),
                    "at": time.strftime("%H:%M"),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(
        "| shape | MB | num_proc | tokens | time s | tokens/s | tokenizers' tokens/s | ratio | CPU s (tokenizers') "
        "| peak RSS MB (tokenizers') |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['shape']} | {r['mb']} | {r['num_proc']} | {r['tokens']:,} | {r['seconds']} | {r['tokens_per_s']:,} "
            f"| {r['tokenizers_per_s']:,} | {r['ratio']:.2f} | {r['cpu_s']} ({r['tokenizers_cpu_s']}) "
            f"| {r['peak_rss_mb']:,} ({r['tokenizers_peak_rss_mb']:,}) |"
        )
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
