"""Fine-tuning tasks: a ``TaskConfig`` (``conf/task/NAME.yaml``) -> labelled examples -> the paper's input
transformations -> dynamically padded batches, in ``TaskDataModule``. A new task needs a YAML file, no code.

Splits. A task has up to three roles: ``train``, ``validation``, ``test``. ``task.splits`` maps each role to a split
name, or to a list of names (several validation splits, e.g. MNLI's matched and mismatched), of the hub dataset or
of ``task.data_files`` (whose keys are split names); ``name[a:b]`` keeps rows a to b-1 (ints, negative ones from
the end, or percentages: ``validation[:374]``, ``train[:10%]``). A role with one split is known by the role's name
("train", "validation", "test"), a role with several by the split names. ``index`` is a row's position in its
split (counting from 0, before any slice), as in GLUE's prediction files; errors name rows by it.

Labels. A label of -1, null, "" or NaN means "no gold label": such rows are dropped (counted in ``stats``); a split
with no label at all (or no label column: a test split) is unlabeled, for predictions only. A label whose text
(``str(value)``) is one of ``label_names`` maps to its position there (strings, letters, "1"/"2"); other ints pass
through as class indices (checked against ``num_labels``); regression labels (``num_labels: 1``) are floats.
``label_names`` default to the names of a ``ClassLabel`` column (hub datasets, parquet files written by datasets).

Transformations (paper section 3.3; ``S``, ``D``, ``X``: the start, delimiter and extract tokens):
classification ``S text X``; entailment ``S text D text_pair X``; similarity both orderings ``S a D b X`` and
``S b D a X``; multiple choice ``S context D choice_k X`` for each of the row's choices.

Truncation (``task.truncation``), counted per split in ``stats["truncated"]`` and logged at start-up:
- ``original`` (default), as the original ``transform_roc``: each text is cut to its share of the context, keeping
  its beginning: ``n_ctx - 2`` tokens for a single text, ``(n_ctx - 3) // 2`` for each text of a pair and for the
  context and each choice of a multiple-choice row (254 at n_ctx 512, the original's ``n_ctx // 2 - 2``).
- ``longest_first``: only when the sequence would not fit, tokens are cut from the end of the longer text until it
  does (Hugging Face's ``longest_first``): a short hypothesis or answer leaves room for a long premise or passage.

Batches (``collate``; right padding with id ``PAD_ID`` to the batch's longest sequence, T):
- classification, entailment: ``input_ids`` (B, T), ``extract`` (B,), ``targets`` (B, T);
- similarity: ``input_ids`` (B, 2, T), ``extract`` (B, 2), ``targets`` (B, 2, T) (the two orderings);
- multiple choice: ``input_ids`` (B, K, T), ``extract`` (B, K), ``targets`` (B, K, T), ``choice_mask`` (B, K),
  K the most choices of a row in the batch; a row with fewer gets all-padding dummy sequences, masked False;
- ``labels`` (B,) long (class, choice index) or float (regression), absent for unlabeled splits;
  ``index`` (B,) long.
``extract`` is the position of the extract token; ``targets`` are next-token targets, ``IGNORE_INDEX`` where not
scored: every real token after the first is predicted (delimiter and extract included), as the original's
``M[:, 1:]``; a dummy choice has none.

Encoded splits are cached in ``<cache_dir>/tasks/<key>.npz`` (``prepare_data``; ``setup`` reads them on every
rank), key: the split's files (paths, sizes, mtimes) or hub fingerprint, its slice, the tokenizer and the task's
columns and labels: a rerun neither reads local files again nor encodes anything.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import datasets
import lightning as L
import numpy as np
import torch
from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from gpt1.data.loader import DeferredDataLoader, warn_if_order_changed, world_size
from gpt1.data.sources import (
    Quoting, file_columns, file_format, files_key, load_files, load_hub, read_error, resolve_files, row_location,
    tsv_rows_unquoted,
)
from gpt1.errors import ConfigError, DataError
from gpt1.io import atomic_file

if TYPE_CHECKING:
    from gpt1.tokenizer import Tokenizer

log = logging.getLogger(__name__)

ROLES = ("train", "validation", "test")
"""What a task's splits are for: training, validation (model selection, val/ metrics), test (test/ metrics when
labelled, predictions)."""
TASK_SPECIAL_TOKENS = ("start", "delimiter", "extract")
"""The special tokens (``gpt1.tokenizer.SPECIAL_TOKENS`` roles) the transformations insert: add them to the
tokenizer (``Tokenizer.add_special_tokens``) and grow the model's embeddings before fine-tuning."""
METRICS = ("accuracy", "f1", "mcc", "pearson", "spearman")
"""The metrics a task may report: classification (accuracy, f1, mcc) and regression (pearson, spearman)."""
PAD_ID = 0
"""Id that right-pads batches (never scored, never read by a head)."""
IGNORE_INDEX = -100
"""Target of positions that are not scored (``gpt1.module.IGNORE_INDEX``, cross-entropy's ignore_index)."""
CACHE_VERSION = 1  # part of every cache key: bump when the encoded layout changes


class TaskType(str, Enum):
    """The paper's four input transformations."""

    classification = "classification"  # one text
    entailment = "entailment"  # an ordered pair: premise, hypothesis
    similarity = "similarity"  # an unordered pair: both orderings, added before the head
    multiple_choice = "multiple_choice"  # a context and K choices, a score per choice

    def __str__(self) -> str:
        return self.value


class Truncation(str, Enum):
    """How a too-long example is cut to the context (module docstring)."""

    original = "original"  # each text to its share of n_ctx, as the original code
    longest_first = "longest_first"  # the longer text first, only as much as needed

    def __str__(self) -> str:
        return self.value


@dataclass
class ZeroshotConfig:
    """The task's zero-shot heuristic (paper section 5; ``gpt1 zeroshot``)."""

    heuristic: Optional[str] = None
    """verbalizer (SST-2 style), mean_logprob (CoLA style) or multiple_choice (RACE, Story Cloze); None: the type's
    default (multiple_choice for multiple-choice tasks, else none)."""
    suffix: str = "very"
    """verbalizer: the text appended to each input before the label word."""
    words: list[str] = field(default_factory=list)
    """verbalizer: one word per class, in class order (e.g. [negative, positive])."""
    max_fit_examples: int = 2000
    """mean_logprob: at most this many training examples fit the threshold."""


@dataclass
class TaskConfig:
    """A supervised task: where its data is, which columns hold what, and how it is scored (``conf/task/*.yaml``)."""

    name: Optional[str] = None
    """The task's name in logs and metrics.json (None: the task group's choice, e.g. sst2)."""
    type: TaskType = MISSING
    """classification | entailment | similarity | multiple_choice: the input transformation and head."""
    data_files: Optional[dict[str, Any]] = None
    """Local files per split name: a glob or a list of globs of .jsonl/.json, .csv, .tsv or .parquet files (by
    extension), e.g. {train: data/train.tsv, validation: data/dev.tsv}. Set this or dataset."""
    quoting: Quoting = Quoting.minimal
    """.csv/.tsv data_files: minimal, a field that starts with a double quote is quoted (RFC 4180, as Python's csv
    module and pandas write files); none, every quote is text, as in GLUE's and SNLI's .tsv files, whose sentences
    may start with one (read as quoted, such a field swallows the tabs and lines up to the next quote)."""
    dataset: Optional[str] = None
    """A Hugging Face hub dataset (e.g. nyu-mll/glue), downloaded once into the cache. Set this or data_files."""
    dataset_config: Optional[str] = None
    """The hub dataset's configuration (e.g. rte)."""
    data_dir: Optional[str] = None
    """The files of a hub dataset that must be obtained by hand (Story Cloze)."""
    splits: dict[str, Any] = field(default_factory=dict)
    """Role (train, validation, test) -> split name, or a list of names for several splits of one role (MNLI:
    validation: [validation_matched, validation_mismatched]); name[a:b] slices (ints or percentages), e.g.
    ++task.splits.train='train[:1000]' on the command line (++: the key may be new); a role set to null is not used.
    A role left out reads the split of its own name (with data_files: if it has one)."""
    text: Any = MISSING
    """The column of the text (classification), premise or first text (pairs), or context (multiple choice); a
    list of columns is joined with a space, empty ones skipped, e.g. [article, question]."""
    text_pair: Any = None
    """entailment, similarity: the column (or columns) of the second text."""
    choices: Any = None
    """multiple_choice: the columns of the choices in order, or one column holding a list of choices per row.
    Rows may have fewer choices than others (null trailing choice columns, shorter lists): they are masked."""
    label: str = "label"
    """The column of the label: a class (int, or a string/letter listed in label_names), a choice index or
    label_names entry (multiple choice), or a float score (num_labels 1). -1, null, "" mean "no gold label"."""
    label_names: Optional[list[str]] = None
    """The classes (or choice labels, e.g. [A, B, C, D]) in order; a label equal to one of them (as text) maps to
    its position. None: a ClassLabel column's names, if any."""
    num_labels: Optional[int] = None
    """Classes of the head; 1 = regression (scores, MSE loss). None: len(label_names), else the largest label in
    the data + 1. Multiple choice: the most choices of any row (set by the data)."""
    metrics: list[str] = field(default_factory=lambda: ["accuracy"])
    """What is reported, the first being the main metric (sweeps, model selection): accuracy, f1 (binary, of
    class 1), mcc (Matthews), pearson, spearman (regression)."""
    truncation: Truncation = Truncation.original
    """original: each text cut to its share of n_ctx, keeping its beginning, as the original code; longest_first:
    only what does not fit, from the longer text. Truncated examples are counted and reported."""
    zeroshot: ZeroshotConfig = field(default_factory=ZeroshotConfig)
    """The zero-shot heuristic of ``gpt1 zeroshot``."""

    def __post_init__(self) -> None:
        self.type = _enum(TaskType, self.type, "task.type")
        self.truncation = _enum(Truncation, self.truncation, "task.truncation")
        self.quoting = _enum(Quoting, self.quoting, "task.quoting")
        if (self.data_files is None) == (self.dataset is None):
            raise ConfigError(
                "task.data_files and task.dataset are both set: use one"
                if self.dataset is not None
                else "the task has no data: set task.data_files (local files) or task.dataset (a hub dataset)"
            )
        for key, globs in (self.data_files or {}).items():
            globs = [globs] if isinstance(globs, str) else globs
            if not isinstance(globs, Sequence) or not globs or not all(isinstance(g, str) for g in globs):
                raise ConfigError(f"task.data_files.{key}={globs!r}: give a glob or a list of globs")
        _columns(self.text, "task.text")
        pair, mc = self.type in (TaskType.entailment, TaskType.similarity), self.type == TaskType.multiple_choice
        if pair != (self.text_pair is not None):
            raise ConfigError(
                f"task.text_pair: a {self.type} task needs it (the column of the second text)"
                if pair
                else f"task.text_pair is set, but a {self.type} task has one text: use type entailment or similarity"
            )
        if mc != (self.choices is not None):
            raise ConfigError(
                "task.choices: a multiple_choice task needs it (the choice columns, or one list-valued column)"
                if mc
                else f"task.choices is set, but a {self.type} task has no choices: use type multiple_choice"
            )
        if pair:
            _columns(self.text_pair, "task.text_pair")
        if mc:
            _columns(self.choices, "task.choices")
        if self.num_labels is not None and self.num_labels < 1:
            raise ConfigError(f"task.num_labels={self.num_labels}: give 1 (regression) or the number of classes")
        if self.regression and (mc or self.label_names):
            raise ConfigError("task.num_labels=1 (regression) suits classification, entailment and similarity tasks "
                              "without label_names")
        if self.label_names is not None and self.num_labels is not None and len(self.label_names) != self.num_labels:
            raise ConfigError(f"task.label_names has {len(self.label_names)} names but task.num_labels is "
                              f"{self.num_labels}")
        unknown = [m for m in self.metrics if m not in METRICS]
        if unknown or not self.metrics:
            raise ConfigError(f"task.metrics={list(self.metrics)}: choose among {list(METRICS)}")
        wrong = [m for m in self.metrics if (m in ("pearson", "spearman")) != self.regression]
        if wrong:
            kind = "regression (num_labels 1)" if self.regression else "classification"
            raise ConfigError(f"task.metrics {wrong} do not suit a {kind} task: "
                              f"use {['pearson', 'spearman'] if self.regression else ['accuracy', 'f1', 'mcc']}")
        split_specs(self)  # validates splits against data_files

    @property
    def regression(self) -> bool:
        """Whether labels are scores (num_labels 1)."""
        return self.num_labels == 1


def task_from_dict(spec: Mapping[str, Any] | DictConfig | TaskConfig) -> TaskConfig:
    """A ``TaskConfig`` from a plain dict (e.g. a checkpoint's task) or an OmegaConf node, validated."""
    if isinstance(spec, TaskConfig):
        return spec
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TaskConfig), spec))
    except OmegaConfBaseException as e:
        raise ConfigError(f"task: {str(e).splitlines()[0]}") from e


def task_to_dict(task: TaskConfig) -> dict[str, Any]:
    """``task`` as a plain dict of builtins (enums as their names), e.g. for a checkpoint."""
    return OmegaConf.to_container(OmegaConf.structured(task), enum_to_str=True)


@dataclass(frozen=True)
class SplitSpec:
    """One split a task reads: its id (the role, or the split name when a role has several), role, and source."""

    id: str
    role: str
    name: str
    """The hub split or the key of task.data_files."""
    start: Optional[str] = None
    """Slice bounds as written (int or percentage; None: open)."""
    stop: Optional[str] = None

    def bounds(self, n: int) -> tuple[int, int]:
        """[start, stop) of this split's rows among the ``n`` of its source."""
        start, stop, _ = slice(_bound(self.start, n), _bound(self.stop, n)).indices(n)
        return start, max(start, stop)


_SPLIT = re.compile(r"(?P<name>[^\[\]]+?)\s*(?:\[\s*(?P<start>-?\d+%?)?\s*:\s*(?P<stop>-?\d+%?)?\s*\])?")


def split_specs(task: TaskConfig) -> list[SplitSpec]:
    """The splits ``task`` reads, in role order (train, validation, test) then listed order; ConfigError naming the
    key for an unknown role, a split missing from data_files, a data_files key no role uses, or a repeated id."""
    files = task.data_files
    defaults = {role: role for role in ROLES if files is None or role in files}
    mapping = {**defaults, **(task.splits or {})}
    specs: list[SplitSpec] = []
    for role in mapping:
        if role not in ROLES:
            raise ConfigError(f"task.splits.{role}: unknown role; the roles are {', '.join(ROLES)}")
    for role in ROLES:
        value = mapping.get(role)
        names = [] if value is None else [value] if isinstance(value, str) else list(value)
        for written in names:
            m = _SPLIT.fullmatch(str(written).strip())
            if m is None:
                raise ConfigError(f"task.splits.{role}={written!r}: give a split name, optionally sliced: name[a:b]")
            if files is not None and m["name"] not in files:
                raise ConfigError(f"task.splits.{role}: {m['name']!r} is not a key of task.data_files "
                                  f"({', '.join(files)})")
            sid = role if len(names) == 1 else re.sub(r"\W+", "_", str(written)).strip("_")
            specs.append(SplitSpec(sid, role, m["name"], m["start"], m["stop"]))
    ids = [s.id for s in specs]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"task.splits lists a split twice: {ids}")
    unused = [key for key in files or {} if key not in {s.name for s in specs}]
    if unused:
        raise ConfigError(f"task.data_files.{unused[0]} is not used: the roles are {', '.join(ROLES)} "
                          "(name the files after them, or map them with task.splits)")
    return specs


# -- reading: rows -> labelled examples ----------------------------------------------------------------------


@dataclass
class Examples:
    """One split's examples as text, rows without a gold label dropped (N rows kept)."""

    text: list[str]
    """(N,) the text, premise or context."""
    pair: Optional[list[str]]
    """(N,) the second text (entailment, similarity)."""
    choices: Optional[list[list[str]]]
    """(N, K_i) each row's choices (multiple choice)."""
    labels: Optional[np.ndarray]
    """(N,) int64 class or choice index, or float32 score; None: an unlabeled split."""
    index: np.ndarray
    """(N,) int64: each example's row in its split."""
    rows: int
    """Rows read, before dropping."""
    label_names: Optional[list[str]]
    """The class names of the source's ClassLabel label column, if any."""

    @property
    def dropped(self) -> int:
        """Rows dropped for want of a gold label."""
        return self.rows - len(self.index)


class _Source:
    """Where one split's rows come from: local files (columns checked from the headers) or a hub split."""

    def __init__(self, task: TaskConfig, spec: SplitSpec, cache_dir: Optional[Path]) -> None:
        self.task, self.spec, self.cache_dir, self.quoting = task, spec, cache_dir, str(task.quoting)
        self.columns = [*_columns(task.text), *_columns(task.text_pair), *_columns(task.choices)]
        self.files: Optional[list[Path]] = None
        self._hub: Optional[datasets.Dataset] = None
        if task.data_files is not None:
            globs = task.data_files[spec.name]
            try:
                self.files = resolve_files([globs] if isinstance(globs, str) else list(globs),
                                           f"task.data_files.{spec.name}")
            except FileNotFoundError as e:
                raise DataError(str(e)) from e
            self.where = str(self.files[0]) if len(self.files) == 1 else f"task.data_files.{spec.name}"
            self.has_label = self._check_files()
        else:
            self.where = f"{task.dataset} ({task.dataset_config}) split {spec.name}"
            self._hub = self._load_hub()
            self.has_label = self._check(self.where, self._hub.column_names)

    def _check(self, where: str, have: Sequence[str]) -> bool:
        """Raise for a missing text/choice column, or a missing label column outside a test split; return whether
        the label column is there."""
        t = self.task
        for key, value in (("text", t.text), ("text_pair", t.text_pair), ("choices", t.choices)):
            missing = [c for c in _columns(value) if c not in have]
            if missing:
                raise DataError(f"{where}: no column {missing[0]!r} (task.{key}); its columns are {list(have)}")
        if t.label in have:
            return True
        if self.spec.role != "test":
            raise DataError(f"{where}: no label column {t.label!r} (task.label); its columns are {list(have)}")
        return False

    def _check_files(self) -> bool:
        labelled = []
        for path in self.files:
            if path.stat().st_size == 0:
                raise DataError(f"{path} is empty (task.data_files.{self.spec.name})")
            try:
                file_format(path)
            except ValueError as e:  # an unknown extension
                raise DataError(str(e)) from e
            try:
                have = file_columns(path, self.quoting)
            except ValueError as e:  # a first JSON record that does not parse, invalid UTF-8
                raise DataError(read_error([path], e, self.quoting)) from e
            labelled.append(self._check(str(path), have))
        if any(labelled) and not all(labelled):
            without = [str(p) for p, has in zip(self.files, labelled, strict=True) if not has]
            raise DataError(f"{without[0]} has no label column {self.task.label!r} but other files of "
                            f"task.data_files.{self.spec.name} do: label all of them or none")
        return all(labelled)

    def _load_hub(self) -> datasets.Dataset:
        t = self.task
        try:
            return load_hub(t.dataset, t.dataset_config, self.spec.name, cache_dir=self._datasets_cache(),
                            data_dir=t.data_dir)
        except (ValueError, OSError, RuntimeError, datasets.exceptions.DatasetNotFoundError) as e:  # as datasets says
            detail = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise DataError(f"task.splits.{self.spec.role}: cannot load {self.where}: {detail}") from e

    def _datasets_cache(self) -> Optional[str]:
        return None if self.cache_dir is None else str(self.cache_dir / "datasets")

    @property
    def key(self) -> str:
        """Changes whenever the split's rows may: the files (paths, sizes, mtimes) and quoting, or the hub
        fingerprint."""
        origin = files_key(self.files, self.quoting) if self.files is not None else self._hub._fingerprint
        return _hash(origin, self.spec.name, self.spec.start, self.spec.stop)

    def rows(self) -> tuple[datasets.Dataset, int]:
        """The split's rows in the needed columns, sliced, and the position of the first in the whole split."""
        columns = self.columns + ([self.task.label] if self.has_label else [])
        if self.files is not None:
            try:
                ds = load_files(self.files, columns, self._datasets_cache(), quoting=self.quoting)
            except (datasets.exceptions.DatasetGenerationError, UnicodeDecodeError) as e:
                raise DataError(read_error(self.files, e, self.quoting)) from e
            self._warn_if_quotes_swallowed_rows(len(ds))
        else:
            ds = self._hub.select_columns(columns)
        start, stop = self.spec.bounds(len(ds))
        return (ds if (start, stop) == (0, len(ds)) else ds.select(range(start, stop))), start

    def _warn_if_quotes_swallowed_rows(self, rows: int) -> None:
        """.tsv files read with quoting minimal into fewer rows than their lines, each of the header's number of
        fields, give: a field that starts with a quote ran, as quoted, to the next quote (GLUE's files)."""
        if self.quoting != Quoting.minimal or not all(file_format(p) == "tsv" for p in self.files):
            return
        lines = [tsv_rows_unquoted(p) for p in self.files]
        if None not in lines and sum(lines) > rows:
            log.warning("%s: %d rows read from %d lines: a field that starts with a double quote was read as quoted "
                        "(task.quoting=minimal), up to the next quote, across tabs and lines; if the quotes are "
                        "text, as in GLUE's .tsv files, set task.quoting=none", self.where, rows, sum(lines))

    def read(self) -> Examples:
        """The split's examples: texts joined, choices gathered, labels mapped, rows without a label dropped."""
        ds, start = self.rows()
        cols = ds.to_dict()
        n, t, where = len(ds), self.task, self.where
        index = np.arange(start, start + n, dtype=np.int64)
        text = _texts(cols, _columns(t.text), where, index)
        pair = _texts(cols, _columns(t.text_pair), where, index) if t.text_pair is not None else None
        choices = _choices(cols, _columns(t.choices), where, index) if t.choices is not None else None
        feature = ds.features.get(t.label)
        source_names = list(feature.names) if isinstance(feature, datasets.ClassLabel) else None
        if not self.has_label:
            return Examples(text, pair, choices, None, index, n, source_names)
        spec = self.spec
        if n == 0 and spec.role != "test":
            sliced = f" (task.splits.{spec.role}: {spec.name}[{spec.start or ''}:{spec.stop or ''}])"
            raise DataError(f"{where}: the {spec.role} split has no rows"
                            f"{sliced if spec.start or spec.stop else ''}: give it examples")
        labels = _labels(cols[t.label], t, t.label_names or source_names, choices, where, index)
        keep = ~np.isnan(labels) if t.regression else labels >= 0
        if not keep.any():
            if self.spec.role != "test":
                raise DataError(f"{where}: no row has a label in column {t.label!r} (task.label); "
                                f"the {self.spec.role} split needs labels")
            return Examples(text, pair, choices, None, index, n, source_names)
        if not keep.all():
            rows = np.flatnonzero(keep).tolist()
            text = [text[i] for i in rows]
            pair = None if pair is None else [pair[i] for i in rows]
            choices = None if choices is None else [choices[i] for i in rows]
        return Examples(text, pair, choices, labels[keep], index[keep], n, source_names)


def _texts(cols: dict[str, list], columns: list[str], where: str, index: np.ndarray) -> list[str]:
    """Each row's text: its columns' values joined with a space, empty ones skipped."""
    parts = [[_text(v, where, int(index[r]), c) for r, v in enumerate(cols[c])] for c in columns]
    return parts[0] if len(parts) == 1 else [" ".join(p for p in row if p) for row in zip(*parts, strict=True)]


def _text(value: Any, where: str, row: int, column: str) -> str:
    if isinstance(value, str):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):  # an empty cell
        return ""
    if isinstance(value, (list, dict)):
        raise DataError(f"{row_location(where, row)}: column {column!r} holds a {type(value).__name__}, not a text")
    return str(value)


def _choices(cols: dict[str, list], columns: list[str], where: str, index: np.ndarray) -> list[list[str]]:
    """Each row's choices: from one list-valued column, or from several columns (trailing nulls: fewer choices)."""
    listed = len(columns) == 1 and any(isinstance(v, (list, tuple)) for v in cols[columns[0]] if v is not None)
    out = []
    for r, values in enumerate(zip(*(cols[c] for c in columns), strict=True)):
        row = int(index[r])
        if listed:
            values = values[0] or []
            if any(v is None for v in values):
                raise DataError(f"{row_location(where, row)}: a choice in column {columns[0]!r} is null")
            names = [columns[0]] * len(values)
        else:
            present = [v is not None for v in values]
            k = present.index(False) if False in present else len(values)
            if any(present[k:]):
                raise DataError(f"{row_location(where, row)}: choice column {columns[k]!r} is empty but a later one "
                                "is not (only the last choices of a row may be missing)")
            values, names = values[:k], columns[:k]
        if not values:
            raise DataError(f"{row_location(where, row)}: no choices in {columns} (task.choices)")
        out.append([_text(v, where, row, c) for v, c in zip(values, names, strict=True)])
    if len(columns) == 1 and not listed and out:
        raise DataError(f"{where}: task.choices is one column {columns[0]!r} of single texts: give several choice "
                        "columns, or one column holding a list of choices per row")
    return out


def _labels(
    values: list, task: TaskConfig, names: Optional[list[str]], choices: Optional[list[list[str]]], where: str,
    index: np.ndarray,
) -> np.ndarray:
    """(N,) labels: float32 scores (NaN: none) for regression, else int64 class / choice indices (-1: none)."""
    column = task.label
    if task.regression:
        out = np.empty(len(values), dtype=np.float32)
        for r, v in enumerate(values):
            if _no_label(v):
                out[r] = np.nan
                continue
            try:
                out[r] = float(v)
            except (TypeError, ValueError):
                raise DataError(f"{row_location(where, index[r], task.quoting)}: label {v!r} in column {column!r} "
                                "is not a number (task.num_labels is 1: regression)") from None
        return out
    lookup = {str(n): i for i, n in enumerate(names or [])}
    out = np.empty(len(values), dtype=np.int64)
    for r, v in enumerate(values):
        if _no_label(v):
            out[r] = -1
            continue
        if isinstance(v, float) and v.is_integer():
            v = int(v)
        if str(v) in lookup:
            out[r] = lookup[str(v)]
        elif isinstance(v, (int, np.integer)) and v >= 0 and (names is None or v < len(names)):
            out[r] = v
        elif names is not None:
            raise DataError(f"{row_location(where, index[r], task.quoting)}: label {v!r} in column {column!r} "
                            f"is not one of task.label_names {list(names)}")
        else:
            raise DataError(f"{row_location(where, index[r], task.quoting)}: label {v!r} in column {column!r} "
                            "is not a class index (0, 1, ...): list the labels in task.label_names, or set "
                            "task.num_labels: 1 for scores")
        if choices is not None and out[r] >= len(choices[r]):
            raise DataError(f"{row_location(where, index[r], task.quoting)}: label {v!r} picks choice {out[r]} "
                            f"but the row has {len(choices[r])} choices")
    return out


def _no_label(v: Any) -> bool:
    """-1, null, "" or NaN: no gold label."""
    if v is None:
        return True
    if isinstance(v, str):
        return v.strip() in ("", "-1")
    return isinstance(v, (int, float, np.number)) and not isinstance(v, bool) and (v == -1 or math.isnan(v))


# -- encoding: examples -> token ids ----------------------------------------------------------------------------


@dataclass
class Ragged:
    """Variable-length id sequences stored flat: sequence i is ``values[offsets[i]:offsets[i + 1]]``."""

    values: np.ndarray
    """(total,) int32 ids."""
    offsets: np.ndarray
    """(n + 1,) int64."""

    @classmethod
    def of(cls, seqs: Sequence[Sequence[int]]) -> Ragged:
        lengths = np.fromiter(map(len, seqs), dtype=np.int64, count=len(seqs))
        offsets = np.zeros(len(seqs) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        values = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32, count=int(offsets[-1]))
        return cls(values, offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i: int) -> np.ndarray:
        return self.values[self.offsets[i] : self.offsets[i + 1]]

    @property
    def lengths(self) -> np.ndarray:
        """(n,) int64."""
        return np.diff(self.offsets)


@dataclass
class EncodedSplit:
    """One split's examples as token ids, without special tokens (those come with the transformation)."""

    text: Ragged
    """(N, ·) the text, premise or context."""
    pair: Optional[Ragged]
    """(N, ·) the second text (entailment, similarity)."""
    choices: Optional[Ragged]
    """(sum K_i, ·) every row's choices in turn: row i's are choices[choice_offsets[i]:choice_offsets[i + 1]]."""
    choice_offsets: Optional[np.ndarray]
    """(N + 1,) int64 (multiple choice)."""
    labels: Optional[np.ndarray]
    """(N,) int64 or float32; None: unlabeled."""
    index: np.ndarray
    """(N,) int64 rows in the split."""
    rows: int
    """Rows read, before dropping those without a label."""
    label_names: Optional[list[str]]
    """The source's ClassLabel names, if any."""

    def __len__(self) -> int:
        return len(self.index)

    @property
    def dropped(self) -> int:
        return self.rows - len(self.index)

    def choice_counts(self) -> np.ndarray:
        """(N,) choices per row (multiple choice)."""
        return np.diff(self.choice_offsets)

    @classmethod
    def encode(cls, ex: Examples, tokenizer: Tokenizer) -> EncodedSplit:
        choices = offsets = None
        if ex.choices is not None:
            choices = Ragged.of(tokenizer.encode_batch([c for row in ex.choices for c in row]))
            offsets = np.zeros(len(ex.choices) + 1, dtype=np.int64)
            np.cumsum([len(row) for row in ex.choices], out=offsets[1:])
        pair = Ragged.of(tokenizer.encode_batch(ex.pair)) if ex.pair is not None else None
        text = Ragged.of(tokenizer.encode_batch(ex.text))
        return cls(text, pair, choices, offsets, ex.labels, ex.index, ex.rows, ex.label_names)

    def save(self, path: Path) -> None:
        arrays: dict[str, np.ndarray] = {"index": self.index}
        for name in ("text", "pair", "choices"):
            part = getattr(self, name)
            if part is not None:
                arrays[f"{name}.values"], arrays[f"{name}.offsets"] = part.values, part.offsets
        if self.choice_offsets is not None:
            arrays["choice_offsets"] = self.choice_offsets
        if self.labels is not None:
            arrays["labels"] = self.labels
        arrays["meta"] = np.array(json.dumps({"rows": self.rows, "label_names": self.label_names}))
        with atomic_file(path) as f:
            np.savez(f, **arrays)

    @classmethod
    def load(cls, path: Path) -> EncodedSplit:
        with np.load(path, allow_pickle=False) as z:
            a = {k: z[k] for k in z.files}
        meta = json.loads(str(a["meta"]))
        part = {n: Ragged(a[f"{n}.values"], a[f"{n}.offsets"]) if f"{n}.values" in a else None
                for n in ("text", "pair", "choices")}
        return cls(part["text"], part["pair"], part["choices"], a.get("choice_offsets"), a.get("labels"), a["index"],
                   meta["rows"], meta["label_names"])


def kept_lengths(a: Any, b: Any, n_ctx: int, truncation: Truncation) -> tuple[Any, Any]:
    """How many tokens of a pair's texts (lengths ``a``, ``b``: ints or arrays) fit ``n_ctx`` with the three special
    tokens, under ``truncation``; each text keeps its beginning."""
    budget = n_ctx - 3
    if truncation == Truncation.original:
        return np.minimum(a, budget // 2), np.minimum(b, budget // 2)
    ka = np.minimum(a, np.maximum(budget - b, (budget + 1) // 2))  # the shorter text whole if it fits in half
    return ka, np.minimum(b, budget - ka)


# -- datasets, batches, sampling ----------------------------------------------------------------------------------


class TaskDataset(Dataset):
    """A split's examples, transformed: item i = ``{"sequences": [(T_k,) int64 per sequence], "index", "label"}``
    (one sequence for classification/entailment, two for similarity, one per choice for multiple choice)."""

    def __init__(self, split: EncodedSplit, task_type: TaskType, specials: tuple[int, int, int], n_ctx: int,
                 truncation: Truncation) -> None:
        self.split, self.type, self.n_ctx, self.truncation = split, task_type, n_ctx, truncation
        self.start, self.delimiter, self.extract = specials

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int) -> dict[str, Any]:
        s = self.split
        a = s.text[i]
        if self.type == TaskType.classification:
            seqs = [self._sequence(a)]
        elif self.type == TaskType.entailment:
            seqs = [self._sequence(a, s.pair[i])]
        elif self.type == TaskType.similarity:
            b = s.pair[i]
            seqs = [self._sequence(a, b), self._sequence(b, a)]
        else:
            seqs = [self._sequence(a, s.choices[k]) for k in range(s.choice_offsets[i], s.choice_offsets[i + 1])]
        item = {"sequences": seqs, "index": int(s.index[i])}
        if s.labels is not None:
            item["label"] = s.labels[i].item()
        return item

    def lengths(self) -> np.ndarray:
        """(N,) tokens of each example's longest sequence, before the special tokens and the cut to n_ctx."""
        s = self.split
        n = s.text.lengths
        if s.pair is not None:
            n = n + s.pair.lengths
        if s.choices is not None:
            n = n + np.maximum.reduceat(s.choices.lengths, s.choice_offsets[:-1])
        return n

    def _sequence(self, a: np.ndarray, b: Optional[np.ndarray] = None) -> np.ndarray:
        """``S a X`` or ``S a D b X``, the texts cut to fit n_ctx."""
        if b is None:
            return np.concatenate([[self.start], a[: self.n_ctx - 2], [self.extract]]).astype(np.int64)
        ka, kb = kept_lengths(len(a), len(b), self.n_ctx, self.truncation)
        return np.concatenate([[self.start], a[:ka], [self.delimiter], b[:kb], [self.extract]]).astype(np.int64)


class Collate:
    """Items of a ``TaskDataset`` -> a batch (module docstring): right-padded to the longest sequence, dummy
    sequences for rows with fewer choices."""

    def __init__(self, task_type: TaskType, regression: bool) -> None:
        self.type, self.regression = task_type, regression

    def __call__(self, items: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        B = len(items)
        K = max(len(it["sequences"]) for it in items)
        T = max(len(s) for it in items for s in it["sequences"])
        input_ids = torch.full((B, K, T), PAD_ID, dtype=torch.long)
        targets = torch.full((B, K, T), IGNORE_INDEX, dtype=torch.long)
        extract = torch.zeros(B, K, dtype=torch.long)
        mask = torch.zeros(B, K, dtype=torch.bool)
        for b, it in enumerate(items):
            for k, seq in enumerate(it["sequences"]):
                ids, n = torch.from_numpy(seq), len(seq)
                input_ids[b, k, :n] = ids
                targets[b, k, : n - 1] = ids[1:]  # position t predicts token t + 1
                extract[b, k] = n - 1
                mask[b, k] = True
        if self.type in (TaskType.classification, TaskType.entailment):
            batch = {"input_ids": input_ids[:, 0], "extract": extract[:, 0], "targets": targets[:, 0]}
        else:
            batch = {"input_ids": input_ids, "extract": extract, "targets": targets}
            if self.type == TaskType.multiple_choice:
                batch["choice_mask"] = mask
        if "label" in items[0]:
            batch["labels"] = torch.tensor([it["label"] for it in items],
                                           dtype=torch.float32 if self.regression else torch.long)
        batch["index"] = torch.tensor([it["index"] for it in items], dtype=torch.long)
        return batch


def real_tokens(batch: Mapping[str, torch.Tensor]) -> int:
    """Tokens of a batch that are not padding: each sequence of a task batch up to its extract token (a dummy
    choice none); every token of a pre-training batch (no ``extract``: its windows are never padded)."""
    if "extract" not in batch:
        return batch["input_ids"].numel()
    lengths = batch["extract"] + 1  # (B,) or (B, K)
    if "choice_mask" in batch:
        lengths = lengths * batch["choice_mask"]
    return int(lengths.sum())


class LongestFirst(Sampler[int]):
    """Evaluation's order: the longest examples first, so that a batch's sequences have similar lengths and little
    padding (and a batch too large for memory fails first). Metrics do not depend on the order; predictions are
    written in index order."""

    def __init__(self, lengths: np.ndarray) -> None:
        self.order = np.argsort(-lengths, kind="stable").tolist()

    def __iter__(self) -> Iterator[int]:
        return iter(self.order)

    def __len__(self) -> int:
        return len(self.order)


class EpochSampler(DistributedSampler):
    """A seeded shuffle of the training examples per epoch (a function of seed and epoch only), this rank's share of
    it, without the draws ``consumed()`` says this epoch has already trained on (a resumed run's).

    ``consumed`` is called when iteration starts, not when the sampler is built: Lightning may build the train
    loader (e.g. for ``estimated_stepping_batches``) before it restores a checkpoint's counters. Its length stays
    the whole epoch's share, so those counters stay right. Being a ``DistributedSampler``, Lightning uses it as is
    under DDP (it wraps only other samplers).
    """

    def __init__(
        self, n: int, seed: int, epoch: int = 0, consumed: Callable[[], int] = lambda: 0, num_replicas: int = 1,
        rank: int = 0,
    ) -> None:
        super().__init__(range(n), num_replicas=num_replicas, rank=rank, shuffle=True, seed=seed)
        self.epoch, self.consumed = epoch, consumed

    def __iter__(self) -> Iterator[int]:
        return itertools.islice(super().__iter__(), self.consumed(), None)


ORDER_KEYS = {"seed": "seed", "batch_size": "examples per device and pass (micro_batch_size)",
              "world_size": "processes (devices x nodes)", "train_examples": "training examples"}
"""The settings that fix the order of the training examples, and how a resume's warning names them."""


class TaskDataModule(L.LightningDataModule):
    """A task's splits, transformed and batched (module docstring).

    task: a ``TaskConfig`` (or a dict / OmegaConf node of one). tokenizer: a ``gpt1.tokenizer.Tokenizer`` holding
    ``TASK_SPECIAL_TOKENS`` (needed from ``setup``; ``read`` needs none). n_ctx: the model's context. batch_size:
    training examples per batch per device; eval_batch_size: evaluation's (None: batch_size). seed: the training
    order. cache_dir: the datasets cache and the encoded splits (None: no cache). roles: which roles to load
    (None: all the task has; e.g. ("validation", "test") to evaluate).
    """

    def __init__(
        self,
        task: TaskConfig | Mapping[str, Any] | DictConfig,
        tokenizer: Tokenizer,
        n_ctx: int,
        batch_size: int,
        seed: int,
        cache_dir: str | os.PathLike | None,
        num_workers: int = 0,
        eval_batch_size: Optional[int] = None,
        roles: Optional[Sequence[str]] = None,
    ) -> None:
        super().__init__()
        self.task = task_from_dict(task)
        if n_ctx < 5:
            raise ConfigError(f"model.n_ctx={n_ctx}: a task example needs at least 5 tokens (3 special, 1 per text)")
        self.tokenizer, self.n_ctx, self.seed = tokenizer, n_ctx, seed
        self.batch_size, self.eval_batch_size, self.num_workers = batch_size, eval_batch_size or batch_size, num_workers
        self.cache_dir = None if cache_dir is None else Path(cache_dir)
        specs = split_specs(self.task)
        unknown = [r for r in roles or () if r not in ROLES]
        if unknown:
            raise ValueError(f"unknown roles {unknown}: choose among {ROLES}")
        self.specs: dict[str, SplitSpec] = {s.id: s for s in specs if roles is None or s.role in roles}
        """Split id -> the split, in role order."""
        self.roles: dict[str, list[str]] = {r: [s.id for s in self.specs.values() if s.role == r] for r in ROLES}
        """Role -> the ids of its splits, in order (the order of the val/test/predict dataloaders)."""
        self.name = self.task.name or "task"
        self.num_labels: Optional[int] = None
        """Classes (1: regression; multiple choice: the most choices of a row); set by ``setup``."""
        self.label_names: Optional[list[str]] = self.task.label_names
        """The classes' names (task.label_names, else a ClassLabel column's), or None; set by ``setup``."""
        self.stats: dict[str, dict[str, int]] = {}
        """Split id -> {"examples", "truncated", "dropped"}; set by ``setup``."""
        self.eval_splits: dict[str, str] = {}
        """Metric prefix -> split id, for every labelled validation and test split: "val" for the first validation
        split, "val_<suffix>" for the others (validation_mismatched -> "val_mismatched"); "test" likewise."""
        self.encoded: dict[str, EncodedSplit] = {}
        """Split id -> its examples as ids; set by ``setup``."""
        self._datasets: dict[str, TaskDataset] = {}
        self._where: dict[str, str] = {}
        self._tokenizer_key: Optional[str] = None

    # -- preparation ------------------------------------------------------------------------------------------

    def prepare_data(self) -> None:
        """Read, check and encode every split into the cache (idempotent; a no-op without a cache_dir)."""
        if self.cache_dir is not None:
            for spec in self.specs.values():
                self._encoded(spec)

    def setup(self, stage: Optional[str] = None) -> None:
        """Load every split (from the cache, else read and encode it), check it, settle the labels, count the
        truncated examples. Idempotent."""
        if self.encoded:
            return
        if stage == "fit":
            for role in ("train", "validation"):
                if not self.roles[role]:
                    raise ConfigError(f"task {self.name} has no {role} split: give task.data_files.{role} "
                                      f"(or map a split to it with task.splits.{role})")
        specials = tuple(self.tokenizer.special_id(role) for role in TASK_SPECIAL_TOKENS)
        encoded = {sid: self._encoded(spec) for sid, spec in self.specs.items()}
        for sid, split in encoded.items():
            role = self.specs[sid].role
            if role != "test" and len(split) == 0:
                raise DataError(f"task {self.name}: the {sid} split has no examples ({self._where[sid]}: "
                                f"{split.rows} rows, {split.dropped} without a label)")
        self._settle_labels(encoded)
        self.encoded = encoded
        self._datasets = {
            sid: TaskDataset(split, self.task.type, specials, self.n_ctx, self.task.truncation)
            for sid, split in encoded.items()
        }
        self.stats = {sid: {"examples": len(split), "truncated": self._truncated(split), "dropped": split.dropped}
                      for sid, split in encoded.items()}
        self.eval_splits = {}
        for role, prefix in (("validation", "val"), ("test", "test")):
            for i, sid in enumerate(self.roles[role]):
                if self.has_labels(sid):
                    suffix = sid[len(role) + 1 :] if sid.startswith(f"{role}_") else sid
                    self.eval_splits[prefix if i == 0 else f"{prefix}_{suffix}"] = sid
        for sid, s in self.stats.items():
            log.info("task %s, %s: %d examples, %d truncated to n_ctx %d (%s), %d dropped without a label%s",
                     self.name, sid, s["examples"], s["truncated"], self.n_ctx, self.task.truncation, s["dropped"],
                     "" if self.has_labels(sid) else ", unlabeled")

    def read(self, split: str) -> Examples:
        """The examples of ``split`` (an id of ``specs``) as text, labels mapped (no tokenizer needed)."""
        spec = self.specs[split]
        return _Source(self.task, spec, self.cache_dir).read()

    def _encoded(self, spec: SplitSpec) -> EncodedSplit:
        """The split from the cache, or read, encoded and cached."""
        src = _Source(self.task, spec, self.cache_dir)
        self._where[spec.id] = src.where
        path = None
        if self.cache_dir is not None:
            t = self.task
            columns = [str(t.type), t.text, t.text_pair, t.choices, t.label, t.label_names, t.regression, src.has_label]
            key = _hash(CACHE_VERSION, src.key, self._tokenizer_hash(), columns)
            path = self.cache_dir / "tasks" / f"{key}.npz"
            if path.is_file():
                return EncodedSplit.load(path)
        split = EncodedSplit.encode(src.read(), self.tokenizer)
        if path is not None:
            split.save(path)
        return split

    def _tokenizer_hash(self) -> str:
        if self._tokenizer_key is None:
            self._tokenizer_key = _hash(self.tokenizer.to_str())
        return self._tokenizer_key

    def _settle_labels(self, encoded: dict[str, EncodedSplit]) -> None:
        """Set num_labels and label_names; check every label against them."""
        t = self.task
        if self.label_names is None:
            self.label_names = next((s.label_names for s in encoded.values() if s.label_names), None)
        labelled = {sid: s for sid, s in encoded.items() if s.labels is not None}
        if t.type == TaskType.multiple_choice:
            self.num_labels = max((int(s.choice_counts().max(initial=0)) for s in encoded.values()), default=0)
            return
        if t.regression:
            self.num_labels = 1
            return
        top = max((int(s.labels.max(initial=-1)) for s in labelled.values()), default=-1)
        self.num_labels = t.num_labels or (len(self.label_names) if self.label_names else max(2, top + 1))
        for sid, s in labelled.items():
            bad = np.flatnonzero(s.labels >= self.num_labels)
            if len(bad):
                source = f"task.num_labels={t.num_labels}" if t.num_labels else f"task.label_names {self.label_names}"
                raise DataError(f"{row_location(self._where[sid], s.index[bad[0]], t.quoting)}: "
                                f"label {s.labels[bad[0]]} is out of range for {self.num_labels} classes ({source})")

    def _truncated(self, split: EncodedSplit) -> int:
        """How many examples of ``split`` lose tokens to the context."""
        if len(split) == 0:
            return 0
        a = split.text.lengths
        if self.task.type == TaskType.classification:
            return int((a > self.n_ctx - 2).sum())
        if self.task.type == TaskType.multiple_choice:
            a, b = np.repeat(a, split.choice_counts()), split.choices.lengths
        else:
            b = split.pair.lengths
        ka, kb = kept_lengths(a, b, self.n_ctx, self.task.truncation)
        cut = (ka < a) | (kb < b)
        if self.task.type == TaskType.multiple_choice:
            cut = np.logical_or.reduceat(cut, split.choice_offsets[:-1])  # any of the row's choices
        return int(cut.sum())

    # -- queries ----------------------------------------------------------------------------------------------

    def has_labels(self, split: str) -> bool:
        """Whether ``split`` has gold labels (metrics) or not (predictions only)."""
        return self.encoded[split].labels is not None

    def train_labels(self) -> np.ndarray:
        """(N,) the training split's labels (int64 classes or float32 scores): the majority / mean baseline."""
        if "train" not in self.encoded:
            raise RuntimeError("no training split: call setup() first, on a task with a train split")
        return self.encoded["train"].labels

    def dataset(self, split: str) -> TaskDataset:
        """The transformed examples of ``split``."""
        return self._datasets[split]

    # -- loaders ----------------------------------------------------------------------------------------------

    def train_dataloader(self) -> DataLoader:
        if "train" not in self._datasets:
            raise RuntimeError("no training split: call setup() first, on a task with a train split")
        ds = self._datasets["train"]
        if self.trainer is None:
            return self._loader(ds, self.batch_size, EpochSampler(len(ds), self.seed))
        trainer = self.trainer
        progress = trainer.fit_loop.epoch_loop.batch_progress.current  # batches of this epoch (restored on resume)
        sampler = EpochSampler(
            len(ds), self.seed, trainer.current_epoch, lambda: progress.processed * self.batch_size,
            trainer.world_size, trainer.global_rank,
        )  # fmt: skip
        return self._loader(ds, self.batch_size, sampler)

    def state_dict(self) -> dict[str, Any]:
        """What fixes the order of the training examples, saved in checkpoints (Lightning's datamodule state):
        ``load_state_dict`` compares a resumed run's with it."""
        train = len(self._datasets["train"]) if "train" in self._datasets else 0
        return {"seed": self.seed, "batch_size": self.batch_size, "world_size": world_size(self),
                "train_examples": train}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """On resume: warn where this run draws its examples otherwise than the checkpoint's run did."""
        warn_if_order_changed(self, state, ORDER_KEYS)

    def val_dataloader(self) -> DataLoader | list[DataLoader]:
        """One loader per validation split (a list when there are several), in ``roles["validation"]`` order."""
        return self._eval_loaders(self.roles["validation"])

    def test_dataloader(self) -> DataLoader | list[DataLoader]:
        """One loader per labelled test split, in ``roles["test"]`` order."""
        return self._eval_loaders([s for s in self.roles["test"] if self.has_labels(s)])

    def predict_dataloader(self) -> DataLoader | list[DataLoader]:
        """One loader per test split, labelled or not, in ``roles["test"]`` order."""
        return self._eval_loaders(self.roles["test"])

    def _eval_loaders(self, splits: list[str]) -> DataLoader | list[DataLoader]:
        loaders = [self._loader(self._datasets[s], self.eval_batch_size, LongestFirst(self._datasets[s].lengths()))
                   for s in splits]  # fmt: skip
        return loaders[0] if len(loaders) == 1 else loaders

    def _loader(self, ds: TaskDataset, batch_size: int, sampler: Optional[Sampler[int]] = None) -> DataLoader:
        return DeferredDataLoader(  # the sampler is asked for its order at the first batch: after a resume restores
            ds,
            batch_size=batch_size,
            sampler=sampler,  # None: in order
            collate_fn=Collate(self.task.type, self.task.regression),
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            pin_memory=torch.cuda.is_available(),
            generator=torch.Generator().manual_seed(self.seed),  # worker seeds never draw from the global RNG
        )


def _columns(value: Any, key: Optional[str] = None) -> list[str]:
    """A column or list of columns as a list; with ``key``, a ConfigError naming it unless it is one or more."""
    columns = [] if value is None else [value] if isinstance(value, str) else list(value)
    if key is not None and (not columns or not all(isinstance(c, str) and c for c in columns)):
        raise ConfigError(f"{key}={value!r}: give a column name or a list of column names")
    return columns


def _enum(kind: type[Enum], value: Any, key: str) -> Enum:
    try:
        return kind(value)
    except ValueError:
        raise ConfigError(f"{key}={value!r}: one of {', '.join(m.value for m in kind)}") from None


def _bound(value: Optional[str], n: int) -> Optional[int]:
    if value is None:
        return None
    return round(n * int(value[:-1]) / 100) if value.endswith("%") else int(value)


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]
