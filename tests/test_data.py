"""The pre-training data pipeline: sources, packing, windows, determinism, the cache, errors, the unigram baseline."""

from __future__ import annotations

import json
import math
import pickle
from pathlib import Path

import datasets
import numpy as np
import pandas as pd
import pytest
import torch

import gpt1.data.corpus as corpus_module
import gpt1.data.pretrain_data as pretrain
from gpt1.core.errors import ConfigError, DataError
from gpt1.data.corpus import pack
from gpt1.data.data_config import DataConfig
from gpt1.data.formats import file_format
from gpt1.data.loader import EpochSampler
from gpt1.data.pretrain_data import PretrainDataModule, unigram_perplexity
from gpt1.data.sources import load_files, resolve_files
from gpt1.text.tokenizer import Tokenizer, TokenizerConfig, train_bpe

DOCS = [
    "The quick brown fox jumps over the lazy dog.\nThe dog sleeps on.",
    "A journey of a thousand miles begins with a single step.",
    "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer.",
    "All that glitters is not gold; all who wander are not lost.",
]


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return train_bpe(DOCS * 10, vocab_size=300)


def expected(tokenizer: Tokenizer, docs: list[str], separate: bool = True) -> list[int]:
    """The packed stream of ``docs`` computed independently of the pipeline."""
    eod = [tokenizer.special_id("eod")] if separate else []
    return [i for doc in docs for i in tokenizer.encode(doc) + eod]


def write_txt(folder: Path, docs: list[str]) -> str:
    """One file per document, named so that the sorted glob keeps their order; returns the glob."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, doc in enumerate(docs):
        (folder / f"doc{i}.txt").write_text(doc)
    return str(folder / "*.txt")


def prepared(tmp_path: Path, tokenizer, n_ctx: int = 8, seed: int = 0, **data) -> PretrainDataModule:
    data = {"num_proc": 1, "batch_size": 4, **data}
    dm = PretrainDataModule(DataConfig(**data), tokenizer, n_ctx=n_ctx, seed=seed, cache_dir=tmp_path / "cache")
    dm.prepare_data()
    dm.setup("fit")
    return dm


@pytest.fixture
def corpus(tmp_path: Path) -> dict[str, list[str]]:
    """Train (first three DOCS) and valid (the last) .txt globs under tmp_path."""
    return {
        "train_files": [write_txt(tmp_path / "train", DOCS[:3])],
        "valid_files": [write_txt(tmp_path / "valid", DOCS[3:])],
    }


# -- packing --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("num_proc", [1, 2])
def test_pack_joins_documents_with_eod_across_batches(tmp_path, tok, num_proc):
    # documents "a b" (in two pieces), "" and "c": batches of about 3 characters, so a document spans two batches
    src = [("a ", False), ("b", True), ("", True), ("c", True)]
    a, b, c = (tok.encode(text) for text in "abc")
    n = pack(src, tmp_path / "a.bin", tok, eod=9, num_proc=num_proc, batch_chars=3)
    assert np.fromfile(tmp_path / "a.bin", dtype=np.uint16).tolist() == [*a, *b, 9, *c, 9] and n == 5  # no eod for ""
    assert pack(src, tmp_path / "b.bin", tok, eod=None, batch_chars=2) == 3
    assert np.fromfile(tmp_path / "b.bin", dtype=np.uint16).tolist() == [*a, *b, *c]
    big = Tokenizer(tok.bpe, "gpt1", {"eod": 70000})  # past 65,536 ids: uint32
    pack([("a", True)], tmp_path / "c.bin", big, eod=70000)
    assert np.fromfile(tmp_path / "c.bin", dtype=np.uint32).tolist() == [*a, 70000]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.bin", "b.bin", "c.bin"]  # no temporary left behind


@pytest.mark.parametrize("num_proc, separate", [(1, True), (2, True), (1, False)])
def test_prepare_packs_documents_in_file_order(tmp_path, tok, corpus, num_proc, separate):
    dm = prepared(tmp_path, tok, num_proc=num_proc, separate_documents=separate, **corpus)
    assert dm.train_tokens.dtype == np.uint16
    assert dm.train_tokens.tolist() == expected(tok, DOCS[:3], separate)
    assert dm.valid_tokens.tolist() == expected(tok, DOCS[3:], separate)
    assert dm.tokenizer is tok


def test_a_given_vocab_gets_the_eod_token_only_and_packs_in_worker_processes(tmp_path, tok, corpus):
    vocab = tmp_path / "vocab"
    vocab.mkdir()
    tok.bpe.model.save(str(vocab))  # vocab.json + merges.txt: OpenAI's layout, the "openai" pipeline
    dm = prepared(tmp_path, TokenizerConfig(path=str(vocab)), num_proc=2, **corpus)
    assert dm.tokenizer.pipeline == "openai" and dm.tokenizer.specials == {"eod": tok.base_vocab_size}
    assert dm.train_tokens.tolist() == expected(dm.tokenizer, DOCS[:3])


def test_valid_fraction_holds_out_the_end_of_the_stream(tmp_path, tok):
    dm = prepared(tmp_path, tok, train_files=[write_txt(tmp_path / "train", DOCS)], valid_fraction=0.25)
    whole = expected(tok, DOCS)
    n_valid = int(len(whole) * 0.25)
    assert dm.valid_tokens.tolist() == whole[len(whole) - n_valid :]
    assert dm.train_tokens.tolist() == whole[: len(whole) - n_valid]
    # The training windows never reach into the held-out tokens.
    assert len(dm.train_dataloader().dataset) == len(whole) - n_valid - dm.n_ctx


# -- windows and determinism ----------------------------------------------------------------------------------


def test_train_windows_are_shifted_slices_of_the_stream(tmp_path, tok, corpus):
    dm = prepared(tmp_path, tok, **corpus)
    stream, T = torch.as_tensor(dm.train_tokens.astype(np.int64)), dm.n_ctx
    loader = dm.train_dataloader()
    starts = list(loader.sampler)
    # samples_per_epoch=None: a window per n_ctx tokens, rounded up to whole global batches (of 4)
    assert len(starts) == len(loader.sampler) == -(-(len(stream) // T) // 4) * 4 > len(stream) // T
    assert all(0 <= s <= len(stream) - T - 1 for s in starts)
    batches = list(loader)
    inputs, targets = torch.cat([b["input_ids"] for b in batches]), torch.cat([b["targets"] for b in batches])
    assert batches[0]["input_ids"].shape == (4, T) and inputs.dtype == torch.int64
    for s, x, y in zip(starts, inputs, targets, strict=True):
        assert torch.equal(x, stream[s : s + T]) and torch.equal(y, stream[s + 1 : s + T + 1])
    ds = loader.dataset
    assert len(ds[len(ds) - 1]["targets"]) == T  # the last window ends on the last token
    with pytest.raises(IndexError):
        ds[len(ds)]
    assert len(prepared(tmp_path, tok, samples_per_epoch=5, **corpus).train_dataloader().sampler) == 8
    assert len(prepared(tmp_path, tok, samples_per_epoch=12, **corpus).train_dataloader().sampler) == 12


def test_valid_windows_tile_the_stream_in_order(tmp_path, tok, corpus):
    dm = prepared(tmp_path, tok, n_ctx=4, **corpus)
    stream, T = torch.as_tensor(dm.valid_tokens.astype(np.int64)), 4
    batches = list(dm.val_dataloader())
    inputs, targets = torch.cat([b["input_ids"] for b in batches]), torch.cat([b["targets"] for b in batches])
    k = (len(stream) - 1) // T
    assert inputs.shape == targets.shape == (k, T)
    assert torch.equal(inputs.flatten(), stream[: k * T]) and torch.equal(targets.flatten(), stream[1 : k * T + 1])
    assert [b["input_ids"].tolist() for b in dm.test_dataloader()] == [b["input_ids"].tolist() for b in batches]
    assert len(prepared(tmp_path, tok, n_ctx=4, max_valid_windows=2, **corpus).val_dataloader().dataset) == 2


def test_batches_depend_only_on_seed_and_epoch(tmp_path, tok, corpus):
    def epoch(dm: PretrainDataModule, e: int) -> list[list[int]]:
        loader = dm.train_dataloader()
        loader.sampler.set_epoch(e)
        return [row for b in loader for row in b["input_ids"].tolist()]

    a, b, c = (prepared(tmp_path, tok, seed=s, **corpus) for s in (0, 0, 1))
    assert epoch(a, 0) == epoch(b, 0)
    assert epoch(a, 1) == epoch(b, 1) != epoch(a, 0)
    assert epoch(c, 0) != epoch(a, 0)
    assert list(EpochSampler(100, draws=50, seed=3, batch_size=10)) == list(
        EpochSampler(100, draws=50, seed=3, batch_size=10)
    )


def test_window_dataset_pickles_without_its_tokens(tmp_path, tok, corpus):
    ds = prepared(tmp_path, tok, **corpus).train_dataloader().dataset
    first = ds[0]
    copy = pickle.loads(pickle.dumps(ds))  # what a DataLoader worker receives
    assert copy._tokens is None and torch.equal(copy[0]["input_ids"], first["input_ids"])


# -- sources --------------------------------------------------------------------------------------------------

ROWS = [{"id": 0, "body": 'He said, "hi, there".\nA second line.'}, {"id": 1, "body": "plain\ttabbed"}]
WRITERS = {
    ".jsonl": lambda p: p.write_text("".join(json.dumps(r) + "\n" for r in ROWS)),
    ".json": lambda p: p.write_text(json.dumps(ROWS, indent=2)),  # one pretty-printed array
    ".csv": lambda p: pd.DataFrame(ROWS).to_csv(p, index=False),
    ".tsv": lambda p: pd.DataFrame(ROWS).to_csv(p, sep="\t", index=False),
    ".parquet": lambda p: pd.DataFrame(ROWS).to_parquet(p),
}


def columns(path: Path) -> list[str]:
    """A data file's column names, from its header, as the sources read them."""
    return file_format(path).columns(path, "minimal")


@pytest.mark.parametrize("suffix", list(WRITERS))
def test_tabular_formats_give_one_row_per_document(tmp_path, suffix):
    path = tmp_path / f"data{suffix}"
    WRITERS[suffix](path)
    assert columns(path) == ["id", "body"]
    ds = load_files([path], ["body"], cache_dir=tmp_path / "cache")
    assert ds.column_names == ["body"] and ds["body"][:] == [r["body"] for r in ROWS]


def test_a_tsv_corpus_whose_quotes_are_text_reads_with_quoting_none(tmp_path, tok):
    """data.quoting=none: a document that starts with a quote is one row; as quoted (the default) it would swallow
    the rows up to the next quote. The packed stream's cache tells the two apart."""
    docs = ['"Call me Ishmael, he said', "Some years ago, never mind how long", 'precisely" having little money']
    (tmp_path / "corpus.tsv").write_text("id\ttext\n" + "".join(f"{i}\t{d}\n" for i, d in enumerate(docs)))
    files = {"train_files": [str(tmp_path / "corpus.tsv")], "valid_files": [str(tmp_path / "corpus.tsv")]}
    dm = prepared(tmp_path, tok, quoting="none", **files)
    assert dm.train_tokens.tolist() == expected(tok, docs)
    assert prepared(tmp_path, tok, **files).train_tokens.tolist() != expected(tok, docs)


def test_txt_files_are_one_document_each_with_line_breaks(tmp_path):
    files = resolve_files([write_txt(tmp_path, DOCS[:2])], "data.train_files")
    ds = load_files(files, ["text"], cache_dir=tmp_path / "cache")
    assert ds["text"][:] == DOCS[:2] and "\n" in ds["text"][0]


def test_mixed_formats_keep_file_order(tmp_path, tok):
    (tmp_path / "a.txt").write_text(DOCS[0])
    (tmp_path / "b.jsonl").write_text("\n".join(json.dumps({"body": doc, "n": i}) for i, doc in enumerate(DOCS[1:3])))
    pd.DataFrame({"body": [DOCS[3]]}).to_parquet(tmp_path / "c.parquet")
    train = [str(tmp_path / "c.parquet"), str(tmp_path / "[ab].*")]  # pattern order, then sorted matches
    dm = prepared(tmp_path, tok, train_files=train, text_column="body", valid_fraction=0.2)
    whole = dm.train_tokens.tolist() + dm.valid_tokens.tolist()
    assert whole == expected(tok, [DOCS[3], DOCS[0], DOCS[1], DOCS[2]])


def test_real_task_files_expose_their_columns(sample_data, tmp_path):
    tasks = sample_data / "tasks"
    assert columns(tasks / "nli/train.parquet") == ["premise", "hypothesis", "label", "idx"]
    assert columns(tasks / "entailment/train.csv") == ["sentence1", "sentence2", "label", "idx"]
    assert columns(tasks / "similarity/train.tsv") == ["sentence1", "sentence2", "label", "idx"]
    assert columns(tasks / "story/train.jsonl") == ["context", "question", "choices", "label", "idx"]
    nli = load_files([tasks / "nli/validation.parquet"], ["premise", "label"], cache_dir=tmp_path)
    assert len(nli) == 1500 and nli.features["label"].names == ["entailment", "neutral", "contradiction"]


def test_real_book_packs_to_its_tokens(sample_data, tmp_path, tok):
    book = sample_data / "books/valid/persuasion.txt"
    dm = prepared(tmp_path, tok, n_ctx=64, train_files=[str(book)], valid_fraction=0.01, num_proc=2)
    whole = np.concatenate([dm.train_tokens, dm.valid_tokens])
    assert whole.tolist() == expected(tok, [book.read_text()])
    assert len(dm.valid_tokens) == int(len(whole) * 0.01)


def test_hub_dataset_splits(tmp_path, tok, monkeypatch):
    """A dataset in the hub's layout (data/<split>-*.parquet), named by its local path: datasets' real hub code
    path without a network, read from its Arrow cache; each split packed in order."""
    hub = tmp_path / "org-corpus"
    (hub / "data").mkdir(parents=True)
    for split, docs in (("train", DOCS[:3]), ("validation", DOCS[3:])):
        pd.DataFrame({"content": docs, "n": range(len(docs))}).to_parquet(
            hub / "data" / f"{split}-00000-of-00001.parquet"
        )
    read = []
    real = corpus_module.table_pieces

    def spy(rows, column, size, where):
        read.append(where)
        return real(rows, column, size, where)

    monkeypatch.setattr(corpus_module, "table_pieces", spy)
    dm = prepared(tmp_path, tok, hf_dataset=str(hub), text_column="content")
    assert dm.train_tokens.tolist() == expected(tok, DOCS[:3]) and dm.valid_tokens.tolist() == expected(tok, DOCS[3:])
    assert [w.split("split ")[-1] for w in read] == ["train)", "validation)"]
    with monkeypatch.context() as m:  # the key (datasets' fingerprint of each split) holds: a second run hits the cache
        m.setattr(pretrain, "pack", lambda *a, **k: pytest.fail("the cache was missed"))
        again = prepared(tmp_path, tok, hf_dataset=str(hub), text_column="content")
    assert again.train_tokens.tolist() == dm.train_tokens.tolist()

    read.clear()  # evaluation: the training split is never read
    dm = prepared(tmp_path / "eval", tok, hf_dataset=str(hub), hf_train_split=None, text_column="content")
    assert [w.split("split ")[-1] for w in read] == ["validation)"] and dm.train_tokens is None
    with pytest.raises(RuntimeError, match="no training stream"):
        dm.train_dataloader()
    with pytest.raises(
        DataError, match=r"org-corpus.*no column 'text'; its columns are \['content', 'n'\]: set data.text_column"
    ):
        prepared(tmp_path / "text", tok, hf_dataset=str(hub))


# -- the cache ------------------------------------------------------------------------------------------------


def test_second_run_hits_the_cache(tmp_path, corpus, monkeypatch):
    tcfg = TokenizerConfig(vocab_size=300, min_frequency=1)
    first = prepared(tmp_path, tcfg, **corpus)  # trains the tokenizer on the training files
    bins = sorted((tmp_path / "cache" / "tokens").rglob("*.bin"), key=lambda p: p.name)
    assert [p.name for p in bins] == ["train.bin", "valid.bin"]
    mtimes = [p.stat().st_mtime_ns for p in bins]

    def fail(*args, **kwargs):
        raise AssertionError("the cache was missed")

    with monkeypatch.context() as m:
        m.setattr(pretrain, "build_tokenizer", fail)
        m.setattr(pretrain, "pack", fail)
        m.setattr(datasets, "load_dataset", fail)  # local files: not even the raw data is read again
        m.setattr(datasets, "load_dataset_builder", fail)
        again = prepared(tmp_path, tcfg, **corpus)
        other_rank = PretrainDataModule(DataConfig(**corpus), tcfg, n_ctx=8, seed=0, cache_dir=tmp_path / "cache")
        other_rank.setup("fit")  # a process in which prepare_data did not run
    assert [p.stat().st_mtime_ns for p in bins] == mtimes
    for dm in (again, other_rank):
        assert dm.tokenizer.to_str() == first.tokenizer.to_str()
        assert dm.train_tokens.tolist() == first.train_tokens.tolist()

    # A changed training file is a new corpus: new tokenizer, new stream.
    doc = tmp_path / "train" / "doc0.txt"
    doc.write_text(doc.read_text() + " Extra words at the end.")
    changed = prepared(tmp_path, tcfg, **corpus)
    assert len(list((tmp_path / "cache" / "tokenizers").glob("*.json"))) == 2
    assert changed.train_tokens.tolist() == expected(changed.tokenizer, [doc.read_text(), *DOCS[1:3]])
    # So is a change of separate_documents.
    joined = prepared(tmp_path, tcfg, separate_documents=False, **corpus)
    assert joined.train_tokens.tolist() == expected(changed.tokenizer, [doc.read_text(), *DOCS[1:3]], separate=False)


def test_lightnings_later_calls_resolve_no_split_again(tmp_path, tok, corpus, monkeypatch):
    """prepare_data and setup, called again at every fit, validate and test, resolve nothing again: each split's
    files globbed and stat'ed once (the key of its stream), the tokenizer serialised once (the streams' keys)."""
    import gpt1.data.sources as sources

    calls = []
    for owner, name in ((sources, "resolve_files"), (sources, "files_key"), (Tokenizer, "to_str")):
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *a, real=real, name=name, **k: calls.append(name) or real(*a, **k))
    dm = prepared(tmp_path, tok, **corpus)
    for stage in ("fit", "validate", "test"):
        dm.prepare_data()
        dm.setup(stage)
    assert sorted(calls) == ["files_key", "files_key", "resolve_files", "resolve_files", "to_str"]
    assert dm.valid_tokens.tolist() == expected(tok, DOCS[3:])


def test_setup_before_prepare_data_says_so(tmp_path, tok, corpus):
    dm = PretrainDataModule(DataConfig(**corpus), tok, n_ctx=8, seed=0, cache_dir=tmp_path / "cache")
    with pytest.raises(FileNotFoundError, match="prepare_data"):
        dm.setup("fit")


# -- errors ---------------------------------------------------------------------------------------------------


def test_unmatched_glob_names_the_field_and_pattern(tmp_path, tok, corpus):
    missing = DataConfig(train_files=[str(tmp_path / "nothing_*.txt")], valid_fraction=0.1)
    with pytest.raises(DataError, match=r"data\.train_files.*nothing_\*\.txt"):
        PretrainDataModule(missing, tok, 8, 0, tmp_path)
    with pytest.raises(DataError, match=r"data\.valid_files.*nope\.txt"):
        PretrainDataModule(DataConfig(train_files=corpus["train_files"], valid_files=["nope.txt"]), tok, 8, 0, tmp_path)


def test_missing_column_names_the_file_and_its_columns(tmp_path, tok):
    path = tmp_path / "rows.jsonl"
    WRITERS[".jsonl"](path)
    dm = PretrainDataModule(DataConfig(train_files=[str(path)], valid_fraction=0.1), tok, 8, 0, tmp_path)
    with pytest.raises(DataError, match=rf"{path.name} has no column 'text'; its columns are \['id', 'body'\]"):
        dm.prepare_data()


def test_unknown_extension_lists_the_supported_ones(tmp_path):
    (tmp_path / "a.xml").write_text("<doc/>")
    with pytest.raises(ValueError, match=r"'\.xml'.*\.txt, \.jsonl, \.json, \.csv, \.tsv, \.parquet"):
        load_files([tmp_path / "a.xml"])


@pytest.mark.parametrize(
    "data, message",
    [
        ({}, "no validation data"),
        ({"hf_dataset": "org/corpus", "hf_valid_split": None}, "no validation data"),
        ({"hf_dataset": "org/corpus", "train_files": ["*.txt"]}, "both set"),
        ({"valid_fraction": 1.0}, r"valid_fraction=1\.0 must be in \[0, 1\)"),
        ({"hf_dataset": "hub", "hf_train_split": None, "hf_valid_split": None, "valid_fraction": 0.1}, "there is none"),
    ],
)
def test_inconsistent_configs_are_refused(tmp_path, tok, data, message):
    with pytest.raises(ValueError, match=message):
        PretrainDataModule(DataConfig(**data), tok, 8, 0, tmp_path)


def test_untrainable_tokenizer_is_refused(tmp_path, corpus):
    with pytest.raises(ValueError, match="tokenizer.path is not set"):
        PretrainDataModule(DataConfig(valid_files=corpus["valid_files"]), TokenizerConfig(), 8, 0, tmp_path)


def test_streams_shorter_than_a_window_are_refused(tmp_path, tok, corpus):
    with pytest.raises(DataError, match=r"data\.train_files \(.*\) holds \d+ tokens, fewer than one window"):
        prepared(tmp_path, tok, n_ctx=10_000, **corpus)


# -- the unigram baseline -------------------------------------------------------------------------------------


def test_unigram_perplexity_by_hand():
    # Counts on train + 1: [3, 2, 1] of 6, so p = [1/2, 1/3, 1/6]; valid [0, 1]: exp(-(ln 1/2 + ln 1/3) / 2) = sqrt(6).
    assert unigram_perplexity(np.array([0, 0, 1]), np.array([0, 1]), 3) == pytest.approx(math.sqrt(6))
    # No training data: uniform over the vocabulary, perplexity V whatever the validation tokens.
    uniform = unigram_perplexity(np.array([], dtype=np.int64), np.array([4, 4, 0], dtype=np.uint16), 7)
    assert uniform == pytest.approx(7)
    with pytest.raises(ValueError, match="out of the vocabulary"):
        unigram_perplexity(np.array([0, 5]), np.array([0]), 3)


def test_file_fields_take_one_glob_or_a_list():
    assert DataConfig(train_files="corpus/*.txt").train_files == ["corpus/*.txt"]
    assert DataConfig(valid_files=["a.txt", "b/*.txt"]).valid_files == ["a.txt", "b/*.txt"]
    with pytest.raises(ConfigError, match="data.train_files"):
        DataConfig(train_files=[1, 2])


def test_sampler_resumes_an_epoch_and_shards_it_by_rank():
    whole = list(EpochSampler(1000, draws=20, seed=3, batch_size=4, epoch=2))
    consumed = [8]  # read when iteration starts (Lightning restores its counters after building the loader)
    resumed = EpochSampler(1000, draws=20, seed=3, batch_size=4, epoch=2, consumed=lambda: consumed[0])
    assert list(resumed) == whole[8:] and len(resumed) == 20  # length stays the epoch's
    consumed[0] = 0  # a new epoch: Lightning resets its counter
    resumed.set_epoch(3)
    assert list(resumed) == list(EpochSampler(1000, draws=20, seed=3, batch_size=4, epoch=3))
    # Two ranks share the epoch's draws: rank r takes draws r, r + 2, ...; a resumed rank leaves out its own first.
    shards = [EpochSampler(1000, draws=20, seed=3, batch_size=4, epoch=2, num_replicas=2, rank=r) for r in (0, 1)]
    assert [len(s) for s in shards] == [10, 10] and list(shards[0]) == whole[0::2] and list(shards[1]) == whole[1::2]
    # The reproduction (2 ranks, 64 draws, 16 already consumed) raised IndexError under Lightning's wrapper.
    rank1 = list(EpochSampler(1000, draws=64, seed=3, batch_size=8, num_replicas=2, rank=1))
    resumed = EpochSampler(1000, draws=64, seed=3, batch_size=8, consumed=lambda: 16, num_replicas=2, rank=1)
    assert list(resumed) == rank1[16:]
    # An epoch is whole global batches, split evenly: 5 draws in batches of 4 are 8 draws, 4 a rank.
    assert [len(EpochSampler(1000, draws=5, seed=3, batch_size=4, num_replicas=2, rank=r)) for r in (0, 1)] == [4, 4]
    assert isinstance(shards[0], torch.utils.data.DistributedSampler)  # so Lightning does not wrap it


def test_a_new_file_format_is_one_entry(tmp_path, monkeypatch):
    """One table of formats serves the corpus and the tasks: a pipe-separated format added there reads as both,
    and its errors name the line."""
    from gpt1.data.corpus import CorpusSource
    from gpt1.data.formats import FORMATS, Csv
    from gpt1.tasks.spec import TaskConfig, split_specs
    from gpt1.tasks.split import TaskSplit

    class Psv(Csv):
        name, sep, holds = "psv", "|", "a bar"

    monkeypatch.setitem(FORMATS, ".psv", Psv())
    path = tmp_path / "rows.psv"
    path.write_text("label|body\n1|first doc\n\n0|second, with a comma\n")
    src = CorpusSource(DataConfig(train_files=[str(path)], valid_fraction=0.1, text_column="body"), "train", tmp_path)
    assert [text for text, _ in src.pieces()] == ["first doc", "second, with a comma"]
    task = TaskConfig(type="classification", data_files={"train": str(path)}, text="body")
    (spec,) = split_specs(task)
    examples = TaskSplit(task, spec, tmp_path).read()
    assert examples.text == ["first doc", "second, with a comma"] and examples.labels.tolist() == [1, 0]

    path.write_text("label|body\n1|first doc\n0|a|b\n")
    with pytest.raises(
        DataError, match=r"rows\.psv:3: 3 fields where the header has 2: quote a field that holds a bar"
    ):
        TaskSplit(task, spec, tmp_path).read()


def test_the_default_number_of_tokenising_processes_follows_the_pipeline(tmp_path, monkeypatch):
    """data.num_proc=null: one process for the "gpt1" pipeline (tokenizers' threads take every core), a process per
    core for the "openai" one (its Python runs on one); a number given is taken as it is."""
    from types import SimpleNamespace

    monkeypatch.setattr(pretrain.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3, 4, 5})
    (tmp_path / "a.txt").write_text("a book")
    monkeypatch.chdir(tmp_path)
    dm = PretrainDataModule(
        DataConfig(train_files=["a.txt"], valid_fraction=0.1), TokenizerConfig(), n_ctx=8, seed=0, cache_dir=tmp_path
    )
    assert dm._num_proc(SimpleNamespace(pipeline="gpt1")) == 1
    assert dm._num_proc(SimpleNamespace(pipeline="openai")) == 6
    dm = PretrainDataModule(
        DataConfig(train_files=["a.txt"], valid_fraction=0.1, num_proc=3),
        TokenizerConfig(),
        n_ctx=8,
        seed=0,
        cache_dir=tmp_path,
    )
    assert dm._num_proc(SimpleNamespace(pipeline="gpt1")) == 3
