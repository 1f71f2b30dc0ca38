"""Winograd schemas (paper section 5: the Definite Pronoun Resolution Dataset; the WSC): a sentence, a definite
pronoun in it and the candidate referents, the label picking the one the pronoun refers to.

Each candidate replaces the pronoun: an example's choices are the sentence up to the pronoun with each candidate in
its place, its text the rest of the sentence after the pronoun, which the zero-shot heuristic (``winograd``) scores
after each choice. Fine-tuned, it is multiple choice on ``S sentence-with-candidate_k-up-to-the-pronoun D rest X``.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import numpy as np

from gpt1.core.errors import ConfigError, DataError
from gpt1.tasks.multiple_choice import MultipleChoice


class Winograd(MultipleChoice):
    """K candidates per example, each substituted for the pronoun; the label is the index of the right one."""

    name = "winograd"
    columns = ("pronoun", "pronoun_loc")
    heuristics = ("winograd",)
    default_heuristic = "winograd"

    def check(self, task: Any) -> None:
        if task.pronoun is None:
            raise ConfigError("task.pronoun: a winograd task needs it (the column of the pronoun to replace)")

    def examples(
        self,
        task: Any,
        columns: dict[str, list],
        text: list[str],
        pair: Optional[list[str]],
        choices: Optional[list[list[str]]],
        where: str,
        index: np.ndarray,
    ) -> tuple[list[str], Optional[list[str]], Optional[list[list[str]]]]:
        """text: the rest of each sentence after its pronoun; choices: the sentence up to the pronoun, each
        candidate in its place."""
        locs = columns.get("pronoun_loc")
        rests, prefixes = [], []
        for r, (sentence, pronoun, candidates) in enumerate(zip(text, columns["pronoun"], choices, strict=True)):
            start = pronoun_start(sentence, pronoun, None if locs is None else locs[r])
            if start is None:
                at = "" if locs is None else f" at offset {locs[r]} (task.pronoun_loc)"
                raise DataError(
                    f"{where} row {int(index[r])}: the pronoun {pronoun!r} (task.pronoun) is not in the "
                    f"text{at}: {sentence!r}"
                )
            rests.append(sentence[start + len(pronoun) :])
            prefixes.append([sentence[:start] + candidate for candidate in candidates])
        return rests, pair, prefixes

    def ordered(self, text: Any, choice: Any) -> tuple[Any, Any]:
        """The choice (the sentence up to the pronoun, a candidate in its place) first, then the rest."""
        return choice, text


def pronoun_start(sentence: str, pronoun: str, loc: Any = None) -> Optional[int]:
    """Where ``pronoun`` starts in ``sentence``: at ``loc`` when given (if it is there), else its first occurrence
    as a whole word; None if it is not there."""
    if loc is not None:
        loc = int(loc)
        return loc if sentence[loc : loc + len(pronoun)] == pronoun else None
    match = re.search(rf"(?<!\w){re.escape(pronoun)}(?!\w)", sentence)
    return None if match is None else match.start()
