"""Corpus preparation at scale (issue 36): time, tokens/s beside ``tokenizers``' own rate on the same text and
pipeline in the same run, and peak memory, for ``data.num_proc`` 1 and 2, for each shape of corpus.

The corpus is generated deterministically from the sample books' paragraphs (their non-empty lines), shuffled with a
seed, and is not committed. Shapes: ``books`` book-sized .txt files (``--book-mb``, 0.8 MB each by default),
``one-file`` one .txt file (one document), ``jsonl`` a paragraph per row, in files of ``--file-mb``, ``rows`` a
JSONL of books, a book per row (whole books as rows: with ``--book-mb 30``, rows of 30 MB), ``hub`` a dataset in the
hub's layout (``data/train-*.parquet`` shards of ``--file-mb``, row groups of at most ``--row-group-mb``, a book
per row) named by its local path in ``data.hf_dataset``: the hub code path (``datasets.load_dataset``, its Arrow
cache), without a network. The tokenizer is a BPE of 8,192 trained on the sample books' training split (the
quickstart's), loaded through ``tokenizer.path``.

Each measurement runs in a fresh process, and prints its figures as it ends (the table comes at the end). For
each corpus: tokenizers' rate, then gpt1's preparation with each ``num_proc``, then tokenizers' rate again; a row's
ratio is against the mean of the two tokenizers runs that bracket it (both are given), so that a neighbour's load
that comes or goes during the run shows as their spread.

    python experiments/prepare_bench.py --mb 100 200 --out /tmp/prepare-bench  # books at two sizes
    python experiments/prepare_bench.py --mb 25 100 --shape books one-file jsonl hub --bpe --out DIR  # every shape
    python experiments/prepare_bench.py --mb 2048 --clean --out DIR  # the issue's 2 GB book corpus, deleted after
    python experiments/prepare_bench.py --mb 30 300 --book-mb 30 --shape books rows hub --num-proc 1 --out DIR  # rows

The tokenizers' rate: ``Tokenizer.encode_batch_fast`` (the pipeline's normaliser, pre-tokenizer and BPE, on every core)
over the whole corpus in 16 MiB calls of 64K-character pieces, timing only the calls (and the ids to Python lists).
gpt1's: ``prepare_data`` on an empty cache, timed around the call (reading the files, checking their UTF-8, cutting,
encoding, writing the .bin; for jsonl and hub also datasets' conversion to Arrow, which tokenizers' runs read
already converted: it is timed apart too, and the ratios are given without it). Both also in CPU seconds (this
process and its workers), which a loaded machine disturbs less. ``--bpe``: training a BPE of 8,192 on each corpus the
way ``prepare_data`` does (streamed pieces), its time and peak memory.

Memory: each process first applies gpt1's CPU settings, as every command does (``gpt1.cpu.settings.configure``:
glibc's allocator then keeps freed memory, which moves the heap's peak). The process's peak RSS (``VmHWM``), and
sampled every 0.2 s its peak anonymous memory (the heap: what grows if anything held grows) and its peak file-backed
resident pages (the mapped libraries, torch's among them, and any memory map: the kernel maps more or fewer of them
from the page cache depending on what else runs, so this term varies between runs without anything growing); for
``num_proc`` > 1 the largest worker's peak RSS (its pages shared with the parent included) and the workers' largest
sum of private pages.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

BOOK_BYTES = 800_000
SHAPES = ["books", "one-file", "jsonl", "rows", "hub"]

CHILD = r"""
import json, os, resource, sys, threading, time
from pathlib import Path
from gpt1.cpu.settings import configure
configure()  # as every gpt1 command does first: its allocator settings move the heap's peak
what, spec, tokenizer, cache, num_proc = sys.argv[1:6]
spec = json.loads(spec)
def cpu():  # seconds of CPU of this process and its waited-for workers
    usages = map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return sum(r.ru_utime + r.ru_stime for r in usages)
peak = {"anon": 0, "file": 0, "workers_private": 0}
def status(pid="self"):
    with open(f"/proc/{pid}/status") as f:
        return {l.split(":")[0]: int(l.split()[1]) for l in f if l.startswith(("RssAnon", "RssFile"))}
def status_kb(field):
    with open("/proc/self/status") as f:
        return next(int(l.split()[1]) for l in f if l.startswith(field + ":"))
def private(pid):
    with open(f"/proc/{pid}/smaps_rollup") as f:
        return sum(int(l.split()[1]) for l in f if l.startswith(("Private_Clean", "Private_Dirty")))
def sample():
    while True:
        s = status()
        peak["anon"], peak["file"] = max(peak["anon"], s["RssAnon"]), max(peak["file"], s["RssFile"])
        try:  # (a thread or a worker that ended meanwhile: this sample only is lost, not the sampling)
            tasks = [f"/proc/self/task/{t}/children" for t in os.listdir("/proc/self/task")]
            kids = [p for task in tasks for p in open(task).read().split()]
            peak["workers_private"] = max(peak["workers_private"], sum(private(p) for p in kids))
        except OSError:
            pass
        time.sleep(0.2)
threading.Thread(target=sample, daemon=True).start()
from gpt1.data.data_config import DataConfig
from gpt1.data.corpus import CorpusSource
from gpt1.data.pretrain_data import PretrainDataModule
from gpt1.text.tokenizer import Tokenizer, TokenizerConfig
cfg = DataConfig(**spec, valid_fraction=0.001, num_proc=int(num_proc))
start, start_cpu = time.perf_counter(), cpu()
if what == "tokenizers":
    tok = Tokenizer.from_str(Path(tokenizer).read_text())
    src = CorpusSource(cfg, "train", Path(cache))
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
elif what == "bpe":
    dm = PretrainDataModule(cfg, TokenizerConfig(vocab_size=8192), n_ctx=512, seed=0, cache_dir=cache)
    dm._get_tokenizer(create=True)  # trains the BPE (prepare_data's first step) and nothing else
    seconds, cpu_s, tokens = time.perf_counter() - start, cpu() - start_cpu, 0
else:
    CorpusSource(cfg, "train", Path(cache)).parts  # a table's conversion into datasets' cache, timed apart
    convert_s, convert_cpu_s = time.perf_counter() - start, cpu() - start_cpu
    dm = PretrainDataModule(cfg, TokenizerConfig(path=tokenizer), n_ctx=512, seed=0, cache_dir=cache)
    dm.prepare_data()  # (finds the conversion in datasets' cache)
    seconds, cpu_s = time.perf_counter() - start, cpu() - start_cpu
    tokens = sum(p.stat().st_size for p in dm.paths.values()) // 2  # uint16
print(json.dumps({"tokens": tokens, "seconds": seconds, "cpu_s": cpu_s,
                  **({"convert_s": convert_s, "convert_cpu_s": convert_cpu_s} if what == "prepare" else {}),
                  "peak_rss_mb": status_kb("VmHWM") / 1024,  # not ru_maxrss: Linux keeps the parent's across exec
                  "peak_anon_mb": peak["anon"] / 1024, "peak_file_mb": peak["file"] / 1024,
                  "worker_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
                  "workers_private_mb": peak["workers_private"] / 1024}))
"""


def sample_books() -> Path:
    from gpt1.data.sample import sample_data

    return Path(sample_data(os.environ.get("GPT1_CACHE_DIR", "outputs/cache"))) / "books"


def paragraphs() -> list[str]:
    return [
        line
        for path in sorted(sample_books().glob("*/*.txt"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def generate(
    root: Path,
    mb: int,
    shape: str,
    seed: int = 0,
    file_mb: int = 200,
    row_group_mb: int = 100,
    book_bytes: int = BOOK_BYTES,
) -> dict:
    """Write a corpus of about ``mb`` MB under ``root`` (once: kept if it is there); return the data config that
    names it (``DataConfig``'s fields). Books hold about ``book_bytes`` each; JSONL files of paragraphs and parquet
    shards about ``file_mb`` MB each (as ``push_to_hub`` shards them, at least a book), a shard's row groups about
    ``row_group_mb`` MB (datasets aims at 100 MB; at least a book)."""
    done = root / "done.json"
    if done.is_file():
        return json.loads(done.read_text())
    rng, paras, target = random.Random(seed), paragraphs(), mb * 1_000_000
    root.mkdir(parents=True, exist_ok=True)
    if shape == "jsonl":
        written, files, f = 0, [], None
        while written < target:
            if f is None or f.tell() >= file_mb * 1_000_000:
                if f is not None:
                    f.close()
                files.append(root / f"corpus-{len(files):05d}.jsonl")
                f = open(files[-1], "w")
            line = json.dumps({"text": rng.choice(paras)}) + "\n"
            f.write(line)
            written += len(line)
        f.close()
        spec = {"train_files": [str(root / "corpus-*.jsonl")]}
    else:
        books, written = [], 0
        while written < target:
            book, size = [], 0
            while size < book_bytes:
                book.append(rng.choice(paras))
                size += len(book[-1]) + 1
            books.append("\n".join(book) + "\n")
            written += size
        if shape == "one-file":
            (root / "corpus.txt").write_text("".join(books))
            spec = {"train_files": [str(root / "corpus.txt")]}
        elif shape == "rows":
            with open(root / "books.jsonl", "w") as f:
                f.writelines(json.dumps({"text": book}) + "\n" for book in books)
            spec = {"train_files": [str(root / "books.jsonl")]}
        elif shape == "hub":
            import pyarrow as pa
            import pyarrow.parquet as pq

            (root / "data").mkdir()
            per_shard, per_group = (max(1, round(n * 1_000_000 / book_bytes)) for n in (file_mb, row_group_mb))
            shards = [books[i : i + per_shard] for i in range(0, len(books), per_shard)]
            for i, shard in enumerate(shards):
                path = root / "data" / f"train-{i:05d}-of-{len(shards):05d}.parquet"
                pq.write_table(pa.table({"text": shard}), path, row_group_size=per_group)
            spec = {"hf_dataset": str(root), "hf_train_split": "train", "hf_valid_split": None}
        else:
            for i, book in enumerate(books):
                (root / f"book{i:05d}.txt").write_text(book)
            spec = {"train_files": [str(root / "*.txt")]}
    done.write_text(json.dumps(spec))
    return spec


def measure(what: str, spec: dict, tokenizer: Path, cache: Path, num_proc: int = 1) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, what, json.dumps(spec), str(tokenizer), str(cache), str(num_proc)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.exit(f"error: {what} failed:\n{proc.stderr[-3000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["tokens_per_s"] = result["tokens"] / result["seconds"]
    result["tokens_per_cpu_s"] = result["tokens"] / max(result["cpu_s"], 1e-9)
    print(json.dumps({"what": what, "num_proc": num_proc, "at": time.strftime("%H:%M"), **result}), flush=True)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, nargs="+", default=[100], help="corpus sizes in MB")
    parser.add_argument("--shape", nargs="+", default=["books"], choices=SHAPES)
    parser.add_argument("--num-proc", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--file-mb", type=int, default=50, help="MB per JSONL file and per parquet shard")
    parser.add_argument("--row-group-mb", type=int, default=100, help="MB per parquet row group (datasets' 100)")
    parser.add_argument("--book-mb", type=float, default=BOOK_BYTES / 1e6, help="MB per book (books, rows, hub)")
    parser.add_argument("--bpe", action="store_true", help="also train a BPE on each corpus")
    parser.add_argument("--clean", action="store_true", help="delete each corpus and its caches once measured")
    parser.add_argument("--out", type=Path, required=True, help="a scratch directory (corpora, caches, results)")
    args = parser.parse_args()
    from gpt1.text.tokenizer import train_bpe

    tokenizer = args.out / "bpe8192.json"
    if not tokenizer.is_file():
        args.out.mkdir(parents=True, exist_ok=True)
        texts = [p.read_text() for p in sorted((sample_books() / "train").glob("*.txt"))]
        tokenizer.write_text(train_bpe(texts, vocab_size=8192).to_str())
    rows, results = [], args.out / "results.jsonl"

    def record(row: dict) -> None:
        row["at"] = time.strftime("%H:%M")
        rows.append(row)
        print(json.dumps(row), flush=True)
        with open(results, "a") as f:
            f.write(json.dumps(row) + "\n")

    def fresh(name: str) -> Path:
        return args.out / f"cache-{name}-{time.time_ns()}"

    for shape in args.shape:
        for mb in args.mb:
            book_bytes = round(args.book_mb * 1_000_000)
            books = "" if book_bytes == BOOK_BYTES else f"-book{args.book_mb:g}mb"
            name = f"{shape}-{mb}mb{books}"  # the corpus's directory; its caches' names start with it
            label = shape if not books else f"{shape}, {args.book_mb:g} MB books"
            spec = generate(args.out / name, mb, shape, 0, args.file_mb, args.row_group_mb, book_bytes)
            scratch = fresh(f"{name}-scratch")  # the baseline's Arrow conversion (jsonl, rows, hub), kept for both
            before = measure("tokenizers", spec, tokenizer, scratch)
            ours = {n: measure("prepare", spec, tokenizer, fresh(f"{name}-{n}"), n) for n in args.num_proc}
            after = measure("tokenizers", spec, tokenizer, scratch)
            base_rate = (before["tokens_per_s"] + after["tokens_per_s"]) / 2
            base_cpu = (before["tokens_per_cpu_s"] + after["tokens_per_cpu_s"]) / 2
            for n, r in ours.items():
                record(
                    {
                        "shape": label,
                        "mb": mb,
                        "num_proc": n,
                        "tokens": r["tokens"],
                        "seconds": round(r["seconds"], 1),
                        "tokens_per_s": round(r["tokens_per_s"]),
                        "tokenizers_per_s": [round(before["tokens_per_s"]), round(after["tokens_per_s"])],
                        "ratio": round(r["tokens_per_s"] / base_rate, 3),
                        "cpu_s": round(r["cpu_s"], 1),
                        "tokenizers_cpu_s": [round(before["cpu_s"], 1), round(after["cpu_s"], 1)],
                        "cpu_ratio": round(r["tokens_per_cpu_s"] / base_cpu, 3),
                        "convert_s": round(r["convert_s"], 1),
                        "convert_cpu_s": round(r["convert_cpu_s"], 1),
                        "ratio_encoding": round(r["tokens"] / (r["seconds"] - r["convert_s"]) / base_rate, 3),
                        "cpu_ratio_encoding": round(r["tokens"] / (r["cpu_s"] - r["convert_cpu_s"]) / base_cpu, 3),
                        **{k: round(v) for k, v in r.items() if k.endswith("_mb")},
                        "tokenizers_peak_rss_mb": round(max(before["peak_rss_mb"], after["peak_rss_mb"])),
                    }
                )
            if args.bpe:
                r = measure("bpe", spec, tokenizer, fresh(f"{name}-bpe"))
                record(
                    {
                        "shape": label,
                        "mb": mb,
                        "what": "bpe",
                        "seconds": round(r["seconds"], 1),
                        "cpu_s": round(r["cpu_s"], 1),
                    }
                    | {k: round(v) for k, v in r.items() if k.endswith("_mb")}
                )
            if args.clean:
                for path in [args.out / name, *args.out.glob(f"cache-{name}-*")]:
                    shutil.rmtree(path)
    print(
        "| shape | MB | num_proc | tokens | time s (conversion) | tokens/s | tokenizers' tokens/s (before, after) "
        "| ratio (without the conversion) | CPU s (conversion; tokenizers' before, after) "
        "| CPU ratio (without the conversion) | peak RSS MB: process (anon, file) | workers: largest, private |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if r.get("what") == "bpe":
            continue
        workers = f"{r['worker_peak_rss_mb']:,}, {r['workers_private_mb']:,}" if r["num_proc"] > 1 else "-"
        print(
            f"| {r['shape']} | {r['mb']} | {r['num_proc']} | {r['tokens']:,} | {r['seconds']} ({r['convert_s']}) "
            f"| {r['tokens_per_s']:,} | {r['tokenizers_per_s'][0]:,}, {r['tokenizers_per_s'][1]:,} "
            f"| {r['ratio']:.2f} ({r['ratio_encoding']:.2f}) "
            f"| {r['cpu_s']} ({r['convert_cpu_s']}; {r['tokenizers_cpu_s'][0]}, {r['tokenizers_cpu_s'][1]}) "
            f"| {r['cpu_ratio']:.2f} ({r['cpu_ratio_encoding']:.2f}) "
            f"| {r['peak_rss_mb']:,} ({r['peak_anon_mb']:,}, {r['peak_file_mb']:,}) | {workers} |"
        )
    for r in rows:
        if r.get("what") == "bpe":
            print(
                f"BPE of 8,192 on {r['shape']} {r['mb']} MB: {r['seconds']} s ({r['cpu_s']} CPU s), peak RSS "
                f"{r['peak_rss_mb']:,} MB (anon {r['peak_anon_mb']:,}, file {r['peak_file_mb']:,})"
            )


if __name__ == "__main__":
    main()
