"""Tokenizer files (``tokenizer.path``), given to ``gpt1 prepare``: the BPE's JSON file (``Tokenizer.to_str``'s, as a
run caches it) and OpenAI's vocabulary as a directory (vocab.json + merges.txt, with ``tokenizer=openai``): JSON that
does not parse or is not a tokenizer, a missing file, a merge line that is not two tokens, other encodings, files of
another kind, cut or flipped bytes, empty, a directory or a dangling link in place of the file; and valid ones."""

from __future__ import annotations

import functools
import json

from hypothesis import strategies as st

from tests.fuzz import mutations
from tests.fuzz.harness import Expect
from tests.fuzz.world import TINY, WORDS, Recipe


@functools.cache
def valid_tokenizer_json() -> str:
    """A valid BPE file: gpt1's BPE trained on a few sentences (``Tokenizer.to_str``, as a run caches it)."""
    from gpt1 import api

    texts = [" ".join(WORDS[i:] + WORDS[:i]) + ", she said again." for i in range(len(WORDS))]
    return api.train_bpe(texts * 4, vocab_size=300).to_str()


def argv(path: str, openai: bool = False) -> list[str]:
    extra = ["tokenizer=openai"] if openai else []
    return [
        "prepare",
        *TINY,
        *extra,
        f"tokenizer.path={path}",
        "data.train_files=[{assets}/corpus.txt]",
        "data.valid_files=[{assets}/valid.txt]",
    ]


WRONG_JSON = {
    "an empty object": "{}",
    "a list": "[]",
    "null": "null",
    "a string": '"tokenizer"',
    "gpt1's type without its BPE": '{"type": "gpt1-tokenizer", "pipeline": "gpt1", "specials": {}}',
    "a model that is a number": '{"model": 1}',
}


def vocab_files(tokenizer_json: str) -> tuple[str, str]:
    """OpenAI's two files (vocab.json, merges.txt) of the BPE in ``tokenizer_json`` (``Tokenizer.to_str``'s)."""
    model = json.loads(tokenizer_json)["bpe"]["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return json.dumps(model["vocab"]), "#version: 0.2\n" + "".join(m + "\n" for m in merges)


@st.composite
def recipes(draw) -> Recipe:
    tokenizer_json = valid_tokenizer_json()
    if draw(st.booleans()):
        return draw(_openai(tokenizer_json))
    path, name = "{in}/tok.json", "tok.json"
    kind = draw(
        st.sampled_from(["valid", "json", "structure", "encoding", "wrong_kind", "damaged", "empty", "special"])
    )
    what = "BPE JSON: "

    def recipe(how: str, expect: Expect, data) -> Recipe:
        names = [name] if expect is not Expect.valid else []
        return Recipe("tokenizer", what + how, argv(path), expect, names, files={path: data})

    if kind == "valid":
        return recipe("as a run caches it", Expect.valid, tokenizer_json)
    if kind == "json":
        at = draw(st.integers(1, len(tokenizer_json) - 1))
        return recipe(f"cut at {at} of {len(tokenizer_json)} characters", Expect.invalid, tokenizer_json[:at])
    if kind == "structure":
        how = draw(st.sampled_from(sorted(WRONG_JSON)))
        return recipe(how, Expect.invalid, WRONG_JSON[how])
    if kind == "encoding":
        encoding, data = draw(mutations.in_encoding(tokenizer_json))
        expect = Expect.either if encoding.startswith("UTF-8 with") or encoding == "Latin-1" else Expect.invalid
        return recipe(encoding, expect, data)
    if kind == "wrong_kind":
        kind_name, data = draw(mutations.wrong_kind())
        return recipe(kind_name, Expect.invalid, data)
    if kind == "damaged":
        how, data = draw(mutations.damaged(tokenizer_json.encode()))
        return recipe(how, Expect.either, data)
    if kind == "empty":
        return recipe("empty", Expect.invalid, b"")
    how, special = draw(mutations.special())
    return recipe(how, Expect.invalid, special)


@st.composite
def _openai(draw, tokenizer_json: str) -> Recipe:
    vocab, merges = vocab_files(tokenizer_json)
    folder = "{in}/openai"
    files = {f"{folder}/vocab.json": vocab, f"{folder}/merges.txt": merges}
    kind = draw(st.sampled_from(["valid", "missing", "vocab_json", "merge_line", "damaged", "empty", "special"]))
    what = "OpenAI vocab folder: "
    target = draw(st.sampled_from(sorted(files)))
    name = target.rsplit("/", 1)[1]

    def recipe(how: str, expect: Expect, changed: dict, names=()) -> Recipe:
        return Recipe(
            "tokenizer", what + how, argv(folder, openai=True), expect, list(names), files={**files, **changed}
        )

    if kind == "valid":
        return recipe("vocab.json + merges.txt", Expect.valid, {})
    if kind == "missing":
        kept = {k: v for k, v in files.items() if k != target}
        return Recipe(
            "tokenizer", what + f"no {name}", argv(folder, openai=True), Expect.invalid, ["openai"], files=kept
        )
    if kind == "vocab_json":
        at = draw(st.integers(1, len(vocab) - 1))
        return recipe(f"vocab.json cut at {at}", Expect.invalid, {f"{folder}/vocab.json": vocab[:at]}, ["vocab.json"])
    if kind == "merge_line":
        bad = draw(st.sampled_from(["a b c", "lonely", "zz\u00e9 qq\u00e9"]))
        lines = merges.splitlines(keepends=True)
        at = draw(st.integers(1, len(lines)))
        lines.insert(at, bad + "\n")
        return recipe(
            f"merges.txt line {at + 1} {bad!r}",
            Expect.invalid,
            {f"{folder}/merges.txt": "".join(lines)},
            ["merges.txt"],
        )
    if kind == "damaged":
        how, data = draw(mutations.damaged(files[target].encode()))
        return recipe(f"{name} {how}", Expect.either, {target: data}, [])
    if kind == "empty":  # (merges.txt empty: a vocabulary without merges, which tokenizers takes)
        expect = Expect.either if name == "merges.txt" else Expect.invalid
        return recipe(f"{name} empty", expect, {target: b""}, [name])
    how, special = draw(mutations.special())
    return recipe(f"{name}: {how}", Expect.invalid, {target: special}, ["openai"])


def unreadable() -> st.SearchStrategy[Recipe]:
    """A valid BPE file that its reader may not read (mode 000; run as another user)."""
    return st.builds(_unreadable)


def _unreadable() -> Recipe:
    data = mutations.unreadable(valid_tokenizer_json().encode())
    return Recipe(
        "tokenizer",
        "BPE JSON: no read permission",
        argv("{in}/tok.json"),
        Expect.invalid,
        ["tok.json"],
        files={"{in}/tok.json": data},
    )
