"""Checkpoint files (``ckpt=`` of ``gpt1 generate`` and ``gpt1 evaluate``, ``init_from=`` of ``gpt1 finetune``): cut
or flipped bytes, files of another kind (a CSV, an image, a raw pickle, an archive), torch files that are not gpt1's
(a tensor, a dict without its block), gpt1's block or weights changed field by field (an unknown format or model
type, a tokenizer that is not one, a model config of the wrong keys or values, weights missing, misshapen or not
tensors), a pickle that would run code, empty, a directory or a dangling link in its place; and valid ones."""

from __future__ import annotations

import copy
import functools
import io
import os
import pickle
import tempfile
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from tests.fuzz import mutations
from tests.fuzz.gen_tokenizer import valid_tokenizer_json
from tests.fuzz.harness import Expect
from tests.fuzz.world import FINETUNE, Recipe

COMMANDS = {
    "generate": ["generate", "ckpt={path}", "max_new_tokens=4", "prompt=she said"],
    "evaluate": ["evaluate", "ckpt={path}", "data.valid_files=[{assets}/valid.txt]", "data.max_valid_windows=4"],
    "finetune": ["finetune", "--config-dir", "{assets}/conf", "task=mine", "init_from={path}", *FINETUNE],
}


@functools.cache
def valid_checkpoint() -> bytes:
    """A gpt1 checkpoint of a tiny model with weights alone (``save_checkpoint``'s, as ``gpt1 convert from-hf``
    writes), its tokenizer the BPE of ``valid_tokenizer_json``."""
    import torch

    from gpt1 import api

    tokenizer = api.Tokenizer.from_str(valid_tokenizer_json())
    if "eod" not in tokenizer.specials:
        tokenizer.add_special_tokens(["eod"])
    torch.manual_seed(0)
    config = api.GPTConfig(vocab_size=tokenizer.vocab_size, n_ctx=32, n_layer=2, n_head=2, n_embd=32, n_inner=64)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.ckpt")
        api.save_checkpoint(path, api.GPT(config), tokenizer)
        with open(path, "rb") as f:
            return f.read()


@functools.cache
def _raw() -> dict[str, Any]:
    import torch

    return torch.load(io.BytesIO(valid_checkpoint()), weights_only=True)


def _saved(obj: Any) -> bytes:
    import torch

    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _edit(change: Callable[[dict], Any]) -> bytes:
    raw = copy.deepcopy(_raw())
    out = change(raw)
    return _saved(raw if out is None else out)


def _first_weight(raw: dict) -> str:
    return sorted(raw["state_dict"])[0]


def _set(path: tuple, value: Any) -> Callable[[dict], None]:
    def change(raw: dict) -> None:
        node = raw
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _drop(path: tuple) -> Callable[[dict], None]:
    def change(raw: dict) -> None:
        node = raw
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return change


def _crafted() -> dict[str, tuple[Expect, Callable[[dict], Any]]]:
    import torch

    def misshapen(raw: dict) -> None:
        name = _first_weight(raw)
        raw["state_dict"][name] = torch.zeros(3, 3)

    def not_a_tensor(raw: dict) -> None:
        raw["state_dict"][_first_weight(raw)] = 7

    def missing_weight(raw: dict) -> None:
        del raw["state_dict"][_first_weight(raw)]

    def extra_weight(raw: dict) -> None:
        raw["state_dict"]["model.extra.weight"] = torch.zeros(2)

    return {
        "an empty dict": (Expect.invalid, lambda raw: {}),
        "a tensor": (Expect.invalid, lambda raw: torch.zeros(3)),
        "a list of tensors": (Expect.invalid, lambda raw: [torch.zeros(2)]),
        "a dict of weights without gpt1's block": (Expect.invalid, lambda raw: {"state_dict": raw["state_dict"]}),
        "gpt1's block a string": (Expect.invalid, _set(("gpt1",), "gpt1")),
        "format 99": (Expect.invalid, _set(("gpt1", "format"), 99)),
        "format '2'": (Expect.invalid, _set(("gpt1", "format"), "2")),
        "model_type 'bert'": (Expect.invalid, _set(("gpt1", "model_type"), "bert")),
        "model_type a list": (Expect.invalid, _set(("gpt1", "model_type"), ["gpt"])),
        "no tokenizer": (Expect.invalid, _drop(("gpt1", "tokenizer"))),
        "the tokenizer a number": (Expect.invalid, _set(("gpt1", "tokenizer"), 42)),
        "the tokenizer not JSON": (Expect.invalid, _set(("gpt1", "tokenizer"), "not a tokenizer")),
        "no model config": (Expect.invalid, _drop(("gpt1", "model_config"))),
        "the model config a list": (Expect.invalid, _set(("gpt1", "model_config"), [1, 2])),
        "an unknown model config key": (Expect.invalid, _set(("gpt1", "model_config", "n_layers"), 2)),
        "n_layer -1": (Expect.invalid, _set(("gpt1", "model_config", "n_layer"), -1)),
        "n_embd a string": (Expect.invalid, _set(("gpt1", "model_config", "n_embd"), "wide")),
        "n_head 3 (not a divisor of n_embd)": (Expect.invalid, _set(("gpt1", "model_config", "n_head"), 3)),
        "vocab_size of another tokenizer": (Expect.invalid, _set(("gpt1", "model_config", "vocab_size"), 999)),
        "no weights": (Expect.invalid, _drop(("state_dict",))),
        "the weights a list": (Expect.invalid, _set(("state_dict",), [1, 2])),
        "no weights at all": (Expect.invalid, _set(("state_dict",), {})),
        "a weight misshapen": (Expect.invalid, misshapen),
        "a weight a number": (Expect.invalid, not_a_tensor),
        "a weight missing": (Expect.invalid, missing_weight),
        "an extra weight": (Expect.invalid, extra_weight),
        "the task a list": (Expect.either, _set(("gpt1", "task"), [1, 2])),
        "an extra top-level key": (Expect.valid, _set(("notes",), "kept as it is")),
    }


class _RunsCode:
    """A pickled object that, unpickled, would create a file: what a checkpoint from outside must never do."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def code_running_checkpoint(marker: str) -> bytes:
    """A torch file whose unpickling would create ``marker`` (refused by a weights-only read; written outside the
    run directory, it would show)."""
    return _saved({"state_dict": {}, "gpt1": _RunsCode(marker)})


@st.composite
def recipes(draw) -> Recipe:
    command = draw(st.sampled_from(["generate"] * 8 + ["evaluate", "finetune"]))
    path, name = "{in}/model.ckpt", "model.ckpt"
    argv = [a.replace("{path}", path) for a in COMMANDS[command]]
    kinds = [
        "valid",
        "crafted",
        "crafted",
        "crafted",
        "wrong_kind",
        "damaged",
        "empty",
        "special",
        "runs_code",
        "raw_pickle",
        "numpy",
    ]
    kind = draw(st.sampled_from(kinds))
    what = f"{command} checkpoint: "

    def recipe(how: str, expect: Expect, data, names=None) -> Recipe:
        names = [name] if names is None and expect is not Expect.valid else names or []
        return Recipe("checkpoint", what + how, argv, expect, names, files={path: data})

    if kind == "valid":
        return recipe("weights alone", Expect.valid, valid_checkpoint())
    if kind == "crafted":
        crafted = _crafted()
        how = draw(st.sampled_from(sorted(crafted)))
        expect, change = crafted[how]
        return recipe(how, expect, _edit(change))
    if kind == "wrong_kind":
        kind_name, data = draw(mutations.wrong_kind())
        word = WORDS_OF_KIND.get(kind_name)
        return recipe(kind_name, Expect.invalid, data, [name, word] if word else [name])
    if kind == "damaged":
        how, data = draw(mutations.damaged(valid_checkpoint()))
        return recipe(how, Expect.either, data)
    if kind == "empty":
        return recipe("empty", Expect.invalid, b"", [name, "empty"])
    if kind == "runs_code":
        return recipe("a pickle that would create a file", Expect.invalid, code_running_checkpoint("case/ran"))
    if kind == "raw_pickle":
        data = pickle.dumps(_raw_plain(), protocol=draw(st.integers(2, 5)))
        return recipe("gpt1's checkpoint as a raw pickle", Expect.invalid, data, [name, "pickle"])
    if kind == "numpy":
        import numpy as np

        return recipe("numpy arrays", Expect.invalid, _saved({"state_dict": {"w": np.zeros(3)}}), [name])
    how, special = draw(mutations.special())
    return recipe(how, Expect.invalid, special)


def _raw_plain() -> dict:
    """The checkpoint's content as plain Python (lists for tensors), as a script might pickle it."""
    raw = _raw()
    return {"state_dict": {k: v.tolist() for k, v in raw["state_dict"].items()}, "gpt1": raw["gpt1"]}


WORDS_OF_KIND = {
    "a PNG image": "PNG",
    "a JPEG image": "JPEG",
    "a PDF document": "PDF",
    "a gzip archive": "gzip",
    "a zip archive of text": "zip",
    "an ELF executable": "ELF",
    "a raw pickle": "pickle",
    "a parquet table": "parquet",
    "a CSV table": "text",
    "a JSON document": "JSON",
    "a YAML document": "text",
}
"""What a refusal must call a file of each wrong kind ("the wrong kind of file named for what it is")."""


def unreadable() -> st.SearchStrategy[Recipe]:
    """A valid checkpoint that its reader may not read (mode 000; run as another user)."""
    return st.builds(_unreadable)


def _unreadable() -> Recipe:
    argv = [a.replace("{path}", "{in}/model.ckpt") for a in COMMANDS["generate"]]
    data = mutations.unreadable(valid_checkpoint())
    return Recipe(
        "checkpoint",
        "generate checkpoint: no read permission",
        argv,
        Expect.invalid,
        ["model.ckpt"],
        files={"{in}/model.ckpt": data},
    )
