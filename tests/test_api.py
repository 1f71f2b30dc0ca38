"""The library without Hydra's runtime: a config composed in Python (``gpt1.api.compose``, or ``hydra.compose`` after
``gpt1.app.registration.register()``) runs, writes where the command would, and names its task; a corpus of one's own
names its runs and prompts its samples; a single-class prediction is flagged. (docs/library.md's blocks:
test_readme.py.)"""

import json
from types import SimpleNamespace

import pytest
import torch
from hydra import compose, initialize_config_module
from hydra.core.config_store import ConfigStore

from gpt1 import api
from gpt1.core.errors import ConfigError
from gpt1.model.decoder import GPT, GPTConfig
from gpt1.tasks.spec import TaskConfig
from gpt1.text.tokenizer import train_bpe
from gpt1.training.schema import OptimConfig
from gpt1.training.task_module import TaskModule
from tests.helpers import FEW_FINETUNE


def test_a_config_composed_by_hydra_runs_without_hydras_runtime(tiny_ckpt, tmp_path, monkeypatch, cache_dir):
    """The issue's walk: hydra.compose after register(), then the command's function: no HydraConfig interpolation
    fails (paths.output_dir: outputs/<run_name>/<time>), and the task is named (it printed ``task None``)."""
    monkeypatch.chdir(tmp_path)
    with initialize_config_module("gpt1.conf", version_base="1.3"):
        cfg = compose(
            "finetune", [f"init_from={tiny_ckpt}", "task=sentiment", f"paths.cache_dir={cache_dir}", *FEW_FINETUNE]
        )
    metrics = api.finetune(cfg)
    assert metrics["task"] == "sentiment"
    [run] = (tmp_path / "outputs" / "finetune" / "sentiment").iterdir()  # outputs/finetune/<task>/<time>
    assert json.loads((run / "metrics.json").read_text())["task"] == "sentiment"


def test_compose_settles_the_run_directory_and_the_task_name():
    cfg = api.compose("finetune", ["task=sentiment", "init_from=x.ckpt"])
    assert cfg.run_name == "finetune/sentiment" and cfg.task.name == "sentiment" and "hydra" not in cfg
    assert cfg.paths.output_dir.startswith("outputs/finetune/sentiment/")
    assert cfg.paths.output_dir == cfg.paths.output_dir  # resolved once: the same directory every time it is read
    assert api.compose("pretrain").run_name == "quickstart"


def test_a_task_of_ones_own_from_python_runs_and_is_placed_by_its_name(tiny_ckpt, tmp_path, monkeypatch, cache_dir):
    """A dict of a task file's fields, on files of one's own, no YAML: composed as task=NAME would be (task.*
    overrides apply), named and placed by its name."""
    monkeypatch.chdir(tmp_path)
    words = ["rain and wind", "a goal in the last minute", "the vote in parliament"]
    for split, n in (("train", 64), ("dev", 16), ("test", 16)):
        rows = [f"{words[i % 3]} number {i},{['weather', 'sport', 'politics'][i % 3]}" for i in range(n)]
        (tmp_path / f"{split}.csv").write_text("text,topic\n" + "\n".join(rows) + "\n")
    topics = {
        "name": "topics",
        "type": "classification",
        "data_files": {"train": "train.csv", "validation": "dev.csv", "test": "test.csv"},
        "text": "text",
        "label": "topic",
        "label_names": ["weather", "sport", "politics"],
    }
    cfg = api.compose(
        "finetune", [f"init_from={tiny_ckpt}", f"paths.cache_dir={cache_dir}", *FEW_FINETUNE], task=topics
    )
    assert cfg.run_name == "finetune/topics" and cfg.task.splits.train == "train[:64]"  # FEW_FINETUNE's override
    metrics = api.finetune(cfg)
    assert metrics["task"] == "topics" and metrics["examples"]["validation"] == 16
    [run] = (tmp_path / "outputs" / "finetune" / "topics").iterdir()
    assert json.loads((run / "metrics.json").read_text())["task"] == "topics"


def test_compose_takes_a_task_config_or_a_task_files_path_and_says_what_is_wrong(tmp_path):
    fields = {"type": "classification", "data_files": {"train": "a.csv"}, "text": "x"}
    assert api.compose("finetune", ["init_from=x"], task=TaskConfig(name="mine", **fields)).run_name == "finetune/mine"
    assert "mine.yaml" not in ConfigStore.instance().repo["task"]  # the option goes with the call (else a schema)
    (tmp_path / "reviews.yaml").write_text("type: classification\ndata_files: {train: a.csv}\ntext: x\n")
    cfg = api.compose("zeroshot", ["ckpts=[x]"], task=tmp_path / "reviews.yaml")  # named by its file
    assert (cfg.run_name, cfg.task.name) == ("zeroshot/reviews", "reviews")
    assert api.compose("evaluate", ["ckpt=x"], task=str(tmp_path / "reviews.yaml")).task.name == "reviews"
    for task, overrides, message in [
        (fields, [], "task.name is not set"),
        ({**fields, "name": "sentiment"}, [], "'sentiment' is gpt1's task conf/task/sentiment.yaml"),
        ({**fields, "name": "x", "txet": "y"}, [], "task: Key 'txet' not in 'TaskConfig'"),
        (tmp_path / "nowhere.yaml", [], "nowhere.yaml': no such file"),
        ({**fields, "name": "x"}, ["task=sentiment"], "a task and a task= override"),
    ]:
        with pytest.raises(ConfigError, match=message):
            api.compose("finetune", ["init_from=x", *overrides], task=task)


@pytest.mark.parametrize(
    "overrides, name",
    [
        (["data=files", "data.train_files=[my_corpus/*.txt]"], "pretrain/my_corpus"),
        (["data=files", "data.train_files=docs.jsonl"], "pretrain/docs"),
        (["data=wikitext103", "data.hf_config=wikitext-2-raw-v1"], "pretrain/wikitext-2-raw-v1"),
    ],
)
def test_a_corpus_of_ones_own_names_its_runs_and_prompts_its_samples_from_itself(overrides, name):
    cfg = api.compose("pretrain", overrides)
    assert cfg.run_name == name and cfg.paths.output_dir.startswith(f"outputs/{name}/")
    assert cfg.callbacks.samples.prompt is None  # pretrain: the first words of the validation text
    books = api.compose("pretrain")
    assert books.callbacks.samples.prompt == "it is a truth universally acknowledged"


def test_the_api_names_are_the_commands_functions_each_documented():
    from gpt1.commands.finetune import finetune
    from gpt1.commands.pretrain import train

    assert api.pretrain is train and api.finetune is finetune
    for name in api.__all__:
        assert getattr(api, name).__doc__, name
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        api.nope  # noqa: B018


def test_the_presets_are_the_model_groups_gpt_sizes():
    assert list(api.PRESETS) == ["gpt1", "small", "tiny"] and "lstm" not in api.PRESETS
    assert api.PRESETS["small"] == api.model_config("small") and api.PRESETS["gpt1"].n_layer == 12
    with pytest.raises(KeyError):
        api.PRESETS["lstm"]


@pytest.mark.parametrize("predicted, single", [([1, 1, 1, 1], 1.0), ([1, 0, 1, 1], 0.0)])
def test_a_prediction_of_a_single_class_is_flagged(predicted, single, monkeypatch):
    tok = train_bpe(["a tiny corpus of words"] * 10, vocab_size=40)
    task = TaskConfig(name="t", type="classification", data_files={"train": "x.jsonl"}, num_labels=2)
    module = TaskModule(
        GPT(GPTConfig(vocab_size=tok.vocab_size, n_ctx=8, n_layer=1, n_head=1, n_embd=4, n_inner=8)),
        tok,
        OptimConfig(),
        task,
    )
    logits = torch.nn.functional.one_hot(torch.tensor(predicted), 2).float()  # (4, 2)
    monkeypatch.setattr(module, "forward", lambda batch: SimpleNamespace(logits=logits))
    logged = {}
    monkeypatch.setattr(module, "log", lambda key, value, **kwargs: logged.__setitem__(key, float(value)))
    for _ in range(2):  # two batches of one split
        module._evaluate("val", {"labels": torch.tensor([0, 1, 0, 1])}, 0)
    module._log_metrics("val")
    assert logged["val/single_class_prediction"] == single
