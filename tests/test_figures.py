"""Every figure of README.md and docs/*.md is tied to the row of experiments/README.md it comes from, equals it, and
that row was measured on today's recipe.

A figure is what a measurement gives (a time, a perplexity, an accuracy, a speed-up, a memory size; figure-like: a
number with a unit of time, memory or rate, a percentage, a ratio such as ``1.8x``, ``500k``, a decimal). It is tied
by a link to its row, ``[212.0](experiments/README.md#quickstart-ppl)``, on the figure or anywhere in its paragraph
(table row, list item); a code block's figures (a command's comment, a printed output) by a link in the paragraph
just before or after the block. A tied figure is written as in the row's value, with the same digits. A figure-like
number that no measurement gave (a setting, the paper's, an input's size, a version, an example in a message) is
listed in ``NOT_MEASURED`` below, by a phrase of its page around it and why: the reader sees no mark, and every
measured figure on the pages is a link. Inline code is never a figure (config values, messages, commands).

The rows' fingerprints (tools/figures.py) are recomputed here: a row whose recipe changed since it was measured fails
with the command that measures it again."""

import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FIGURES = runpy.run_path(str(ROOT / "tools" / "figures.py"))
"""tools/figures.py's functions: the rows of today's figures and their recipes."""

NUM = r"\d+(?:,\d{3})*(?:\.\d+)?"
RANGE = rf"{NUM}(?:[-–]{NUM})?"
FIGURE = re.compile(
    rf"""(?<![\w.,/^-])(?:
        \d+\ h(?:\ \d+(?:\ min)?)?\b                   # 1 h 45
      | \d+\ min(?:\ \d+(?:\.\d+)?\ s)?\b              # 3 min 34 s
      | {RANGE}-(?:second|minute|hour)\b               # a 4-minute install
      | {RANGE}\ ?(?:ms|s|seconds?|minutes?|hours?)\b  # 131.9 s, 12.8-13.2 ms
      | {RANGE}\ ?(?:[KMGT]i?B)\b                      # 807 MB, 8.23 GiB
      | {RANGE}\ ?%                                    # 38%
      | {RANGE}x\b                                     # 1.8x (not 64 x 512: a shape)
      | {RANGE}[kKM]\b                                 # 500k tokens/s, 488M tokens
      | {NUM}e-\d+                                     # 7.7e-8
      | \d+\.\d+(?:[-–]\d+\.\d+)?                      # 212.0, 0.643, 0.96-0.97
    )(?!\w|\.\d)""",
    re.X,
)
"""A figure-like token (outside inline code): see the module docstring."""

NOT_MEASURED = {
    "*": {
        "117M": "GPT-1's size (the paper's)",
        "N(0, 0.02)": "GPT-1's init (the paper's)",
    },
    "README.md": {
        "3.7M-parameter": "the quickstart model's size (its config)",
    },
    "docs/development.md": {
        "tests of 15 s and more": "a threshold: the tests marked slow",
    },
    "docs/evaluation.md": {
        "transformers 5.24": "a version",
        "chance is 0.25": "1 of 4 choices",
    },
    "docs/experiments.md": {
        "0 vs 0.5": "the ablation's settings",
    },
    "docs/faithfulness.md": {
        "dropout 0.1 whatever": "the original's setting",
        "at the 40k vocabulary": "GPT-1's vocabulary, 40,478 tokens",
    },
    "docs/finetuning.md": {
        "weight decay 0.01 at 6.25e-5": "the paper's recipe",
        "over 0.2% of the updates": "the original's warm-up",
        "dropout 0.1 in the model": "the paper's",
        "section 3.3": "the paper's section",
    },
    "docs/pretraining.md": {
        "at most 256 MiB": "a setting: the LM loss's chunk (gpt1/model/lm_loss.py CHUNK_BYTES)",
        "pieces of about 64K characters": "a setting",
        "every 16 MB read": "a setting",
        "1M characters are encoded at a time": "a setting",
        "row groups of 50 MB": "an input's shape",
        "at most 100 MB": "datasets' setting",
        "1x and 4x corpora": "a test's inputs",
        "growth at 25 MB": "a test's bound",
        "a 100 MB Arrow file": "a test's input",
        "at most 16 MB of it resident": "a test's bound",
        "every 15 s in a log": "a setting",
        "decay 0.01 on matrices only, peak lr 2.5e-4": "the paper's recipe",
        "dropout 0.1, 100 epochs": "the paper's recipe",
        "about 480 MB": "the size of OpenAI's weights",
    },
    "docs/resume.md": {
        "losses within 1e-3": "a test's bound",
        "within 1e-5 of the uninterrupted": "a test's bound",
        "every 30 s": "a setting",
        "heartbeat is 3 minutes old": "a setting",
        "3 minutes cover": "the same setting",
        "Python 3.11": "a version",
        "Python 3.10": "a version",
        "a corpus over 256 MB": "a setting: the size above which a corpus is recorded by its files' sizes",
    },
    "docs/strategies.md": {
        "loss within 1e-5 relative": "the test's bound",
        "weights within 5e-5": "the test's bound",
        "Jobs last 24 hours": "a setting",
        "every 30 s or so": "SLURM's clock",
    },
}
"""Page (``*``: any) -> a phrase around figure-like numbers that no measurement gave -> what they are."""


def clean(text: str) -> str:
    """A unit's text as scanned: inline code, link targets, HTML and bold marks out, lines joined."""
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"\]\([^)\s]*\)", "]", text)
    text = re.sub(r"<[^>]*>", "", text).replace("**", "")
    return re.sub(r"\s+", " ", text).strip()


def row_links(text: str, page: Path) -> list[str]:
    """The ids of the rows of experiments/README.md that a unit links to."""
    found = []
    for target in re.findall(r"\]\(([^)\s]+)\)", re.sub(r"`[^`]*`", " ", text)):
        path, _, anchor = target.partition("#")
        if anchor and path and (page.parent / path).resolve() == FIGURES["TABLE"]:
            found.append(anchor)
    return found


def units(page: Path) -> list[dict]:
    """A page's paragraphs, table rows, list items, headings and code blocks: ``line`` (its first), ``text`` (what is
    scanned: of a bash, Python or YAML block its comments), ``links`` (the rows it links to; a code block: those of
    the paragraphs just before and after it too) and ``code``."""
    lines = page.read_text().splitlines()
    found: list[dict] = []
    current: list[str] = []
    start = 0

    def flush():
        if current:
            text = "\n".join(current)
            found.append({"line": start + 1, "text": text, "links": row_links(text, page), "code": False})
            current.clear()

    n = 0
    while n < len(lines):
        line = lines[n]
        if line.startswith("```"):
            flush()
            language, end = line[3:].strip(), n + 1
            while end < len(lines) and not lines[end].startswith("```"):
                end += 1
            body = lines[n + 1 : end]
            if language in ("bash", "python", "yaml", "sh"):
                body = [re.split(r"(?:^|\s)# ", b, maxsplit=1)[1] for b in body if re.search(r"(?:^|\s)# ", b)]
            found.append({"line": n + 1, "text": "\n".join(body), "links": [], "code": True})
            n = end + 1
            continue
        new_unit = not line.strip() or line.startswith(("|", "#")) or re.match(r"\s*(?:[-*]|\d+\.) ", line)
        if new_unit:
            flush()
        if line.strip() and not re.match(r"\|[-| :]+\|$", line):
            if not current:
                start = n
            current.append(line)
            if line.startswith(("|", "#")):
                flush()
        n += 1
    flush()
    for i, unit in enumerate(found):  # a code block is tied by the paragraphs around it
        if unit["code"]:
            around = [found[j] for j in (i - 1, i + 1) if 0 <= j < len(found) and not found[j]["code"]]
            unit["links"] = [link for other in around for link in other["links"]]
    return found


def marked(page: Path) -> dict[str, str]:
    """The phrases of ``NOT_MEASURED`` that apply to a page."""
    name = str(page.relative_to(ROOT)) if page.is_relative_to(ROOT) else page.name
    return {**NOT_MEASURED["*"], **NOT_MEASURED.get(name, {})}


def findings(page: Path, table: dict) -> list[str]:
    """A line per figure of the page that is neither marked not measured nor tied to a row that holds it."""
    name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page.name
    phrases = marked(page)
    wrong = []
    for unit in units(page):
        text = clean(unit["text"])
        cover = [m.span() for p in phrases for m in re.finditer(re.escape(p), text)]
        for figure in FIGURE.finditer(text):
            if any(a <= figure.start() and figure.end() <= b for a, b in cover):
                continue
            why = verdict(figure.group(), unit["links"], table)
            if why:
                around = text[max(0, figure.start() - 50) : figure.end() + 20]
                wrong.append(f"{name}:{unit['line']}: {figure.group()!r} (…{around}…): {why}")
    return wrong


def verdict(token: str, links: list[str], table: dict) -> str | None:
    """What is wrong with a figure of a unit that links to these rows, or None."""
    unknown = [link for link in links if link not in table]
    if unknown:
        return f"links to no row of experiments/README.md: {unknown}"
    if not links:
        return (
            "tied to no row: link it to the row of experiments/README.md it comes from "
            "([figure](experiments/README.md#ROW)), or, if no measurement gave it, add a phrase around it to "
            "NOT_MEASURED in tests/test_figures.py, saying what it is"
        )
    live = [link for link in links if not table[link].pending]
    if any(holds(f"{table[link].what} {table[link].value}", token) for link in live):
        return None
    if not live:
        return "its row is to be measured again: cite no figure of it (say so) until it is"
    values = "; ".join(f"{link}: {clean(table[link].value)}" for link in live)
    return f"not in the row it links to ({values}): write the row's figure, as it does"


def holds(row: str, token: str) -> bool:
    """Whether a row (what it measured and its value) writes the figure with the same digits."""
    return re.search(rf"(?<![\w.]){re.escape(token)}(?!\w)", clean(row)) is not None


@pytest.fixture(scope="module")
def table():
    return FIGURES["rows"]()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_figure_of_a_page_is_a_rows_figure_or_marked_not_measured(page, table):
    wrong = findings(page, table)
    assert not wrong, f"{len(wrong)} figures:\n" + "\n".join(wrong)


def test_every_phrase_marked_not_measured_is_on_its_page_and_covers_a_figure():
    """A phrase that a page no longer has, or that covers no figure-like number, is a stale entry."""
    stale = []
    for name, phrases in NOT_MEASURED.items():
        pages = PAGES if name == "*" else [ROOT / name]
        texts = [clean(u["text"]) for p in pages for u in units(p)]
        for phrase in phrases:
            if not any(phrase in t and FIGURE.search(phrase) for t in texts):
                stale.append(f"{name}: {phrase!r}")
    assert not stale, "phrases of NOT_MEASURED that mark nothing: " + "; ".join(stale)


def test_every_row_has_an_id_and_was_measured_on_todays_recipe(table):
    without = [r.id for r in table.values() if r.id.startswith("line ")]
    assert not without, f'rows of experiments/README.md without <a id="..."></a> in their first cell: {without}'
    assert len(table) > 20
    stale = FIGURES["stale"](table)
    assert not stale, "\n".join(stale)


def test_a_recipe_changes_with_what_a_run_computes_not_with_paths_or_logging():
    part, fingerprint = FIGURES["part"], FIGURES["fingerprint"]
    quickstart = fingerprint([part("gpt1 pretrain")])
    beside = "gpt1 pretrain paths.cache_dir=/elsewhere logger=csv trainer.enable_progress_bar=false hydra.run.dir=X"
    assert fingerprint([part(beside)]) == quickstart
    assert fingerprint([part("time gpt1 pretrain")]) == quickstart
    for other in ("optim.lr=1e-3", "trainer.max_steps=161", "model=tiny", "seed=1", "trainer.precision=32-true"):
        assert fingerprint([part(f"gpt1 pretrain {other}")]) != quickstart, other


def test_a_fine_tune_from_the_quickstart_has_the_quickstarts_recipe_in_its_own():
    command = "`gpt1 finetune task=sentiment init_from=outputs/quickstart/<run>/last.ckpt`"
    row = FIGURES["Row"]("x", "", "", "", command, "", None, 0)
    parts = FIGURES["recipe"](row)
    assert parts[1] == {"checkpoint": "outputs/quickstart/", "made by": FIGURES["part"]("gpt1 pretrain")}
    made = FIGURES["Row"]("x", "", "", "", f"`gpt1 pretrain trainer.precision=32-true`, then {command}", "", None, 0)
    assert FIGURES["recipe"](made)[0] == FIGURES["part"]("gpt1 pretrain trainer.precision=32-true")
    assert len(FIGURES["recipe"](made)) == 2  # the quickstart it names, not the default one besides


def test_the_check_of_a_page_finds_an_untied_figure_a_wrong_one_and_a_stale_row(tmp_path, table):
    """The checks can fail: a figure tied to nothing, one tied to a row that holds other digits, a code block's figure
    with no link beside it, and a row whose recorded recipe is not today's; a marked phrase and inline code pass."""
    page = tmp_path / "page.md"
    page.write_text(
        "It trains in 131.9 s.\n\n"
        "```\nvalidation perplexity 212.0\n```\n\n"
        "The model is 117M, its flag `--mb 100` code.\n\n"
        f"It reaches [211.7]({FIGURES['TABLE']}#quickstart-ppl).\n"
    )
    found = findings(page, table)
    assert len(found) == 3, found
    assert "'131.9 s'" in found[0] and "tied to no row" in found[0]
    assert "'212.0'" in found[1] and "tied to no row" in found[1]
    assert "'211.7'" in found[2] and "not in the row it links to" in found[2]
    row = table["quickstart-ppl"]
    moved = FIGURES["Row"](**{**vars(row), "recipe": "00000000"})
    assert FIGURES["stale"]({row.id: moved}) and not FIGURES["stale"]({row.id: row})
    page.write_text(f"It reaches [211.9]({FIGURES['TABLE']}#quickstart-ppl), 3 min 34 s.\n")
    found = findings(page, table)  # 211.9 is the row's, 3 min 34 s another row's
    assert len(found) == 1 and "'3 min 34 s'" in found[0], found
    waiting = FIGURES["Row"](**{**vars(row), "value": f"to re-measure (why); before: {row.value}"})
    found = findings(page, {**table, row.id: waiting})
    assert len(found) == 2 and all("to be measured again" in f for f in found), found


def test_a_row_is_rewritten_in_place_with_its_value_machine_and_commit(table):
    """What ``python tools/figures.py record`` writes (it also refuses a tree with uncommitted changes)."""
    row = table["circles"]
    text = FIGURES["TABLE"].read_text()
    new = FIGURES["rewrite"](text, row, "**1**", "Xeon", "abcdef0 (2027-01-01); recipe 12345678")
    changed = [(a, b) for a, b in zip(text.splitlines(), new.splitlines()) if a != b]
    assert len(changed) == 1 and len(new.splitlines()) == len(text.splitlines())
    again = FIGURES["rows"](new)["circles"]
    assert (again.value, again.machine, again.recipe, again.command) == ("**1**", "Xeon", "12345678", row.command)


def test_the_tools_check_and_recipe_run_as_the_development_page_shows_them(capsys):
    assert FIGURES["main"](["check"]) == 0
    assert "waits to be measured again" in capsys.readouterr().out
    FIGURES["main"](["recipe", "quickstart-ppl"])
    out = capsys.readouterr().out
    assert f"recipe {FIGURES['rows']()['quickstart-ppl'].recipe} (recorded:" in out and '"lr": 0.0025' in out


def test_the_tool_measures_a_row_by_running_its_command_as_written(tmp_path, capfd):
    FIGURES["measure"](FIGURES["rows"]()["circles"], tmp_path)
    out = capfd.readouterr().out
    assert out.startswith("$ python tools/structure.py circles\n"), out
