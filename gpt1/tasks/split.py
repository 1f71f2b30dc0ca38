"""One split of a task, resolved once (``TaskSplit``): where its rows are (local files, globbed and their headers'
columns checked when it is made, or a hub split), whether it has labels, how an error names one of its rows, and the
cache entry of its encoded examples; its examples read as text (``read``) and as ids, encoded once (``prepare``,
``encoded``).

Encoded splits are cached in ``<cache_dir>/tasks/<key>.npz``, key: the split's files (paths, sizes, mtimes) or hub
fingerprint, its slice, the tokenizer and the task's columns and labels: a rerun neither reads local files again nor
encodes anything.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import datasets
import numpy as np

from gpt1.core.errors import DataError
from gpt1.core.quoting import Quoting
from gpt1.data.base import cache_key
from gpt1.data.formats import file_format, line_without, row_location
from gpt1.data.sources import FileSource, HubSource, Source
from gpt1.tasks.encoding import CACHE_VERSION, EncodedSplit
from gpt1.tasks.examples import Examples
from gpt1.tasks.rows import choices_of, labels_of, texts_of
from gpt1.tasks.spec import SplitSpec, TaskConfig, as_columns

if TYPE_CHECKING:
    from gpt1.text.tokenizer import Tokenizer

log = logging.getLogger(__name__)


class TaskSplit:
    """One split of ``task`` (``spec``), its source resolved and its columns checked on construction, once.

    cache_dir: the datasets cache and the encoded splits (None: no cache). tokenizer: what ``encoded`` encodes with
    (None: ``read`` only); tokenizer_key: its ``cache_key`` (None: computed here), which the splits of a task share.
    """

    def __init__(
        self,
        task: TaskConfig,
        spec: SplitSpec,
        cache_dir: Optional[Path],
        tokenizer: Optional[Tokenizer] = None,
        tokenizer_key: Optional[str] = None,
    ) -> None:
        self.task, self.spec, self.quoting, self.tokenizer = task, spec, str(task.quoting), tokenizer
        self.id, self.role = spec.id, spec.role
        self.extra = {key: getattr(task, key) for key in task.kind.columns if getattr(task, key) is not None}
        self.columns = [
            *as_columns(task.text),
            *as_columns(task.text_pair),
            *as_columns(task.choices),
            *self.extra.values(),
        ]
        datasets_cache = None if cache_dir is None else str(cache_dir / "datasets")
        self.files: Optional[list[Path]] = None
        """The split's files, globbed once (None: a hub split)."""
        self.source: Source
        if task.data_files is None:
            self.where = f"{task.dataset} ({task.dataset_config}) split {spec.name}"
            where = f"{self.where} (task.splits.{spec.role})"
            self.source = HubSource(task.dataset, task.dataset_config, spec.name, where, datasets_cache, task.data_dir)
        else:
            self.source = FileSource(
                task.data_files[spec.name], f"task.data_files.{spec.name}", datasets_cache, self.quoting
            )
            self.files = self.source.files
            self.where = str(self.files[0]) if len(self.files) == 1 else f"task.data_files.{spec.name}"
        self.has_label = (
            self._check_files() if self.files is not None else self._check(self.where, self.source.dataset.column_names)
        )
        """Whether the split has its label column (a test split may not)."""
        self.cache_path: Optional[Path] = None
        """Its encoded examples' file in the cache (None: no cache, or no tokenizer)."""
        if cache_dir is not None and tokenizer is not None:
            t = task  # (the settled task's label names may differ: the key stays the spec's)
            columns = [
                t.type,
                t.text,
                t.text_pair,
                t.choices,
                t.label,
                t.label_names,
                t.regression,
                self.has_label,
                *(getattr(t, key) for key in t.kind.columns),
            ]
            tokenizer_key = tokenizer_key or cache_key(tokenizer.to_str())
            self.cache_path = cache_dir / "tasks" / f"{cache_key(CACHE_VERSION, self.key, tokenizer_key, columns)}.npz"
        self._encoded: Optional[EncodedSplit] = None
        self._prepared = False

    def _check(self, where: str, have: Sequence[str]) -> bool:
        """Raise for a missing text/choice column, or a missing label column outside a test split; return whether
        the label column is there."""
        t = self.task
        for key, value in (("text", t.text), ("text_pair", t.text_pair), ("choices", t.choices), *self.extra.items()):
            missing = [c for c in as_columns(value) if c not in have]
            if missing:
                raise DataError(
                    f"{where}: no column {missing[0]!r} (task.{key}); its columns are {list(have)}: set task.{key} to "
                    "one of them"
                )
        if t.label in have:
            return True
        if self.role != "test":
            raise DataError(
                f"{where}: no label column {t.label!r} (task.label); its columns are {list(have)}: set task.label to "
                "the one that holds the labels"
            )
        return False

    def _check_files(self) -> bool:
        """``_check`` of every file, from its header; whether they have the label column (all or none may)."""
        labelled = []
        for path in self.files:
            if path.stat().st_size == 0:
                raise DataError(f"{path} is empty (task.data_files.{self.spec.name}): give it rows, or another file")
            labelled.append(self._check(str(path), self.source.columns(path)))
        if any(labelled) and not all(labelled):
            without = [str(p) for p, has in zip(self.files, labelled, strict=True) if not has]
            raise DataError(
                f"{without[0]} has no label column {self.task.label!r} but other files of "
                f"task.data_files.{self.spec.name} do: label all of them or none"
            )
        return all(labelled)

    @property
    def key(self) -> str:
        """Changes whenever the split's rows may: the files (paths, sizes, mtimes) and quoting, or the hub
        fingerprint."""
        return cache_key(self.source.key(), self.spec.name, self.spec.start, self.spec.stop, self.task.split_seed)

    def locate(self, row: int) -> str:
        """Where row ``row`` of the split is, as errors name it (``gpt1.data.formats.row_location``)."""
        return row_location(self.where, row, self.quoting)

    # -- the examples -----------------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Read and encode the split unless the cache has it, once; what it encodes goes into the cache (if any) and
        stays for ``encoded``."""
        if self._prepared:
            return
        self._prepared = True
        if self.cache_path is None or not self.cache_path.is_file():
            self._encoded = EncodedSplit.encode(self.read(), self.tokenizer)
            if self.cache_path is not None:
                self._encoded.save(self.cache_path)

    def encoded(self) -> EncodedSplit:
        """The split's examples as ids, once: those ``prepare`` encoded (a process that did not prepare prepares
        here), else the cache's."""
        self.prepare()
        if self._encoded is None:
            self._encoded = EncodedSplit.load(self.cache_path)
        return self._encoded

    def read(self) -> Examples:
        """The split's examples as text: texts joined, choices gathered, labels mapped, rows without a label
        dropped."""
        ds, index = self.rows()
        cols = ds.to_dict()
        n, t, where = len(ds), self.task, self.where
        text = texts_of(cols, as_columns(t.text), index, self.locate)
        pair = texts_of(cols, as_columns(t.text_pair), index, self.locate) if t.text_pair is not None else None
        choices = choices_of(cols, as_columns(t.choices), index, self.locate, where) if t.choices is not None else None
        if self.extra:  # the type makes its examples of them (Winograd: the pronoun substituted)
            extra = {key: cols[column] for key, column in self.extra.items()}
            text, pair, choices = t.kind.examples(t, extra, text, pair, choices, where, index)
        feature = ds.features.get(t.label)
        source_names = list(feature.names) if isinstance(feature, datasets.ClassLabel) else None
        if not self.has_label:
            return Examples(text, pair, choices, None, index, n, source_names)
        spec = self.spec
        if n == 0 and spec.role != "test":
            sliced = f" (task.splits.{spec.role}: {spec.name}[{spec.start or ''}:{spec.stop or ''}])"
            raise DataError(
                f"{where}: the {spec.role} split has no rows"
                f"{sliced if spec.start or spec.stop else ''}: give it examples"
            )
        labels = labels_of(cols[t.label], t, t.label_names or source_names, choices, index, self.locate)
        keep = ~np.isnan(labels) if t.regression else labels >= 0
        if not keep.all() and self.files is not None:  # dropped rows: none may be a row with its label field missing
            for path in self.files:
                line = line_without(path, t.label, self.quoting)
                if line is not None:
                    raise DataError(
                        f"{path}:{line}: the row has no field for the label column {t.label!r} "
                        "(task.label), as if a field were missing: fix the row (an empty label field, -1 "
                        "or null marks a row without a gold label, which is left out)"
                    )
        if not keep.any():
            if spec.role != "test":
                raise DataError(
                    f"{where}: no row has a label in column {t.label!r} (task.label); "
                    f"the {spec.role} split needs labels"
                )
            return Examples(text, pair, choices, None, index, n, source_names)
        if not keep.all():
            rows = np.flatnonzero(keep).tolist()
            text = [text[i] for i in rows]
            pair = None if pair is None else [pair[i] for i in rows]
            choices = None if choices is None else [choices[i] for i in rows]
        return Examples(text, pair, choices, labels[keep], index[keep], n, source_names)

    def rows(self) -> tuple[datasets.Dataset, np.ndarray]:
        """The split's rows in the needed columns, sliced (in ``task.split_seed``'s order when set), and the position
        of each in the whole split (n,) int64."""
        ds = self.source.rows(self.columns + ([self.task.label] if self.has_label else []))
        if self.files is not None:
            self._warn_if_quotes_swallowed_rows(len(ds))
        start, stop = self.spec.bounds(len(ds))
        if self.task.split_seed is not None and (self.spec.start or self.spec.stop):  # train_test_split's order
            index = np.random.RandomState(self.task.split_seed).permutation(len(ds))[start:stop].astype(np.int64)
            return ds.select(index), index
        index = np.arange(start, stop, dtype=np.int64)
        return (ds if (start, stop) == (0, len(ds)) else ds.select(range(start, stop))), index

    def _warn_if_quotes_swallowed_rows(self, rows: int) -> None:
        """.tsv files read with quoting minimal into fewer rows than their lines, each of the header's number of
        fields, give: a field that starts with a quote ran, as quoted, to the next quote (GLUE's files)."""
        if self.quoting != Quoting.minimal:
            return
        lines = [file_format(p).unquoted_rows(p) for p in self.files]
        if None not in lines and sum(lines) > rows:
            log.warning(
                "%s: %d rows read from %d lines: a field that starts with a double quote was read as quoted "
                "(task.quoting=minimal), up to the next quote, across tabs and lines; if the quotes are "
                "text, as in GLUE's .tsv files, set task.quoting=none",
                self.where,
                rows,
                sum(lines),
            )
