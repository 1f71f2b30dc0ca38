"""The YAML files of a config directory (``--config-dir DIR``): a task of one's own (DIR/task/NAME.yaml, with
task=NAME) and an experiment (DIR/experiment/NAME.yaml, with experiment=NAME), given to ``gpt1 finetune``. Syntax
errors at a known line (a tab for indentation, an unclosed bracket or quote, a key given twice), a top level that is
not a mapping, fields misspelt or of the wrong type, other encodings, files of another kind, cut or flipped bytes,
an empty file, a huge one, a directory or a dangling link in its place; and valid variants, which run."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st

from tests.fuzz import mutations
from tests.fuzz.harness import Expect
from tests.fuzz.world import EXPERIMENT_YAML, FINETUNE, Recipe, task_yaml

TASK = "{in}/conf/task/fz.yaml"
EXPERIMENT = "{in}/conf/experiment/fz.yaml"
ARGV = {
    "task": ["finetune", "--config-dir", "{in}/conf", "task=fz", "init_from={ckpt}", *FINETUNE],
    "experiment": [
        "finetune",
        "--config-dir",
        "{in}/conf",
        "task=mine",
        "experiment=fz",
        "init_from={ckpt}",
        *FINETUNE,
    ],
}


def base_text(which: str) -> str:
    """The valid file: the task of world.py's assets (its data there), or the experiment; with a comment in a
    character outside ASCII, so that its other encodings differ from UTF-8."""
    text = task_yaml_text() if which == "task" else EXPERIMENT_YAML
    return text + "# café\n"


def task_yaml_text() -> str:
    return task_yaml(Path("assets/task"))


def _without(text: str, key: str) -> str:
    """``text`` without its top-level ``key`` (and the lines indented below it): the key given again is not a
    duplicate."""
    out, skipping = [], False
    for line in _lines(text):
        skipping = line.startswith(f"{key}:") or (skipping and line.startswith(" "))
        if not skipping:
            out.append(line)
    return "".join(out)


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


@st.composite
def syntax_error(draw, text: str) -> tuple[str, str, int]:
    """``text`` with one syntax error: (what, the text, the line the parser stops at)."""
    lines = _lines(text)
    indented = [i for i, line in enumerate(lines) if line.startswith("  ") and line.strip()]
    kinds = (
        ["tab", "bracket", "quote", "duplicate", "colon"] if indented else ["bracket", "quote", "duplicate", "colon"]
    )
    kind = draw(st.sampled_from(kinds))
    if kind == "tab":
        i = draw(st.sampled_from(indented))
        lines[i] = "\t" + lines[i].lstrip(" ")
        return "a tab for indentation", "".join(lines), i + 1
    keyed = [i for i, line in enumerate(lines) if ":" in line and not line.lstrip().startswith(("#", "-"))]
    i = draw(st.sampled_from(keyed))
    key = lines[i].split(":")[0]
    if kind == "bracket":  # the parser reads on to the end of the file
        lines[i] = f"{key}: [neg, pos\n"
        return "an unclosed [", "".join(lines), 0
    if kind == "quote":
        lines[i] = f'{key}: "open\n'
        return "an unclosed quote", "".join(lines), 0
    if kind == "duplicate":
        lines.insert(i + 1, lines[i])
        return f"the key {key.strip()!r} twice", "".join(lines), i + 2
    lines[i] = lines[i].rstrip("\n") + ": more: colons\n"
    return "a second colon in a value", "".join(lines), i + 1


TASK_WRONG_FIELDS = [
    ("label_names: 3", ["label_names"]),
    ("metrics: accuracy", ["metrics"]),
    ("type: [classification]", ["type"]),
    ("quoting: sometimes", ["quoting"]),
    ("lable: label", ["lable"]),
    ("text_pairs: hypothesis", ["text_pairs"]),
    ("zeroshot: verbalizer", ["zeroshot"]),
    ("split_seed: abc", ["split_seed"]),
]
"""A field line that is misspelt or of the wrong type, and what the error names."""

EXPERIMENT_WRONG_FIELDS = [
    ("optim: {lr: fast}", ["optim.lr"]),
    ("optim: {lrate: 0.1}", ["lrate"]),
    ("seed: seven", ["seed"]),
    ("aux_lm_weight: -1", ["aux_lm_weight"]),
    ("trainer: {gradient_clip_val: -1}", ["trainer.gradient_clip_val"]),
    ("head_pdrop: 2", ["head_pdrop"]),
]
"""(Not of the keys the command line sets, which it overrides: batch_size, trainer.max_steps.)"""


@st.composite
def recipes(draw) -> Recipe:
    which = draw(st.sampled_from(["task", "experiment"]))
    path = TASK if which == "task" else EXPERIMENT
    name = "fz.yaml"
    text = base_text(which)
    copy = {} if which == "task" else {"{in}/conf/task/mine.yaml": "{assets}/conf/task/mine.yaml"}
    kind = draw(
        st.sampled_from(
            [
                "valid",
                "syntax",
                "header",
                "top_level",
                "field",
                "encoding",
                "wrong_kind",
                "damaged",
                "empty",
                "huge",
                "special",
            ]
        )
    )

    def recipe(how: str, expect: Expect, content, names=(), line=None) -> Recipe:
        return Recipe(
            "yaml", f"{which} YAML: {how}", ARGV[which], expect, list(names), line, files={path: content}, copy=copy
        )

    if kind == "valid":
        variant = draw(st.sampled_from(["as it is", "comments", "flow style", "blank lines"]))
        if variant == "comments":  # (after the header: Hydra reads a header line only before any other)
            first, rest = text.split("\n", 1) if which == "experiment" else ("", text)
            text = (first + "\n" if first else "") + "# a comment\n" + rest + "# and last\n"
        elif variant == "blank lines":
            text = "\n\n" + text.replace("\n", "\n\n")
        elif variant == "flow style" and which == "task":
            text = text.replace("label_names: [neg, pos]", "label_names:\n  - neg\n  - pos")
        return recipe(variant, Expect.valid, text)
    if kind == "syntax":
        how, broken, line = draw(syntax_error(text))
        return recipe(how, Expect.invalid, broken, [name], line)
    if kind == "header":
        line = draw(
            st.sampled_from(
                [
                    "# @package _global_ # a note",
                    "# @package",
                    "# @package _global_ extra",
                    "a comment above the header",
                ]
            )
        )
        if line == "a comment above the header":
            if which == "task":  # (its first line is a comment: the header comes third)
                return recipe(
                    line, Expect.invalid, "# a comment\n" + text.replace("\n", "\n# @package _global_\n", 1), [name], 3
                )
            return recipe(line, Expect.invalid, "# a comment\n" + text, [name], 2)
        broken = text.replace("# @package _global_", line) if which == "experiment" else line + "\n" + text
        return recipe(f"header {line!r}", Expect.invalid, broken, [name], 1)
    if kind == "top_level":
        body = draw(st.sampled_from(["- a\n- b\n", "just a sentence\n", "42\n", "[1, 2]\n"]))
        return recipe(f"top level {body.strip()!r}", Expect.invalid, body, [name])
    if kind == "field":
        line, names = draw(st.sampled_from(TASK_WRONG_FIELDS if which == "task" else EXPERIMENT_WRONG_FIELDS))
        return recipe(line, Expect.invalid, _without(text, line.split(":")[0]) + line + "\n", names)
    if kind == "encoding":
        encoding, data = draw(mutations.in_encoding(text))  # (a UTF-8 mark hides an experiment's header from Hydra)
        expect = Expect.valid if encoding.startswith("UTF-8 with") and which == "task" else Expect.invalid
        return recipe(encoding, expect, data, [name] if expect is Expect.invalid else [])
    if kind == "wrong_kind":
        kind_name, data = draw(mutations.wrong_kind("a YAML document", "a JSON document", "a CSV table"))
        return recipe(kind_name, Expect.invalid, data, [name])
    if kind == "damaged":
        how, data = draw(mutations.damaged(text.encode()))  # (a file that still parses: its error names the key)
        return recipe(how, Expect.either, data)
    if kind == "empty":
        return recipe("empty", Expect.invalid, b"", ["type"] if which == "task" else [name, "@package"])
    if kind == "huge":
        return recipe("a 200 KB comment", Expect.valid, text + "#" + "x" * 200_000 + "\n")
    how, special = draw(mutations.special())
    return recipe(how, Expect.invalid, special, ["fz"])


def unreadable() -> st.SearchStrategy[Recipe]:
    """A valid task YAML that Hydra may not read (mode 000; run as another user)."""
    data = mutations.unreadable(base_text("task").encode())
    return st.builds(
        lambda: Recipe(
            "yaml", "task YAML: no read permission", ARGV["task"], Expect.invalid, ["fz.yaml"], files={TASK: data}
        )
    )
