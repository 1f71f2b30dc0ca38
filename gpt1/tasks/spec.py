"""What a task is: its spec (``TaskConfig``, ``conf/task/NAME.yaml``) and the grammar of its splits.

Splits. A task has up to three roles: ``train``, ``validation``, ``test``. ``task.splits`` maps each role to a split
name, or to a list of names (several validation splits, e.g. MNLI's matched and mismatched), of the hub dataset or
of ``task.data_files`` (whose keys are split names); ``name[a:b]`` keeps rows a to b-1 (ints, negative ones from
the end, or percentages: ``validation[:374]``, ``train[:10%]``). A role with one split is known by the role's name
("train", "validation", "test"), a role with several by the split names.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Optional

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from gpt1.core.errors import ConfigError
from gpt1.core.quoting import Quoting
from gpt1.tasks.registry import get_task_type, task_types
from gpt1.tasks.task_type import TaskType, Truncation

ROLES = ("train", "validation", "test")
"""What a task's splits are for: training, validation (model selection, val/ metrics), test (test/ metrics when
labelled, predictions)."""
TASK_SPECIAL_TOKENS = ("start", "delimiter", "extract")
"""The special tokens (``gpt1.text.tokenizer.SPECIAL_TOKENS`` roles) the transformations insert: add them to the
tokenizer (``Tokenizer.add_special_tokens``) and grow the model's embeddings before fine-tuning."""


@dataclass
class ZeroshotConfig:
    """The task's zero-shot heuristic (paper section 5; ``gpt1 zeroshot``)."""

    heuristic: Optional[str] = None
    """verbalizer (SST-2 style), mean_logprob (CoLA style), multiple_choice (RACE, Story Cloze) or winograd (the
    pronoun substituted); None: the type's default (multiple_choice for multiple-choice tasks, winograd for winograd
    tasks, else none)."""
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
    type: str = MISSING
    """classification | entailment | similarity | multiple_choice (``gpt1.tasks``), or a registered type's name: the
    input transformation and head."""
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
    split_seed: Optional[int] = None
    """Slice a split's rows (name[a:b]) in a seeded random order instead of the file's: numpy's
    ``RandomState(split_seed).permutation``, scikit-learn's ``train_test_split(..., random_state=split_seed)``, whose
    second part (test_size=k) is ``name[:k]`` and first ``name[k:]`` (Story Cloze: 3535999445, as the original)."""
    text: Any = MISSING
    """The column of the text (classification), premise or first text (pairs), or context (multiple choice); a
    list of columns is joined with a space, empty ones skipped, e.g. [article, question]."""
    text_pair: Any = None
    """entailment, similarity: the column (or columns) of the second text."""
    choices: Any = None
    """multiple_choice: the columns of the choices in order, or one column holding a list of choices per row.
    Rows may have fewer choices than others (null trailing choice columns, shorter lists): they are masked."""
    pronoun: Optional[str] = None
    """winograd: the column of the pronoun that each candidate (task.choices) replaces."""
    pronoun_loc: Optional[str] = None
    """winograd: the column of the pronoun's character offset in the text (None: its first occurrence as a word, as
    the Definite Pronoun Resolution Dataset says)."""
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
        kind = get_task_type(self.type)
        self.type = kind.name
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
        as_columns(self.text, "task.text")
        if kind.text_pair != (self.text_pair is not None):
            raise ConfigError(
                f"task.text_pair: a {kind} task needs it (the column of the second text)"
                if kind.text_pair
                else f"task.text_pair is set, but a {kind} task has one text: use type entailment or similarity"
            )
        if kind.choices != (self.choices is not None):
            raise ConfigError(
                f"task.choices: a {kind} task needs it (the choice columns, or one list-valued column)"
                if kind.choices
                else f"task.choices is set, but a {kind} task has no choices: use type multiple_choice"
            )
        for key in ("pronoun", "pronoun_loc"):
            if getattr(self, key) is not None and key not in kind.columns:
                raise ConfigError(f"task.{key} is set, but a {kind} task reads no such column: leave it out")
        kind.check(self)
        if kind.text_pair:
            as_columns(self.text_pair, "task.text_pair")
        if kind.choices:
            as_columns(self.choices, "task.choices")
        if self.num_labels is not None and self.num_labels < 1:
            raise ConfigError(f"task.num_labels={self.num_labels}: give 1 (regression) or the number of classes")
        if self.num_labels == 1 and (not kind.can_regress or self.label_names):
            regressors = [name for name, t in task_types().items() if t.can_regress]
            raise ConfigError(f"task.num_labels=1 (regression) suits {', '.join(regressors)} tasks without label_names")
        if self.label_names is not None and self.num_labels is not None and len(self.label_names) != self.num_labels:
            raise ConfigError(
                f"task.label_names has {len(self.label_names)} names but task.num_labels is {self.num_labels}"
            )
        if not self.metrics:
            raise ConfigError("task.metrics is empty: name at least one, the main metric first")
        from gpt1.tasks.metrics import check_metric  # torchmetrics takes seconds to import: not with the schema

        for name in self.metrics:
            check_metric(name, self.regression, kind.choices, self.num_labels)
        split_specs(self)  # validates splits against data_files

    @property
    def kind(self) -> TaskType:
        """The task type (``gpt1.tasks``) that ``type`` names."""
        return get_task_type(self.type)

    @property
    def regression(self) -> bool:
        """Whether labels are scores (num_labels 1, a type that can regress)."""
        return self.kind.regresses(self.num_labels)


def task_from_dict(spec: Mapping[str, Any] | DictConfig | TaskConfig) -> TaskConfig:
    """A ``TaskConfig`` from a plain dict (e.g. a checkpoint's task) or an OmegaConf node, validated."""
    if isinstance(spec, TaskConfig):
        return spec
    try:
        return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TaskConfig), spec))
    except OmegaConfBaseException as e:
        raise ConfigError(f"task: {str(e).splitlines()[0]}") from e


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
                raise ConfigError(
                    f"task.splits.{role}: {m['name']!r} is not a key of task.data_files ({', '.join(files)})"
                )
            sid = role if len(names) == 1 else re.sub(r"\W+", "_", str(written)).strip("_")
            specs.append(SplitSpec(sid, role, m["name"], m["start"], m["stop"]))
    ids = [s.id for s in specs]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"task.splits lists a split twice: {ids}")
    unused = [key for key in files or {} if key not in {s.name for s in specs}]
    if unused:
        raise ConfigError(
            f"task.data_files.{unused[0]} is not used: the roles are {', '.join(ROLES)} "
            "(name the files after them, or map them with task.splits)"
        )
    return specs


def as_columns(value: Any, key: Optional[str] = None) -> list[str]:
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
