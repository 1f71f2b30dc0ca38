"""The HF export as the ecosystem's tools expect it: its tokenizer declares the end-of-document token as eos and bos,
so that transformers' generation stops there and EleutherAI's lm-evaluation-harness runs with its defaults (its
prefix token is bos; without one it failed: ``TypeError: 'None' is not an instance of 'Sequence'``). Offline: a
local task file over a local JSON Lines file."""

import json
import logging

import pytest

from gpt1.checkpoints.format import load_checkpoint
from gpt1.checkpoints.hf import export_hf

TASK = """task: gpt1_local_mc
dataset_path: json
dataset_kwargs:
  data_files:
    validation: {data}
validation_split: validation
output_type: multiple_choice
doc_to_text: "{{{{context}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
metric_list:
  - metric: acc
"""
"""A multiple-choice task of the harness, its data a local file (dataset_path json: datasets' packaged builder)."""


@pytest.fixture(scope="module")
def exported(tiny_ckpt, tmp_path_factory):
    out = tmp_path_factory.mktemp("hf") / "model"
    export_hf(tiny_ckpt, out)
    return out, load_checkpoint(tiny_ckpt).tokenizer.specials["eod"]


def test_the_export_declares_the_end_of_document_token_as_eos_and_bos(exported):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out, eod = exported
    tokenizer = AutoTokenizer.from_pretrained(out)
    assert tokenizer.eos_token == tokenizer.bos_token == "_eod_" and tokenizer.eos_token_id == eod
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.generation_config.eos_token_id == eod  # pipeline("text-generation") stops at it


def test_the_harness_runs_an_exported_checkpoint_with_its_defaults(exported, tmp_path, monkeypatch):
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    out, eod = exported
    rows = [
        {"context": f"she said it was day {i}", "choices": ["yes", "no", "a walk", "never"], "label": i % 4}
        for i in range(8)
    ]
    (tmp_path / "mc.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "tasks").mkdir()
    (tmp_path / "tasks" / "gpt1_local_mc.yaml").write_text(TASK.format(data=tmp_path / "mc.jsonl"))
    monkeypatch.chdir(tmp_path)
    logging.getLogger("lm_eval").setLevel(logging.WARNING)
    lm = HFLM(pretrained=str(out), device="cpu", batch_size=8)  # the defaults: no prefix_token_id given
    assert lm.prefix_token_id == eod
    results = simple_evaluate(
        model=lm, tasks=["gpt1_local_mc"], task_manager=TaskManager(include_path=str(tmp_path / "tasks"))
    )
    scores = results["results"]["gpt1_local_mc"]
    assert 0 <= scores["acc,none"] <= 1 and results["n-samples"]["gpt1_local_mc"]["effective"] == 8
