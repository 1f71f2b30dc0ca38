"""Hydra's side of the commands: ``register`` stores the schemas in Hydra's ConfigStore and registers gpt1's OmegaConf
resolvers (``${gpt1.choice:task}``, ...), which name a run and its directory from its config."""

from __future__ import annotations

import contextlib
import os
import re
import time
import warnings
from collections.abc import Iterator, Mapping
from importlib.resources import files
from pathlib import Path
from typing import Any, Optional

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gpt1.app.config import (
    ConvertConfig,
    EvaluateConfig,
    FinetuneConfig,
    GenerateConfig,
    PretrainConfig,
    ZeroshotCommandConfig,
)
from gpt1.app.config_files import check_config_file
from gpt1.app.model_group import model_schemas
from gpt1.app.objective import direction
from gpt1.app.sweep import job_dir_of
from gpt1.cluster.slurm import on_cpu
from gpt1.core.errors import ConfigError
from gpt1.data.sample import sample_data
from gpt1.tasks.spec import TaskConfig
from gpt1.training.hydra_job import group_choice


def task_name(cfg: DictConfig) -> str:
    """The name of ``cfg.task`` in logs and metrics.json: ``task.name``, else the task group's option (task=sentiment:
    "sentiment", from the running Hydra job or the config's own hydra node), else the folder of its training files
    (a config composed in Python without Hydra's node), else its hub dataset's config or name."""
    task = cfg.task
    if task.name:
        return task.name
    chosen = group_choice("task") or OmegaConf.select(cfg, "hydra.runtime.choices.task", default=None)
    if chosen:
        return chosen
    if task.data_files:  # e.g. {train: .../tasks/sentiment/train.jsonl}: sentiment
        first = next(iter(task.data_files.values()))
        first = first if isinstance(first, str) else first[0]
        return Path(first).parent.name or Path(first).stem
    return task.dataset_config or str(task.dataset).rsplit("/", 1)[-1]


def default_output_dir(run_name: str) -> str:
    """``paths.output_dir``: Hydra's run directory, or outside a Hydra run the same layout, outputs/<run_name>/<time>
    (resolved once per config: the resolver is cached)."""
    running = OmegaConf.select(HydraConfig.get(), "runtime.output_dir") if HydraConfig.initialized() else None
    return running or str(Path("outputs") / run_name / time.strftime("%Y-%m-%d_%H-%M-%S"))


def _on_sample_books(root: DictConfig) -> bool:
    """Whether a pre-training config trains on the sample books (the quickstart's corpus)."""
    books = str(Path(root.paths.sample_data) / "books") + "/"
    return root.data.hf_dataset is None and all(str(g).startswith(books) for g in root.data.train_files or [None])


def corpus_name(data: Any) -> str:
    """A corpus's name for its run directory: a hub dataset's config or name, else the folder of its first training
    glob when the glob picks files in it (corpus/*.txt: corpus), else that file's name (docs.jsonl: docs)."""
    if data.hf_dataset:
        return data.hf_config or str(data.hf_dataset).rsplit("/", 1)[-1]
    globs = [data.train_files] if isinstance(data.train_files, str) else list(data.train_files or [])
    if not globs:
        return "corpus"
    path = Path(str(globs[0]))
    named = path.parent if re.search(r"[*?\[]", path.name) else path.with_suffix("")
    return named.name or "corpus"


def _pretrain_run_name(quickstart: str, *, _root_: DictConfig) -> str:
    """experiment=quickstart's run_name: ``quickstart`` on the sample books, pretrain/<corpus name> on another
    corpus (data=files ...), so that such runs do not land among the quickstart's."""
    return quickstart if _on_sample_books(_root_) else f"pretrain/{corpus_name(_root_.data)}"


def _sample_prompt(books: str, *, _root_: DictConfig) -> Optional[str]:
    """experiment=quickstart's sample prompt: ``books`` on the sample books, else None (the first words of the
    corpus's validation text)."""
    return books if _on_sample_books(_root_) else None


def _choice(group: str, *, _root_: DictConfig) -> str:
    """The option chosen for ``group``, from the config's own hydra node (which Hydra's launchers see) or the
    running job's; else (a config composed without Hydra's node) the task's name from its data (``task_name``), or
    the group's name."""
    chosen = OmegaConf.select(_root_, f"hydra.runtime.choices.{group}", default=None) or group_choice(group)
    if chosen is None and group == "task" and OmegaConf.select(_root_, "task", default=None) is not None:
        return task_name(_root_)
    return chosen or group


@contextlib.contextmanager
def task_option(task: TaskConfig | Mapping[str, Any] | str | os.PathLike) -> Iterator[str]:
    """Within the block, a task of one's own (a ``TaskConfig``, a dict of its fields, or a task YAML file's path) is
    an option of the task group, as conf/task/NAME.yaml would be; yields NAME, its ``name`` (a file's stem when it has
    none). The option goes with the block: a stored task/NAME would become the schema of a later task/NAME.yaml."""
    if isinstance(task, (str, os.PathLike)):
        path = Path(task)
        if not path.is_file():
            raise ConfigError(f"task={str(task)!r}: no such file (give a TaskConfig, a dict or a YAML file's path)")
        check_config_file(path)  # not a file of YAML keys: one line naming it (and its line)
        node = OmegaConf.load(path)
        if not isinstance(node, DictConfig):
            raise ConfigError(f"{path} is not a task YAML file: it holds no mapping of task fields")
        node.name = node.get("name") or path.stem
    else:
        node = OmegaConf.structured(task) if isinstance(task, TaskConfig) else OmegaConf.create(dict(task))
    try:
        OmegaConf.merge(OmegaConf.structured(TaskConfig), node)  # a misspelt or mistyped field fails here
    except OmegaConfBaseException as e:
        raise ConfigError(f"task: {str(e).splitlines()[0]}") from e
    name = node.get("name")
    if not name:
        raise ConfigError("task.name is not set: a task of one's own names its runs (outputs/finetune/<name>/...)")
    if files("gpt1.conf").joinpath("task", f"{name}.yaml").is_file():
        raise ConfigError(f"task.name={name!r} is gpt1's task conf/task/{name}.yaml: give yours a name of its own")
    group = ConfigStore.instance().repo.setdefault("task", {})
    stored = group.get(f"{name}.yaml")
    ConfigStore.instance().store(group="task", name=name, node=node)
    try:
        yield str(name)
    finally:
        if stored is None:
            del group[f"{name}.yaml"]
        else:
            group[f"{name}.yaml"] = stored


def register() -> None:
    """Register the schemas and the resolvers with Hydra, and silence Hydra's note on the launcher schemas
    (idempotent): before Hydra composes a config, from a command or from Python."""
    resolvers = {  # name -> (function, cached)
        "gpt1.sample_data": (sample_data, True),  # ${gpt1.sample_data:${paths.cache_dir}}: paths.sample_data
        "gpt1.choice": (_choice, False),  # ${gpt1.choice:task}: the group's option, else the group's name
        "gpt1.output_dir": (default_output_dir, True),  # ${gpt1.output_dir:${run_name}}: a run's directory
        "gpt1.pretrain_run_name": (_pretrain_run_name, False),  # quickstart, or pretrain/<corpus> on another corpus
        "gpt1.sample_prompt": (_sample_prompt, False),  # the quickstart's prompt, or None on another corpus
        "gpt1.job_dir": (job_dir_of, False),  # ${gpt1.job_dir:}: a sweep's job directory, by its overrides
        "gpt1.direction": (direction, False),  # ${gpt1.direction:${optimized_metric}}: minimize or maximize
        "gpt1.on_cpu": (on_cpu, False),  # ${gpt1.on_cpu:${trainer.accelerator},A,B} (the SLURM launcher)
    }
    for name, (resolver, cached) in resolvers.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, resolver, use_cache=cached)
    cs = ConfigStore.instance()
    for name, schema in [
        ("pretrain_schema", PretrainConfig),
        ("finetune_schema", FinetuneConfig),
        ("evaluate_schema", EvaluateConfig),
        ("generate_schema", GenerateConfig),
        ("convert_schema", ConvertConfig),
        ("zeroshot_schema", ZeroshotCommandConfig),
    ]:
        cs.store(name=name, node=schema)
    for name, schema in model_schemas().items():  # what conf/model/'s files name in their defaults lists
        cs.store(name=name, node=schema)
    # conf/hydra/launcher/submitit_{slurm,local}.yaml are typed by the launcher plugin's schemas of the same names, by
    # Hydra's (deprecated, still kept) automatic schema matching: a defaults list cannot name them, the plugin stores
    # them anew at every start.
    warnings.filterwarnings("ignore", message=r"\s*'hydra/launcher/submitit_\w+' is validated against ConfigStore")
