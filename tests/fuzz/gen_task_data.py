"""A task's data files, in each format gpt1 reads (gpt1/data/formats.py: .csv, .tsv, .jsonl, .json, .parquet), as
the training file of a task of one's own given to ``gpt1 finetune``: rows with an unknown label, a missing column, a
ragged or malformed line, a header alone, other encodings, files of another kind, cut or flipped bytes, empty,
huge (many rows, one long row), a directory or a dangling link in its place; and valid files, which train."""

from __future__ import annotations

import io
import json
from pathlib import Path

from hypothesis import strategies as st

from tests.fuzz import mutations
from tests.fuzz.harness import Expect
from tests.fuzz.world import FINETUNE, WORDS, Recipe, task_yaml

FORMATS = ["csv", "tsv", "jsonl", "json", "parquet"]
LINES = {"csv": True, "tsv": True, "jsonl": True, "json": False, "parquet": False}
"""Whether a format's rows are lines (an error names the line)."""
ARGV = ["finetune", "--config-dir", "{in}/conf", "task=fz", "init_from={ckpt}", *FINETUNE]

texts = st.lists(st.sampled_from([*WORDS, "café", "it's", "a, b", 'say "hi"']), min_size=1, max_size=8).map(" ".join)
rows_strategy = st.lists(st.tuples(texts, st.sampled_from(["neg", "pos"])), min_size=6, max_size=30)


def serialize(fmt: str, rows: list[tuple[str, str]], columns: tuple[str, str] = ("text", "label")) -> bytes:
    """``rows`` (text, label) as a file of format ``fmt``, with the column names ``columns``."""
    if fmt in ("csv", "tsv"):
        import csv

        buffer = io.StringIO()
        writer = csv.writer(buffer, delimiter="," if fmt == "csv" else "\t", lineterminator="\n")
        writer.writerow(columns)
        writer.writerows(rows)
        return buffer.getvalue().encode()
    records = [dict(zip(columns, row)) for row in rows]
    if fmt == "jsonl":
        return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    if fmt == "json":
        return json.dumps(records, ensure_ascii=False, indent=1).encode()
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table({c: [r[i] for r in rows] for i, c in enumerate(columns)}), buffer)
    return buffer.getvalue()


def line_of(fmt: str, row: int) -> int:
    """The 1-based line of data row ``row`` (header first for .csv/.tsv)."""
    return row + 2 if fmt in ("csv", "tsv") else row + 1


def _task(fmt: str) -> dict[str, str]:
    text = task_yaml(Path("assets/task"), train=f"case/train.{fmt}")
    return {"{in}/conf/task/fz.yaml": text}


@st.composite
def recipes(draw) -> Recipe:
    fmt = draw(st.sampled_from(FORMATS))
    rows = draw(rows_strategy)
    name = f"train.{fmt}"
    path = f"{{in}}/{name}"
    kinds = ["valid", "label", "column", "header_only", "encoding", "wrong_kind", "damaged", "empty", "huge", "special"]
    if fmt in ("csv", "tsv", "jsonl"):
        kinds += ["ragged" if fmt != "jsonl" else "malformed"]
    kind = draw(st.sampled_from(kinds))
    what = f"task data .{fmt}: "

    def recipe(how: str, expect: Expect, content, names=(), line=None) -> Recipe:
        return Recipe("task_data", what + how, ARGV, expect, list(names), line, files={**_task(fmt), path: content})

    if kind == "valid":
        return recipe(f"{len(rows)} rows", Expect.valid, serialize(fmt, rows))
    if kind == "label":
        i = draw(st.integers(0, len(rows) - 1))
        rows[i] = (rows[i][0], "neutral")
        return recipe(
            f"row {i}'s label 'neutral'",
            Expect.invalid,
            serialize(fmt, rows),
            [name, "neutral"],
            line_of(fmt, i) if LINES[fmt] else None,
        )
    if kind == "column":
        return recipe("no label column", Expect.invalid, serialize(fmt, rows, ("text", "lbl")), [name, "label"])
    if kind == "header_only":
        if fmt in ("csv", "tsv"):
            return recipe("a header and no rows", Expect.invalid, serialize(fmt, []), [name])
        return recipe("no rows", Expect.invalid, serialize(fmt, []), [name])
    if kind == "ragged":
        i = draw(st.integers(0, len(rows) - 1))
        sep = "," if fmt == "csv" else "\t"
        lines = serialize(fmt, rows).decode().splitlines(keepends=True)
        lines[i + 1] = lines[i + 1].rstrip("\n") + f"{sep}extra{sep}fields\n"
        return recipe(f"row {i} with extra fields", Expect.invalid, "".join(lines).encode(), [name], line_of(fmt, i))
    if kind == "malformed":
        i = draw(st.integers(0, len(rows) - 1))
        broken = draw(st.sampled_from(['{"text": "open', "[1, 2]", "not json", '{"text": "a", "label": "pos",}']))
        lines = serialize(fmt, rows).decode().splitlines(keepends=True)
        lines[i] = broken + "\n"
        return recipe(f"line {i + 1} {broken!r}", Expect.invalid, "".join(lines).encode(), [name], i + 1)
    if kind == "encoding":
        if fmt == "parquet":
            return recipe("empty", Expect.invalid, b"", [name])
        rows[0] = ("café au lait", rows[0][1])
        text = serialize(fmt, rows).decode()
        encoding, data = draw(mutations.in_encoding(text))
        expect = Expect.valid if encoding.startswith("UTF-8 with") else Expect.invalid
        return recipe(encoding, expect, data, [name] if expect is Expect.invalid else [])
    if kind == "wrong_kind":
        same = {
            "csv": "a CSV table",
            "tsv": "a CSV table",
            "json": "a JSON document",
            "jsonl": "a JSON document",
            "parquet": "a parquet table",
        }[fmt]
        kind_name, data = draw(mutations.wrong_kind(same, "a YAML document"))
        return recipe(kind_name, Expect.invalid, data, [name])
    if kind == "damaged":
        how, data = draw(mutations.damaged(serialize(fmt, rows)))
        return recipe(how, Expect.either, data, [name])
    if kind == "empty":
        return recipe("empty", Expect.invalid, b"", [name])
    if kind == "huge":
        if draw(st.booleans()):
            return recipe("3000 rows", Expect.valid, serialize(fmt, (rows * (3000 // len(rows) + 1))[:3000]))
        rows[0] = (" ".join(["word"] * 40_000), rows[0][1])
        return recipe("a row of 200 KB", Expect.valid, serialize(fmt, rows))
    how, special = draw(mutations.special())
    return recipe(how, Expect.invalid, special, [name])


@st.composite
def unreadable(draw) -> Recipe:
    """A valid training file that its reader may not read (mode 000; run as another user)."""
    fmt = draw(st.sampled_from(FORMATS))
    name = f"train.{fmt}"
    data = mutations.unreadable(serialize(fmt, draw(rows_strategy)))
    return Recipe(
        "task_data",
        f"task data .{fmt}: no read permission",
        ARGV,
        Expect.invalid,
        [name],
        files={**_task(fmt), f"{{in}}/{name}": data},
    )
