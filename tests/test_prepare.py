"""Corpus preparation at scale (issue 36): documents encoded in bounded pieces with exactly the ids of the whole,
the sample books' stream as before, memory that does not grow with the corpus, a progress display in terminals and
logs, `gpt1 prepare`, and one preparer per cache entry however many processes start on it."""

from __future__ import annotations

import hashlib
import io
import json
import random
import socket
import sys
import threading
import time
from pathlib import Path

import datasets
import pyarrow as pa
import pytest

from gpt1.core.errors import DataError
from gpt1.core.progress import Meter
from gpt1.data.cache import made_once
from gpt1.data.corpus import RELEASE_BYTES, MappedArrow, file_pieces, pieces, row_pieces, table_pieces
from gpt1.data.data_config import DataConfig
from gpt1.data.pretrain_data import PretrainDataModule
from gpt1.data.sources import ArrowRows
from gpt1.text.tokenizer import BPE_PASSES, Tokenizer, TokenizerConfig, train_bpe
from tests.helpers import FEW, REPO, TINY_RUN, run_python

# Text that stresses the "gpt1" pipeline at the cuts: line breaks (\r\n too), runs of spaces, accents and combining
# marks after a cut, CJK (spaced by the normaliser), Greek sigmas, punctuation, the characters the pipeline
# standardises, and long words.
ALPHABET = [
    "the",
    "Whale",
    "naïve",
    "e\u0301",
    "\u0301",
    "\u4e2d\u6587",
    "ΣΑΣ",
    "ς",
    "don't",
    "—",
    "…",
    "´",
    "!!",
    "(x)",
    "1,000",
    "\t",
    "\u00a0",
    "ﬁ",
    "supercalifragilistic" * 3,
    "\ufffd",
]
SEPARATORS = [" ", "  ", "\n", "\n\n", "\r\n", " \n ", "", "\t"]


def random_text(rng: random.Random, words: int) -> str:
    return "".join(rng.choice(ALPHABET) + rng.choice(SEPARATORS) for _ in range(words))


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    rng = random.Random(0)
    return train_bpe([random_text(rng, 200) for _ in range(50)], vocab_size=400, min_frequency=1)


def test_pieces_encode_to_the_ids_of_the_whole_text(tok):
    assert tok.encodes_piecewise
    rng = random.Random(1)
    for size in (1, 7, 40, 300):
        for _ in range(20):
            text = random_text(rng, rng.randint(0, 400))
            parts = list(pieces(text, size))
            assert "".join(parts) == text
            assert all(len(p) <= size or not any(c in p[:-1] for c in "\n ") for p in parts[:-1])  # cut where it may
            assert [i for ids in tok.encode_batch(parts) for i in ids] == tok.encode(text)
            raw = text.encode()
            assert list(pieces(memoryview(raw), size)) == list(pieces(raw, size))
            assert "".join(pieces(raw, size)) == text  # bytes are cut at whole characters


def test_text_without_whitespace_is_not_cut():
    assert list(pieces("abcdefgh ij", 3)) == ["abcdefgh ", "ij"]
    assert list(pieces("abcdefgh", 3)) == ["abcdefgh"]
    assert list(pieces("", 3)) == [""]


def test_a_txt_file_reads_in_pieces_as_datasets_reads_it_whole(tmp_path):
    rng = random.Random(2)
    data = b"".join(
        rng.choice([b"a b", b"\r\n", b"\r", b"\n", b"\xff", b"\xe2\x82", "é ".encode(), b"  "]) for _ in range(3000)
    )
    path = tmp_path / "doc.txt"
    path.write_bytes(data)
    whole = datasets.load_dataset(
        "text",
        data_files=[str(path)],
        split="train",
        sample_by="document",
        encoding_errors="replace",
        cache_dir=str(tmp_path / "cache"),
    )["text"][0]
    for size in (1, 5, 64, None):
        assert "".join(file_pieces(path, size)) == whole


def test_rows_are_sliced_into_pieces_from_the_arrow_buffers():
    rows = ["a b c d e f", None, "", "line\nbreak here", "é è ê ë"]
    for kind in (pa.string(), pa.large_string()):
        column = pa.chunked_array([pa.array(rows[:2], kind), pa.array(rows[2:], kind)])
        got = list(row_pieces(column.slice(0), 4))
        docs, doc = [], ""
        for text, last in got:
            assert len(text.encode()) <= 4 + 1 or " " not in text[:-1]
            doc += text
            if last:
                docs.append(doc)
                doc = ""
        assert docs == [r or "" for r in rows]
    assert list(row_pieces(pa.chunked_array([pa.array(["x y"])]), None)) == [("x y", True)]


BOOKS_STREAM = {  # sha256 of the packed streams of the sample books, computed with the code of 615d861 (before the
    # pieces): a 512-token BPE trained on books/train, data.num_proc 1 and 2 alike
    "tokenizer": "bb3457e8ba73bbbd4d804e852a01f3b18dcd5a49004c639fa0f0ff61919a435b",
    "train": "75dcc46b81cde71496bb576a7f2d8cff7ff9c11041fc0a1347502d6d7c2bad67",
    "valid": "8721a9a29ea7f660047ac2c661142919a0bcd49792defd8606e0703ef025e485",
}


def test_the_sample_books_pack_to_the_same_bytes_as_before(sample_data, tmp_path):
    books = sample_data / "books"
    cfg = DataConfig(train_files=[str(books / "train/*.txt")], valid_files=[str(books / "valid/*.txt")], num_proc=2)
    dm = PretrainDataModule(cfg, TokenizerConfig(vocab_size=512), n_ctx=8, seed=0, cache_dir=tmp_path)
    dm.prepare_data()
    got = {"tokenizer": hashlib.sha256(dm.tokenizer_path.read_bytes()).hexdigest()}
    got.update({split: hashlib.sha256(path.read_bytes()).hexdigest() for split, path in dm.paths.items()})
    assert got == BOOKS_STREAM


PREPARE = """
import resource, sys
from gpt1.data.data_config import DataConfig
from gpt1.data.sources import ArrowRows
from gpt1.data.pretrain_data import PretrainDataModule
from gpt1.text.tokenizer import TokenizerConfig, build_tokenizer
tokenizer, cache, *corpora = sys.argv[1:]
tokenizer = build_tokenizer(TokenizerConfig(path=tokenizer))  # one instance, as a process preparing a corpus has
for files in corpora:
    dm = PretrainDataModule(DataConfig(train_files=[files], valid_fraction=0.01, num_proc=1), tokenizer,
                            n_ctx=8, seed=0, cache_dir=cache)
    dm.prepare_data()
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)  # KiB: the peak resident memory so far
"""
MEMORY_BOUND_MB = 25
"""What preparing 4x the text may add to the peak memory of preparing 1x. The 1x corpus (1.7 MB, two batches of
BATCH_CHARS) already runs the pipeline at its steady state, so only the allocator's placement of one more batch's
encodings (about 25 MB: 25 bytes a character) may raise the peak. Measured: +9 MB (571 -> 580 MB; the heap, RssAnon,
+6 MB; file-backed pages flat). One tokenizer serves the three corpora: a ``tokenizers.Tokenizer`` that has encoded
text keeps 4-5 MB after it is dropped (tokenizers 0.23.3; malloc_trim or clearing its cache does not return it),
which a process pays once per tokenizer, not per byte: a fresh one per corpus measured +15-19 MB. The code of 615d861
added 25 bytes per byte of text: +390 MB for the four books, +760 MB for the long document, from 0.71 GB at 1x."""


def test_memory_does_not_grow_with_the_corpus(sample_data, tmp_path):
    """Book-sized files (Emma, 0.86 MB): 1x is one file of 1.7 MB; then 4x as four such files (many books) and as
    one file of 6.9 MB (one long document), prepared one after the other in one process: its peak must stay put."""
    emma = (sample_data / "books/train/emma.txt").read_text()
    (tmp_path / "tok.json").write_text(train_bpe([emma], vocab_size=2000).to_str())
    corpora = []
    for name, files, copies in (("1x", 1, 2), ("4x-books", 4, 2), ("4x-document", 1, 8)):
        (tmp_path / name).mkdir()
        for i in range(files):
            (tmp_path / name / f"book{i}.txt").write_text(emma * copies)
        corpora.append(str(tmp_path / name / "*.txt"))
    proc = run_python("-c", PREPARE, str(tmp_path / "tok.json"), str(tmp_path / "cache"), *corpora, cwd=REPO)
    one, books, document = (int(kib) / 1024 for kib in proc.stdout.split())
    assert books - one < MEMORY_BOUND_MB and document - one < MEMORY_BOUND_MB, (one, books, document)


def test_the_meter_draws_a_bar_on_a_terminal_and_plain_lines_in_a_log(monkeypatch):
    log = io.StringIO()
    meter = Meter("tokenising train", "tokens", total=4, interval=0.05, file=log)
    meter.update(1, 1000)
    time.sleep(0.06)
    meter.update(2, 500_000)
    meter.close()
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in log.getvalue()
    assert lines[0].startswith("tokening train: 3/4 documents, 501k tokens, ".replace("tokening", "tokenising"))
    assert (
        lines[0].endswith(" tokens/s") and lines[1].startswith("tokenising train: 3/4 documents") and " in " in lines[1]
    )

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Terminal()
    bar = Meter("tokenising train", "tokens", total=4, file=tty)
    bar.update(4, 2_000_000)
    bar.close()
    assert "\r" in tty.getvalue() and "4/4" in tty.getvalue() and "2M tokens" in tty.getvalue()

    tty = Terminal()  # a BPE's two reads of the documents: a bar per pass, each named and counted to the total
    bpe = Meter("training the BPE", "characters", total=4, file=tty, passes=2)
    for _ in range(2):
        bpe.next_pass().update(4, 1000)
    bpe.close()
    assert "training the BPE, pass 1/2: 100%" in tty.getvalue() and "training the BPE, pass 2/2: 100%" in tty.getvalue()
    assert "8/4" not in tty.getvalue() and "pass 3/2" not in tty.getvalue()


def test_one_process_makes_a_cache_entry_while_the_others_wait(tmp_path, capsys):
    path, made, started = tmp_path / "entry.bin", [], threading.Event()

    def make() -> None:
        started.set()
        time.sleep(0.5)
        made.append(threading.current_thread().name)
        path.write_bytes(b"x")

    first = threading.Thread(target=lambda: made_once(path, make), name="first")
    first.start()
    started.wait()
    assert made_once(path, make) is False  # waits for the first, then finds the entry
    first.join()
    assert made == ["first"] and path.read_bytes() == b"x"
    assert (
        capsys.readouterr().err == f"waiting for another process to prepare {path} (it holds "
        f"{tmp_path / '.entry.bin.lock'})\n"
    )
    assert made_once(path, make) is False and capsys.readouterr().err == ""  # ready: no lock, no line


# -- gpt1 prepare, and one preparer among many processes -----------------------------------------------------------


def test_gpt1_prepare_packs_every_split_and_trains_nothing(make_cfg, tmp_path, caplog):
    from gpt1.commands.prepare import prepare

    caplog.set_level("INFO", logger="gpt1.data.pretrain_data")
    cfg = make_cfg("prepare", [*TINY_RUN, f"paths.cache_dir={tmp_path / 'cache'}"])
    metrics = prepare(cfg)
    assert sorted(k for k in metrics if not k.startswith("peak_")) == [  # (peak_*: every command's, gpt1.core.memory)
        "tokenizer",
        "train_path",
        "train_tokens",
        "valid_path",
        "valid_tokens",
        "vocab_size",
        "wall_time_s",
    ]
    assert metrics["peak_host_memory_gb"] > 0
    assert json.loads((tmp_path / "run" / "metrics.json").read_text()) == metrics
    assert not (tmp_path / "run" / "checkpoints").exists()
    tokenizer = Tokenizer.from_str(Path(metrics["tokenizer"]).read_text())
    assert metrics["vocab_size"] == tokenizer.vocab_size == 513  # 512 + eod
    for split in ("train", "valid"):
        assert Path(metrics[f"{split}_path"]).stat().st_size == 2 * metrics[f"{split}_tokens"] > 0  # uint16
    made = [r.message for r in caplog.records]
    assert sum("trained a" in m for m in made) == 1 and sum("packed" in m for m in made) == 2
    caplog.clear()
    assert prepare(cfg) | {"wall_time_s": 0} == metrics | {"wall_time_s": 0}  # the second time: all from the cache
    assert not any("trained a" in r.message or "packed" in r.message for r in caplog.records)


def test_the_bpes_progress_counts_each_of_its_passes_to_the_corpus_documents(make_cfg, tmp_path, capsys):
    """The BPE reads its corpus twice (``BPE_PASSES``): each pass is named and counts to the documents there are, not
    on past them ("training the BPE: 18/9 documents" before)."""
    from gpt1.commands.prepare import prepare

    books = "${paths.sample_data}/books/train"
    files = f"data.train_files=[{books}/northanger_abbey.txt,{books}/emma.txt]"
    prepare(make_cfg("prepare", [*TINY_RUN, files, f"paths.cache_dir={tmp_path / 'cache'}"]))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("training the BPE")]
    assert [line.split(" documents")[0] for line in lines] == [
        "training the BPE, pass 1/2: 2/2",
        "training the BPE, pass 2/2: 2/2",
    ]
    assert BPE_PASSES == 2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # two processes on a fresh cache: 20 s alone, 37 s beside the suite's other worker
def test_two_ddp_processes_on_a_fresh_cache_prepare_it_once(tmp_path):
    """Both ranks start at once (torchrun, as srun starts a node's tasks): one trains the tokenizer and packs each
    split, the other waits, then both train on the same files."""
    cache, run = tmp_path / "cache", tmp_path / "run"
    proc = run_python(
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        f"--master_port={free_port()}",
        "-m",
        "gpt1.commands.pretrain",
        *FEW,
        "trainer=ddp",
        "trainer.accelerator=cpu",
        "trainer.devices=2",
        "trainer.precision=32-true",
        f"hydra.run.dir={run}",
        f"paths.cache_dir={cache}",
        cwd=tmp_path,
        timeout=400,
    )
    out = proc.stdout + proc.stderr
    assert out.count("trained a 513-token BPE") == 1, out  # the tokenizer trained once
    assert out.count("packed 1 documents") == 2, out  # train (Northanger Abbey) and valid (Persuasion), once each
    assert out.count("waiting for another process to prepare") <= 3  # at most a line per entry (tokenizer, 2 splits)
    assert json.loads((run / "metrics.json").read_text())["steps"] == 4


def test_a_text_column_that_is_not_text_is_named(tmp_path, tok):
    (tmp_path / "rows.jsonl").write_text('{"text": 1}\n{"text": 2}\n')
    dm = PretrainDataModule(
        DataConfig(train_files=[str(tmp_path / "rows.jsonl")], valid_fraction=0.5),
        tok,
        n_ctx=8,
        seed=0,
        cache_dir=tmp_path / "cache",
    )
    with pytest.raises(DataError, match=r"column 'text' of data.train_files \(.*rows.jsonl\) holds int64, not text"):
        dm.prepare_data()
    assert not list((tmp_path / "cache" / "tokens").rglob("*.bin"))  # nothing half-written left


def rss_file_mb() -> float:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssFile:")) / 1024


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_table_is_read_through_with_its_pages_handed_back(tmp_path):
    """A table's rows are sliced from its Arrow file (datasets' cache) through a memory map whose pages are handed
    back as they are read: of a 100 MB file, at most RELEASE_BYTES and a row stay resident. (Through datasets' own
    map, every page read stayed: +100 MB here.) Rows to skip and take (a split's slice) are honoured."""
    rows = [f"row {i} " + "word " * 20_000 for i in range(1000)]  # 100 KB each
    path = tmp_path / "table.arrow"
    schema = pa.schema([("n", pa.int64()), ("text", pa.string())])
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for start in range(0, len(rows), 64):  # record batches of 64 rows, as datasets writes a table in pieces
            part = rows[start : start + 64]
            writer.write_batch(pa.record_batch([pa.array(range(start, start + len(part))), pa.array(part)], schema))
    before, peak, docs, doc = rss_file_mb(), 0.0, [], ""
    for i, (text, last) in enumerate(table_pieces(ArrowRows(((str(path), 0, -1),), 1000, "key"), "text", 4096, "t")):
        doc += text
        if last:
            docs.append(doc)
            doc = ""
        if i % 100 == 0:
            peak = max(peak, rss_file_mb())
    assert docs == rows
    assert peak - before < RELEASE_BYTES / 2**20 + 4, (before, peak)

    sliced = ArrowRows(((str(path), 150, 300), (str(path), 990, -1)), 310, "key")
    assert [t for t, _ in table_pieces(sliced, "text", None, "t")] == rows[150:450] + rows[990:]


CONVERT = """
import sys
from gpt1.cpu.allocator import tune_cpu_allocator
from gpt1.data.sources import FileSource
tune_cpu_allocator()  # as every gpt1 command's configure() does
cache, *tables = sys.argv[1:]
for path in tables:
    FileSource([path], "data.train_files", cache).arrow_rows("text")
    with open("/proc/self/status") as f:
        print(next(int(line.split()[1]) for line in f if line.startswith("VmHWM:")))  # KiB: the peak so far
"""
ROWS_BOUND_MB = 16
"""What converting three rows of 11 MB may add to the peak memory of converting one. Measured: +0 MB (649 -> 649
MB); before, datasets' writer held the three rows until the file's end: +72 MB."""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_rows_of_any_size_convert_in_the_memory_of_one(tmp_path):
    """Whole books as rows: JSON Lines whose rows (11 MB) are longer than datasets' json builder reads at once (10
    MB), so that each comes to its writer as a table of one row, which it held (up to 1,000 of them) before writing.
    In one process: a file of one row (the allocator's pools grow to the rows' size), another of one row, then one of
    three rows: the last must leave the peak where the second put it."""
    row = json.dumps({"text": "the whale and the ship of a captain at sea " * 260_000}) + "\n"  # 11 MB
    tables = []
    for name, rows in (("first", 1), ("one", 1), ("three", 3)):
        tables.append(str(tmp_path / f"{name}.jsonl"))
        Path(tables[-1]).write_text(row * rows)
    proc = run_python("-c", CONVERT, str(tmp_path / "cache"), *tables, cwd=REPO)
    _, one, three = (int(kib) / 1024 for kib in proc.stdout.split())
    assert three - one < ROWS_BOUND_MB, (one, three)


def record_batches(rows: ArrowRows) -> list[int]:
    """The rows of each record batch of a converted table's Arrow files."""
    return [batch.num_rows for path, _, _ in rows.files for batch in MappedArrow(path).batches()]


def test_the_rows_per_record_batch_follow_the_largest_row(tmp_path, monkeypatch):
    """Rows of 6 KB against a budget of 16 KB: two per record batch, from JSON Lines (their longest line), .txt files
    (their size) and parquet (its row groups per row), as files and in the hub's layout; short rows (and a JSON
    array) keep datasets' 1,000 per batch."""
    import pyarrow.parquet as pq

    from gpt1.data import conversion
    from gpt1.data.sources import FileSource, HubSource

    monkeypatch.setattr(conversion, "RECORD_BATCH_BYTES", 16384)
    books = [f"book {i} " + "word " * 1200 for i in range(5)]  # 6 KB each
    (tmp_path / "books.jsonl").write_text("".join(json.dumps({"text": b}) + "\n" for b in books))
    (tmp_path / "short.jsonl").write_text('{"text": "a"}\n' * 1500)  # 14 bytes: 1,170 would fit
    (tmp_path / "array.json").write_text(json.dumps([{"text": b} for b in books], indent=1))
    (tmp_path / "hub" / "data").mkdir(parents=True)
    pq.write_table(  # (without a dictionary: a row group's size is then its row's)
        pa.table({"text": books}),
        tmp_path / "hub/data/train-00000-of-00001.parquet",
        row_group_size=1,
        use_dictionary=False,
    )
    for i, book in enumerate(books):
        (tmp_path / f"book{i}.txt").write_text(book)

    def converted(files: str) -> list[int]:
        return record_batches(FileSource([str(tmp_path / files)], "files", str(tmp_path / "cache")).arrow_rows("text"))

    assert converted("books.jsonl") == [2, 2, 1]
    assert converted("hub/data/*.parquet") == [2, 2, 1]
    hub = HubSource(str(tmp_path / "hub"), None, "train", "hub", str(tmp_path / "cache"))
    assert record_batches(hub.arrow_rows("text")) == [2, 2, 1]
    assert converted("short.jsonl") == [1000, 500] and converted("array.json") == [5]
    files = FileSource([str(tmp_path / "book*.txt")], "files", str(tmp_path / "cache"))
    assert [len(b) for b in files.rows(["text"]).data.to_batches()] == [2, 2, 1]
    assert conversion.longest_line(tmp_path / "books.jsonl", block=100) == len(json.dumps({"text": books[0]})) + 1
