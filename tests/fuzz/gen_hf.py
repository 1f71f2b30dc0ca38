"""A Hugging Face ``openai-gpt`` folder (``gpt1 convert from-hf SRC DST``): the sandbox's export of its finished run
(config.json, model.safetensors, tokenizer.json, ...) with one file changed: config.json that does not parse, is not
an object, or has fields missing, of the wrong type or out of range; weights cut, flipped, of another kind, or
replaced by a torch file (pytorch_model.bin); the tokenizer damaged; a file missing, empty, a directory or a
dangling link; and the folder as it is, which converts."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from tests.fuzz import mutations
from tests.fuzz.harness import Expect
from tests.fuzz.world import Cut, Flip, Recipe

FOLDER = "{in}/hf"
ARGV = ["convert", "from-hf", FOLDER, "{run}/converted.ckpt"]
CONFIG = {
    "architectures": ["OpenAIGPTLMHeadModel"],
    "model_type": "openai-gpt",
    "vocab_size": 301,
    "n_positions": 32,
    "n_embd": 32,
    "n_layer": 2,
    "n_head": 2,
    "afn": "gelu",
    "resid_pdrop": 0.0,
    "embd_pdrop": 0.0,
    "attn_pdrop": 0.0,
    "layer_norm_epsilon": 1e-05,
    "initializer_range": 0.05,
}
"""The fields of the export's config.json (world.py's tiny model; its values are read from the file itself)."""

CONFIG_CHANGES = {
    "model_type 'bert'": ("model_type", "bert"),
    "n_layer 'two'": ("n_layer", "two"),
    "n_layer -1": ("n_layer", -1),
    "n_layer 3 (weights for 2)": ("n_layer", 3),
    "n_embd 48 (weights for 32)": ("n_embd", 48),
    "n_head 3 (not a divisor of n_embd)": ("n_head", 3),
    "vocab_size 1000 (weights for 301)": ("vocab_size", 1000),
    "vocab_size a list": ("vocab_size", [301]),
    "afn 'swish'": ("afn", "swish"),
    "layer_norm_epsilon a string": ("layer_norm_epsilon", "small"),
    "attn_pdrop 1.5": ("attn_pdrop", 1.5),
    "n_positions null": ("n_positions", None),
}
"""A config.json field changed: the model it describes is not the weights' (or not a model)."""


@st.composite
def recipes(draw) -> Recipe:
    kind = draw(
        st.sampled_from(
            [
                "valid",
                "config",
                "config_json",
                "config_top",
                "weights",
                "bin",
                "tokenizer",
                "missing",
                "empty",
                "special",
            ]
        )
    )
    copy = {FOLDER: "{assets}/hf"}
    what = "HF folder: "

    def recipe(how: str, expect: Expect, files: dict, names=()) -> Recipe:
        return Recipe("hf_folder", what + how, ARGV, expect, list(names), files=files, copy=copy)

    if kind == "valid":
        return recipe("as exported", Expect.valid, {})
    if kind == "config":
        how = draw(st.sampled_from(sorted(CONFIG_CHANGES)))
        key, value = CONFIG_CHANGES[how]
        text = json.dumps({**CONFIG, key: value})
        return recipe(f"config.json {how}", Expect.invalid, {f"{FOLDER}/config.json": text}, ["config.json"])
    if kind == "config_json":
        text = json.dumps(CONFIG)
        at = draw(st.integers(1, len(text) - 1))
        return recipe(f"config.json cut at {at}", Expect.invalid, {f"{FOLDER}/config.json": text[:at]}, ["config.json"])
    if kind == "config_top":
        body = draw(st.sampled_from(["[1, 2]", '"openai-gpt"', "null", "42"]))
        return recipe(f"config.json {body}", Expect.invalid, {f"{FOLDER}/config.json": body}, ["config.json"])
    if kind == "weights":
        source = draw(st.sampled_from(["damaged", "wrong_kind"]))
        if source == "wrong_kind":
            kind_name, data = draw(mutations.wrong_kind())
            return recipe(
                f"model.safetensors {kind_name}",
                Expect.invalid,
                {f"{FOLDER}/model.safetensors": data},
                ["model.safetensors"],
            )
        if draw(st.booleans()):
            cut = draw(st.integers(0, 4000))
            return recipe(
                f"model.safetensors cut to {cut} bytes",
                Expect.invalid,
                {f"{FOLDER}/model.safetensors": Cut(cut)},
                ["model.safetensors"],
            )
        spots = tuple(draw(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), min_size=1, max_size=4)))
        return recipe(
            f"model.safetensors bits flipped at {spots}",
            Expect.either,
            {f"{FOLDER}/model.safetensors": Flip(spots)},
            ["model.safetensors"],
        )
    if kind == "bin":
        kind_name, data = draw(mutations.wrong_kind("a raw pickle"))
        files = {f"{FOLDER}/model.safetensors": None, f"{FOLDER}/pytorch_model.bin": data}
        return recipe(f"pytorch_model.bin {kind_name}", Expect.invalid, files, ["pytorch_model.bin"])
    if kind == "tokenizer":
        how, data = draw(
            st.sampled_from([("cut", b'{"version": "1.0", "model": {'), ("a list", b"[]"), ("not JSON", b"tokens")])
        )
        return recipe(f"tokenizer.json {how}", Expect.invalid, {f"{FOLDER}/tokenizer.json": data}, ["tokenizer.json"])
    target = draw(st.sampled_from(["config.json", "model.safetensors", "tokenizer.json"]))
    if kind == "missing":
        return recipe(f"no {target}", Expect.invalid, {f"{FOLDER}/{target}": None}, [FOLDER])
    if kind == "empty":
        return recipe(f"{target} empty", Expect.invalid, {f"{FOLDER}/{target}": b""}, [target])
    how, special = draw(mutations.special())
    return recipe(f"{target}: {how}", Expect.invalid, {f"{FOLDER}/{target}": special}, [FOLDER])
