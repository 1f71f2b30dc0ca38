"""A pre-training corpus (``data.train_files``), given to ``gpt1 prepare`` (which trains the tokenizer and packs the
corpus, the data half of ``gpt1 pretrain``): plain text in other encodings (read by its byte-order mark, or refused
without one), tables of documents (.jsonl, .json, .csv, .parquet: UTF-8 only, a text column), files of another kind
named .txt (an image, an archive, a checkpoint), too little text for one window, cut or flipped bytes, empty, huge, a
directory or a dangling link in its place; and valid corpora, which pack."""

from __future__ import annotations

from hypothesis import strategies as st

from tests.fuzz import mutations
from tests.fuzz.gen_task_data import serialize
from tests.fuzz.harness import Expect
from tests.fuzz.world import TINY, WORDS, Recipe

paragraphs = st.lists(st.sampled_from([*WORDS, "café", "she", "said", "never", "again"]), min_size=400, max_size=900)


def argv(train: str) -> list[str]:
    return ["prepare", *TINY, f"data.train_files=[{train}]", "data.valid_files=[{assets}/valid.txt]"]


TEXT_ENCODINGS = {
    "UTF-16 with a byte-order mark": Expect.valid,
    "UTF-32 with a byte-order mark": Expect.valid,
    "UTF-8 with a byte-order mark": Expect.valid,
    "Latin-1": Expect.valid,  # invalid sequences replaced, counted in a warning
    "invalid UTF-8 (a stray 0xff byte)": Expect.valid,
    "UTF-16LE without a byte-order mark": Expect.invalid,
    "UTF-16BE without a byte-order mark": Expect.invalid,
}
"""What a .txt corpus in each encoding gets (gpt1/data/encodings.py)."""


@st.composite
def recipes(draw) -> Recipe:
    words = draw(paragraphs)
    text = " ".join(words[:200]) + ".\n\n" + " ".join(words[200:]) + ".\n"
    fmt = draw(st.sampled_from(["txt", "txt", "jsonl", "json", "csv", "parquet"]))
    name = f"corpus.{fmt}"
    path = f"{{in}}/{name}"
    content = text.encode() if fmt == "txt" else serialize(fmt, [(p, "x") for p in text.split("\n\n")])
    kind = draw(st.sampled_from(["valid", "encoding", "wrong_kind", "short", "damaged", "empty", "huge", "special"]))
    what = f"corpus .{fmt}: "

    def recipe(how: str, expect: Expect, data, names=()) -> Recipe:
        return Recipe("corpus", what + how, argv(path), expect, list(names), files={path: data})

    if kind == "valid":
        return recipe(f"{len(words)} words", Expect.valid, content)
    if kind == "encoding" and fmt != "parquet":
        source = text if fmt == "txt" else content.decode()
        encoding, data = draw(mutations.in_encoding(source))
        if fmt == "txt":
            expect = TEXT_ENCODINGS[encoding]
        else:
            expect = Expect.valid if encoding.startswith("UTF-8 with") else Expect.invalid
        return recipe(encoding, expect, data, [name] if expect is Expect.invalid else [])
    if kind == "wrong_kind":
        texts = {"a CSV table", "a JSON document", "a YAML document"}  # text all the same, in a .txt
        kind_name, data = draw(mutations.wrong_kind(*(texts if fmt == "txt" else ())))
        if fmt != "txt" and kind_name in texts:
            return recipe(kind_name, Expect.invalid, data, [name])
        return recipe(
            kind_name, Expect.invalid if fmt != "txt" or kind_name != "random bytes" else Expect.either, data, [name]
        )
    if kind == "short":
        short = "a few words.\n"
        data = short.encode() if fmt == "txt" else serialize(fmt, [(short, "x")])
        return recipe("fewer tokens than one window", Expect.invalid, data, [name])
    if kind == "damaged":
        how, data = draw(mutations.damaged(content))
        return recipe(how, Expect.either, data, [name])
    if kind == "empty":
        return recipe("empty", Expect.invalid, b"", [name])
    if kind == "huge":
        return recipe("300 KB", Expect.valid, mutations.huge(content, 300_000) if fmt == "txt" else content)
    how, special = draw(mutations.special())
    return recipe(how, Expect.invalid, special, [name])


@st.composite
def unreadable(draw) -> Recipe:
    """A valid corpus that its reader may not read (mode 000; run as another user)."""
    text = " ".join(draw(paragraphs)) + ".\n"
    return Recipe(
        "corpus",
        "corpus .txt: no read permission",
        argv("{in}/corpus.txt"),
        Expect.invalid,
        ["corpus.txt"],
        files={"{in}/corpus.txt": mutations.unreadable(text.encode())},
    )
