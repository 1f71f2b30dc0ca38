"""The failures the harness found, each a named case (its ``what``) that tests/fuzz/test_fuzz.py runs as an
``@example`` of its surface's test: what gpt1 did before the fix, in words, and the case that showed it."""

from __future__ import annotations

from tests.fuzz import gen_hf, gen_yaml
from tests.fuzz.gen_checkpoints import COMMANDS, _crafted, _edit, code_running_checkpoint
from tests.fuzz.gen_task_data import ARGV as TASK_ARGV
from tests.fuzz.gen_task_data import _task, serialize
from tests.fuzz.gen_tokenizer import argv as tokenizer_argv
from tests.fuzz.gen_tokenizer import valid_tokenizer_json, vocab_files
from tests.fuzz.harness import Expect
from tests.fuzz.mutations import WRONG_KINDS
from tests.fuzz.world import BASES, Recipe, Special

GENERATE, PRETRAIN, EVALUATE = BASES["generate"], BASES["pretrain"], BASES["evaluate"]


def _overrides(what: str, base: list[str], override: str, names: list[str]) -> Recipe:
    return Recipe("overrides", what, [*base, override], Expect.invalid, names)


OVERRIDES = [
    _overrides("no key (=5): ValueError traceback from Hydra's defaults list", GENERATE, "=5", ["=5"]),
    _overrides("+foo=1 on a schema: accepted and ignored", GENERATE, "+foo=1", ["foo"]),
    _overrides("~top_k: 'did you mean top_k?'", GENERATE, "~top_k", ["~top_k"]),
    _overrides("seed=abc: OmegaConf's words, nothing to do", GENERATE, "seed=abc", ["seed", "integer"]),
    _overrides(
        "a missing interpolation named where it was resolved", EVALUATE, "paths.cache_dir=${oops}", ["paths.cache_dir"]
    ),
    _overrides(
        "task.* without a task: AssertionError traceback",
        EVALUATE,
        "task.metrics=[[1,2]]",
        ["task.metrics", "task=NAME"],
    ),
    _overrides("a list in a list of floats: accepted", PRETRAIN, "optim.betas=[[0.9,0.99]]", ["optim.betas"]),
    _overrides(
        "an empty hydra.run.dir: the run written into the working directory",
        GENERATE,
        "hydra.run.dir=",
        ["hydra.run.dir"],
    ),
    _overrides("an unknown group option: nothing to do", PRETRAIN, "model=zzsmall", ["model=zzsmall", "choose"]),
    _overrides(
        "an optional group's unknown option: skipped by Hydra, the run went on",
        BASES["prepare"],
        "debug=zzfast",
        ["debug=zzfast", "fast"],
    ),
    _overrides(
        "trainer.accelerator of no accelerator: Lightning's ValueError traceback",
        BASES["finetune"],
        "trainer.accelerator=zzgpu",
        ["trainer.accelerator=zzgpu"],
    ),
    _overrides("~seed of zeroshot, which reads no seed: accepted", BASES["zeroshot"], "~seed", ["~seed", "set it"]),
    _overrides("~rerun: TypeError traceback from the record's replay", PRETRAIN, "~rerun", ["~rerun"]),
    Recipe(
        "overrides",
        "temperature=1.4e-45: the logits over it overflowed, a RuntimeError traceback from torch.multinomial",
        [*GENERATE, "temperature=1.401298464324817e-45"],
        Expect.valid,
    ),
]


def _flags(what: str, argv: list[str], names: list[str]) -> Recipe:
    return Recipe("flags", what, argv, Expect.invalid, names)


FLAGS = [
    Recipe(
        "flags",
        "convert to-hf SRC DST --info: Hydra's info, judged a refusal",
        [*BASES["convert"], "--info"],
        Expect.valid,
    ),
    _flags(
        "gpt1 report --out an existing file: FileExistsError traceback",
        ["report", "{finished}", "--out", "{assets}/corpus.txt"],
        ["corpus.txt"],
    ),
    _flags("an unknown flag: argparse's usage block", [GENERATE[0], "--zzflag", *GENERATE[1:]], ["--zzflag"]),
    _flags(
        "--experimental-rerun: ValueError traceback, and it unpickles a file",
        ["generate", "--experimental-rerun", "{in}/config.pickle", *GENERATE[1:]],
        ["--experimental-rerun"],
    ),
    _flags("gpt1 bench --precision 17: argparse's usage block", ["bench", "--precision", "17"], ["--precision"]),
    _flags("gpt1 report with no DIR: argparse's usage block", ["report"], ["DIR"]),
    _flags(
        "convert to-hf onto a file: nothing to do",
        ["convert", "to-hf", "{ckpt}", "{assets}/corpus.txt"],
        ["corpus.txt", "give"],
    ),
]


def _yaml(what: str, content, names: list[str], line=None) -> Recipe:
    return Recipe("yaml", what, gen_yaml.ARGV["task"], Expect.invalid, names, line, files={gen_yaml.TASK: content})


def _tabbed() -> str:
    return gen_yaml.base_text("task").replace("\n  train:", "\n\ttrain:")


def _experiment(what: str, content, names: list[str], line=None) -> Recipe:
    return Recipe(
        "yaml",
        what,
        gen_yaml.ARGV["experiment"],
        Expect.invalid,
        names,
        line,
        files={gen_yaml.EXPERIMENT: content},
        copy={"{in}/conf/task/mine.yaml": "{assets}/conf/task/mine.yaml"},
    )


YAML = [
    _yaml(
        "a field given a value where its schema has fields: 'Merge error', no key named",
        gen_yaml.base_text("task").replace(
            "zeroshot: {heuristic: verbalizer, words: [dull, fine]}", "zeroshot: verbalizer"
        ),
        ["fz.yaml", "zeroshot"],
    ),
    _experiment("an empty experiment: 'unknown field experiment'", b"", ["fz.yaml", "@package"]),
    _experiment(
        "an experiment with a UTF-8 mark: its header hidden, 'Could not override trainer@experiment'",
        b"\xef\xbb\xbf" + gen_yaml.base_text("experiment").encode(),
        ["fz.yaml", "byte-order mark"],
    ),
    _experiment("NUL bytes: yaml.reader.ReaderError traceback", b"\x00" * 64, ["fz.yaml"]),
    _experiment(
        "a defaults entry cut short: Hydra's 'Could not load', nothing to do",
        b"# @package _global_\ndefaults:\n  - override /tr\n",
        ["fz.yaml", "override /tr", "fix that entry"],
    ),
    _experiment(
        "an empty defaults entry: ValueError traceback from Hydra's defaults list",
        b"# @package _global_\ndefaults:\n  - \n",
        ["fz.yaml", "defaults entry None"],
    ),
    _experiment(
        "a defaults entry of a number: ValueError traceback from Hydra's defaults list",
        b"# @package _global_\ndefaults:\n  - override /trainer: 5\n",
        ["fz.yaml", "defaults entry"],
    ),
    _experiment(
        "a field cut to its key alone (null): 'is not Optional', nothing to do",
        b"# @package _global_\noptim:\n",
        ["fz.yaml", "optim", "give optim a value"],
    ),
    _experiment(
        "a value cut to null: 'Incompatible value None', nothing to do",
        b"# @package _global_\nseed:\n",
        ["fz.yaml", "seed", "give seed a value"],
    ),
    _yaml(
        "an unclosed [: named at the line where the parser gave up",
        "type: classification\nlabel_names: [neg, pos\ntext: text\n",
        ["fz.yaml", "close the ["],
        0,
    ),
    _yaml(
        "a tab for indentation: a 90-line yaml.scanner.ScannerError traceback", _tabbed(), ["fz.yaml, line 4", "tab"], 4
    ),
    _yaml("UTF-16: UnicodeDecodeError traceback", gen_yaml.base_text("task").encode("utf-16"), ["fz.yaml", "iconv"]),
    _yaml("a PNG image: UnicodeDecodeError traceback", WRONG_KINDS["a PNG image"](), ["fz.yaml", "PNG"]),
    _yaml(
        "a note on the header line: ValueError traceback",
        "# @package _global_ # a note\n" + _tabbed(),
        ["fz.yaml, line 1"],
        1,
    ),
    _yaml("a sentence at the top: 'unknown field'", "just a sentence\n", ["fz.yaml", "not a mapping"]),
    _yaml(
        "a key twice: ConstructorError traceback", "type: classification\ntype: similarity\n", ["fz.yaml, line 2"], 2
    ),
]


def _record(what: str, argv: list[str], record: str, content, expect: Expect, names: list[str]) -> Recipe:
    return Recipe(
        "records",
        what,
        argv,
        expect,
        names,
        files={f"{{run}}/{record}": content},
        copy={"{run}": "{finished}"},
        kept_run="{run}",
    )


RESUME = [*PRETRAIN, "resume=auto", "hydra.run.dir={run}"]
RECORDS = [
    _record(
        "resume: .hydra/overrides.yaml cut to 3 bytes: Hydra's line of an override 'm', the record not named",
        RESUME,
        ".hydra/overrides.yaml",
        "- m",
        Expect.invalid,
        ["overrides.yaml"],
    ),
    _record(
        "resume: .hydra/overrides.yaml with a key bit-flipped: 'iodel' not in PretrainConfig, the record not named",
        RESUME,
        ".hydra/overrides.yaml",
        "- iodel=tiny\n",
        Expect.invalid,
        ["overrides.yaml", "iodel"],
    ),
    _record(
        "report: provenance.json's attempts a string: AttributeError traceback",
        ["report", "{run}"],
        "provenance.json",
        '{"attempts": "x"}',
        Expect.valid,
        [],
    ),
    _record(
        "report: .hydra/config.yaml a list: AttributeError traceback",
        ["report", "{run}"],
        ".hydra/config.yaml",
        "- a list\n",
        Expect.invalid,
        ["config.yaml"],
    ),
    _record(
        "resume: .hydra/overrides.yaml a directory: IsADirectoryError traceback",
        RESUME,
        ".hydra/overrides.yaml",
        Special("directory"),
        Expect.invalid,
        ["overrides.yaml", "directory"],
    ),
    _record(
        "resume: csv/metrics.csv not UTF-8: UnicodeDecodeError traceback",
        RESUME,
        "csv/metrics.csv",
        b"step,epoch\n\xff\xfe,1\n",
        Expect.invalid,
        ["metrics.csv"],
    ),
    _record(
        "resume: a CSV log row longer than its header: AttributeError traceback",
        RESUME,
        "csv/metrics.csv",
        "step,epoch\n1,2,3,4\n",
        Expect.invalid,
        ["metrics.csv"],
    ),
    _record(
        "resume: run.lock a directory: IsADirectoryError traceback",
        RESUME,
        "run.lock",
        Special("directory"),
        Expect.invalid,
        ["run.lock", "directory"],
    ),
    _record(
        "resume: checkpoints/last.ckpt of a finished run missing: trained again from step 0, its results rewritten",
        RESUME,
        "checkpoints/last.ckpt",
        None,
        Expect.invalid,
        ["last.ckpt", "had finished"],
    ),
    _record(
        "resume: checkpoints/last.ckpt a directory: trained again, its CSV rows written again",
        RESUME,
        "checkpoints/last.ckpt",
        Special("directory"),
        Expect.invalid,
        ["last.ckpt", "not a file"],
    ),
    Recipe(
        "records",
        "the finished run: a refused resume rewrote its .hydra/ record",
        [*PRETRAIN, "resume=auto", "hydra.run.dir={finished}", "optim.lr=-1"],
        Expect.invalid,
        ["optim.lr"],
    ),
]


def _checkpoint(what: str, content, names: list[str], command: str = "generate") -> Recipe:
    argv = [a.replace("{path}", "{in}/model.ckpt") for a in COMMANDS[command]]
    return Recipe("checkpoint", what, argv, Expect.invalid, ["model.ckpt", *names], files={"{in}/model.ckpt": content})


def _checkpoints() -> list[Recipe]:
    crafted = _crafted()
    cases = [
        _checkpoint(
            "a CSV: 'truncated or corrupt? IndexError: pop from empty list'",
            WRONG_KINDS["a CSV table"](),
            ["text file"],
        ),
        _checkpoint("a raw pickle: 'truncated or corrupt?'", WRONG_KINDS["a raw pickle"](), ["pickle"]),
        _checkpoint("empty: 'truncated or corrupt? EOFError'", b"", ["empty"]),
        _checkpoint("a pickle that would create a file: refused, nothing run", code_running_checkpoint("case/ran"), []),
    ]
    for how, failed in [
        ("the task a list", "'task: Cannot merge DictConfig with ListConfig'"),
        ("no weights", "KeyError traceback"),
        ("a weight a number", "AttributeError traceback"),
        ("model_type a list", "TypeError traceback"),
    ]:
        command = "evaluate" if how == "the task a list" else "generate"
        cases.append(_checkpoint(f"{how}: {failed}", _edit(crafted[how][1]), [], command))
    return cases


def _hf(what: str, name: str, content, names: list[str]) -> Recipe:
    return Recipe(
        "hf_folder",
        what,
        gen_hf.ARGV,
        Expect.invalid,
        names,
        files={f"{gen_hf.FOLDER}/{name}": content},
        copy={gen_hf.FOLDER: "{assets}/hf"},
    )


HF = [
    _hf(
        "n_embd 48 in config.json, weights of 32: size-mismatch traceback",
        "config.json",
        '{"n_layer": 2, "n_embd": 48, "n_head": 2, "n_positions": 32, "vocab_size": 301}',
        ["model.safetensors", "config.json"],
    ),
    _hf(
        "vocab_size 1000 in config.json, weights of 301: nothing to do",
        "config.json",
        '{"n_layer": 2, "n_embd": 32, "n_head": 2, "n_positions": 32, "vocab_size": 1000}',
        ["model.safetensors", "intact"],
    ),
    _hf("config.json a list: AttributeError traceback", "config.json", "[1, 2]", ["config.json"]),
    _hf("model.safetensors empty: SafetensorError traceback", "model.safetensors", b"", ["model.safetensors"]),
    _hf(
        "attn_pdrop 1.5 in config.json: converted",
        "config.json",
        '{"attn_pdrop": 1.5, "n_layer": 2, "n_embd": 32, "n_head": 2, "n_positions": 32, "vocab_size": 301}',
        ["config.json", "attn_pdrop"],
    ),
]


def _task_data() -> list[Recipe]:
    rows = [("a fine film", "pos"), ("a dull film", "neg")] * 8
    parquet = serialize("parquet", rows)
    damaged = parquet[: len(parquet) // 2] + b"\xf5O\x01q\xca\x86\xb4\x98\x89\xce\xc9{AB" + parquet[len(parquet) // 2 :]

    def case(what: str, fmt: str, content, names: list[str]) -> Recipe:
        return Recipe(
            "task_data",
            what,
            TASK_ARGV,
            Expect.invalid,
            [f"train.{fmt}", *names],
            files={**_task(fmt), f"{{in}}/train.{fmt}": content},
        )

    jsonl = serialize("jsonl", rows).decode().splitlines(keepends=True)
    jsonl[3] = "[1, 2]\n"
    return [
        case("a damaged parquet table: OSError traceback (pyarrow's thrift)", "parquet", damaged, []),
        case(
            "an ELF executable as .tsv: its bytes listed as columns", "tsv", WRONG_KINDS["an ELF executable"](), ["ELF"]
        ),
        case("an empty .tsv: nothing to do", "tsv", b"", ["empty", "give"]),
        case("a JSON Lines line that is a list: nothing to do", "jsonl", "".join(jsonl).encode(), ["train.jsonl:4:"]),
    ]


def _tokenizer_files() -> list[Recipe]:
    vocab, merges = vocab_files(valid_tokenizer_json())
    return [
        Recipe(
            "tokenizer",
            "OpenAI's vocab.json cut short: tokenizers' Exception traceback",
            tokenizer_argv("{in}/openai", openai=True),
            Expect.invalid,
            ["openai", "vocab.json"],
            files={"{in}/openai/vocab.json": vocab[:128], "{in}/openai/merges.txt": merges},
        ),
    ]


CORPORA = [
    Recipe(
        "corpus",
        "a PNG image named .txt: read as text",
        [
            "prepare",
            *BASES["prepare"][1:-2],
            "data.train_files=[{in}/corpus.txt]",
            "data.valid_files=[{assets}/valid.txt]",
        ],
        Expect.invalid,
        ["corpus.txt", "PNG"],
        files={"{in}/corpus.txt": WRONG_KINDS["a PNG image"]()},
    ),
]

CHECKPOINTS, TASK_DATA, TOKENIZER_FILES = _checkpoints(), _task_data(), _tokenizer_files()

CONSOLE_SCRIPT = [
    _yaml(
        "a tab for indentation, in a process of its own: the traceback again (Hydra's first scan of its plugins had "
        "replaced the class gpt1 checks through)",
        _tabbed(),
        ["fz.yaml, line 4", "tab"],
        4,
    ),
]
