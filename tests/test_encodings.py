"""Encodings (issue 48, point 5): a .txt file with a UTF-16 or UTF-32 byte-order mark is read in that encoding, for
the BPE and the packed stream alike; a structured file in one is refused with the conversion to run, as is a UTF-16
or UTF-32 file without a mark; a UTF-8 byte-order mark is not text."""

from __future__ import annotations

import codecs
import csv
import io
import json
import logging

import pytest

from gpt1.core.errors import DataError
from gpt1.data.corpus import file_pieces
from gpt1.data.data_config import DataConfig
from gpt1.data.encodings import UTF8, read_encoding, sniff
from gpt1.data.pretrain_data import PretrainDataModule
from gpt1.data.read_errors import invalid_sequences
from gpt1.data.sources import FileSource, load_files
from gpt1.text.tokenizer import TokenizerConfig

TEXT = "The whale, naïve \u4e2d\u6587 ΣΑΣ — “quoted”.\r\nA second line\rand a third \U0001f40b.\n" * 40
"""ASCII and not (accents, CJK, Greek, a character beyond the BMP), every kind of line break."""

MARKED = {  # Python's codec that writes the text after the mark: the mark, iconv's names with it and without
    "utf-16-le": (codecs.BOM_UTF16_LE, "UTF-16", "UTF-16LE"),
    "utf-16-be": (codecs.BOM_UTF16_BE, "UTF-16", "UTF-16BE"),
    "utf-32-le": (codecs.BOM_UTF32_LE, "UTF-32", "UTF-32LE"),
    "utf-32-be": (codecs.BOM_UTF32_BE, "UTF-32", "UTF-32BE"),
    "utf-8": (codecs.BOM_UTF8, "UTF-8", "UTF-8"),
}


def test_the_encoding_is_told_by_the_mark_else_by_the_nul_bytes_of_ascii_text(tmp_path):
    path = tmp_path / "doc.txt"
    for codec, (bom, marked, unmarked) in MARKED.items():
        path.write_bytes(bom + TEXT.encode(codec))
        assert (sniff(path).name, sniff(path).codec, sniff(path).bom) == (marked, codec, bom)
        path.write_bytes(TEXT.encode(codec))  # no mark: NUL bytes beside ASCII characters tell UTF-16/32 and order
        assert (sniff(path).name, sniff(path).codec, sniff(path).bom) == (unmarked, codec, b"")
    for data in ("caf\u00e9".encode("latin-1"), b"a stray \0 NUL in UTF-8 text", "\u4e2d\u6587".encode("utf-16-le")):
        path.write_bytes(data)
        assert sniff(path) == UTF8  # (not UTF-8 text: read as UTF-8, its invalid bytes replaced and counted)


@pytest.mark.parametrize("codec", list(MARKED))
def test_a_txt_file_with_a_byte_order_mark_trains_and_packs_as_its_utf8_text(tmp_path, codec):
    """The same text in UTF-8 (no mark) and in ``codec`` with its mark: the same BPE trained on each (its training
    texts read piece by piece), the same packed tokens."""
    bom = MARKED[codec][0]
    (tmp_path / "utf8").mkdir()
    (tmp_path / codec).mkdir()
    (tmp_path / "utf8" / "doc.txt").write_bytes(TEXT.encode())
    (tmp_path / codec / "doc.txt").write_bytes(bom + TEXT.encode(codec))
    whole = TEXT.replace("\r\n", "\n").replace("\r", "\n")
    for size in (1, 7, 64, None):
        assert "".join(file_pieces(tmp_path / codec / "doc.txt", size)) == whole
    streams = []
    for name in ("utf8", codec):
        cfg = DataConfig(train_files=[str(tmp_path / name / "doc.txt")], valid_fraction=0.1, num_proc=1)
        dm = PretrainDataModule(cfg, TokenizerConfig(vocab_size=300), n_ctx=8, seed=0, cache_dir=tmp_path / "cache")
        dm.prepare_data()
        dm.setup("fit")
        streams.append((dm.tokenizer.to_str(), dm.train_tokens.tolist() + dm.valid_tokens.tolist()))
    assert streams[0] == streams[1]


def test_txt_files_in_two_encodings_load_as_one_table(tmp_path):
    """``load_files`` (a task's .txt files): datasets' text builder takes one encoding, so each run of files in one
    encoding is converted apart, in order."""
    (tmp_path / "a.txt").write_bytes(TEXT.encode())
    (tmp_path / "b.txt").write_bytes(TEXT.encode("utf-16"))
    (tmp_path / "c.txt").write_bytes(TEXT.encode())
    rows = load_files([tmp_path / f"{n}.txt" for n in "abc"], cache_dir=tmp_path / "cache")["text"]
    assert rows == [TEXT.replace("\r\n", "\n").replace("\r", "\n")] * 3


def test_a_txt_file_in_utf16_without_a_mark_is_refused_before_any_work(tmp_path):
    path = tmp_path / "my book.txt"
    path.write_bytes(TEXT.encode("utf-16-le"))
    cfg = DataConfig(train_files=[str(path)], valid_fraction=0.1)
    with pytest.raises(DataError) as refused:
        PretrainDataModule(cfg, TokenizerConfig(vocab_size=300), n_ctx=8, seed=0, cache_dir=tmp_path / "cache")
    assert str(refused.value) == (
        f"{path} looks like UTF-16LE without a byte-order mark (a NUL byte beside each ASCII character), not UTF-8: "
        f"convert it: iconv -f UTF-16LE -t UTF-8 '{path}' > '{tmp_path / 'my book.utf8.txt'}'"
    )
    assert not (tmp_path / "cache").exists()


def test_invalid_sequences_are_counted_in_the_files_encoding(tmp_path, caplog):
    """A lone surrogate and a cut last character in UTF-16 LE: two U+FFFD where it is read, counted, the first
    named by its byte offset in the file (its mark counted); a U+FFFD written as such is text."""
    path = tmp_path / "doc.txt"
    good = "ok \ufffd stays ".encode("utf-16-le")
    path.write_bytes(codecs.BOM_UTF16_LE + good + b"\x00\xd8" + "a".encode("utf-16-le") + b"x")
    encoding = read_encoding(path, text=True)
    for block in (1, 3, 1 << 20):
        assert invalid_sequences(path, encoding, block) == (2, 2 + len(good))
    assert "".join(file_pieces(path, None)) == "ok \ufffd stays \ufffda\ufffd"
    cfg = DataConfig(train_files=[str(path)], valid_fraction=0.5, num_proc=1)
    dm = PretrainDataModule(cfg, TokenizerConfig(vocab_size=300), n_ctx=2, seed=0, cache_dir=tmp_path / "cache")
    with caplog.at_level(logging.WARNING):
        dm.prepare_data()
    assert f"{path}: 2 invalid UTF-16 byte sequences replaced with U+FFFD (the first at byte {2 + len(good)} " in (
        caplog.text
    )


ROWS = [{"sentence": "naïve \u4e2d\u6587", "label": 1}, {"sentence": 'a, "quoted" one', "label": 0}]


def write_table(path, encode):
    """``ROWS`` as a .jsonl, .csv or .tsv file, its text through ``encode``."""
    if path.suffix == ".jsonl":
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in ROWS)
    else:
        buffer = io.StringIO()
        writer = csv.writer(buffer, delimiter="," if path.suffix == ".csv" else "\t", lineterminator="\n")
        writer.writerows([["sentence", "label"], *([r["sentence"], r["label"]] for r in ROWS)])
        text = buffer.getvalue()
    path.write_bytes(encode(text))


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv"])
def test_a_task_file_with_a_utf8_mark_reads_as_without(tmp_path, suffix):
    path = tmp_path / f"train{suffix}"
    write_table(path, lambda text: codecs.BOM_UTF8 + text.encode())
    source = FileSource([str(path)], "task.data_files.train", str(tmp_path / "cache"))
    assert source.columns(path) == ["sentence", "label"]
    assert source.rows(["sentence", "label"]).to_list() == ROWS


@pytest.mark.parametrize("suffix", [".jsonl", ".csv", ".tsv"])
@pytest.mark.parametrize(
    "codec, said, iconv",
    [
        pytest.param("utf-16", "UTF-16 (little-endian, by its byte-order mark)", "UTF-16", id="utf16-marked"),
        pytest.param(
            "utf-16-be",
            "UTF-16BE without a byte-order mark (a NUL byte beside each ASCII character)",
            "UTF-16BE",
            id="utf16be-unmarked",
        ),
        pytest.param("utf-32", "UTF-32 (little-endian, by its byte-order mark)", "UTF-32", id="utf32-marked"),
    ],
)
def test_a_task_file_in_utf16_or_utf32_is_refused_with_the_conversion(tmp_path, suffix, codec, said, iconv):
    path = tmp_path / f"train{suffix}"
    write_table(path, lambda text: text.encode(codec))
    source = FileSource([str(path)], "task.data_files.train", str(tmp_path / "cache"))
    convert = f"iconv -f {iconv} -t UTF-8 {path} > {tmp_path / f'train.utf8{suffix}'}"
    refusal = f"{path} is {said}, but {suffix} files must be UTF-8: convert it: {convert}"
    if "without" in said:
        refusal = f"{path} looks like {said}, not UTF-8: convert it: {convert}"
    with pytest.raises(DataError) as refused:
        source.columns(path)
    assert str(refused.value) == refusal
    with pytest.raises(DataError, match="convert it: iconv"):
        load_files([path], cache_dir=tmp_path / "cache")
