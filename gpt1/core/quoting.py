"""How .csv and .tsv files quote their fields (``data.quoting``, a task's ``quoting``)."""

from enum import Enum


class Quoting(str, Enum):
    """How .csv and .tsv files quote their fields (``gpt1.data.formats`` says more)."""

    minimal = "minimal"  # RFC 4180, as Python's csv module and pandas write them
    none = "none"  # every quote is text (GLUE's and SNLI's .tsv files)

    def __str__(self) -> str:
        return self.value
