"""How close the exported tokenizer.json (``gpt1 convert to-hf``) comes to gpt1's own tokenizer, as transformers runs
it: the same ids, text by text, for a trained "gpt1" BPE (exact by construction) and for OpenAI's vocab, whose
original pipeline (ftfy, spaCy) the export approximates in ``tokenizers`` rules
(``gpt1.text.openai_text.approximate_in_tokenizers``).

    python experiments/export_tokenizer_check.py [--vocab ../shared/reference/openai-vocab] [--per-task 400]

Texts: OpenAI's golden lines (golden.jsonl, the ids of the original code), then a seeded sample of the sample data
(paragraphs of four novels, sentiment reviews, movie dialogue, wikiHow steps, stories, Wikipedia sentences,
entailment premises) encoded by gpt1's "openai" pipeline (which reproduces every golden line). Prints, per set, the
texts whose ids are all equal and the tokens that differ (difflib's alignment), with the most common differences.
Needs ``gpt1[openai]`` (ftfy, spaCy) and transformers. Results: experiments/results/export_tokenizers.md.
"""

from __future__ import annotations

import argparse
import collections
import difflib
import json
import random
import tempfile
from pathlib import Path

import pandas as pd

from gpt1.checkpoints.hf import hf_tokenizer_json
from gpt1.data.sample import sample_data
from gpt1.text.tokenizer import Tokenizer, load_tokenizer


def sample_texts(root: Path, per_task: int, seed: int = 1) -> list[str]:
    """A seeded mix of the sample data's texts."""
    rng = random.Random(seed)

    def some(items: list[str], k: int) -> list[str]:
        return rng.sample(items, min(k, len(items)))

    texts: list[str] = []
    for name in ("emma", "pride_and_prejudice", "the_war_of_the_worlds", "moby_dick"):
        lines = [line for line in (root / f"books/train/{name}.txt").read_text().splitlines() if line.strip()]
        texts += some(lines, per_task // 2)
    sentiment = [json.loads(line)["sentence"] for line in (root / "tasks/sentiment/validation.jsonl").open()]
    texts += some(sentiment, per_task)
    for name, columns in (("paraphrase", ["sentence1", "sentence2", "context"]), ("multiple_choice", ["context"])):
        rows = [json.loads(line) for line in (root / f"tasks/{name}/validation.jsonl").open()]
        for row in some(rows, per_task):
            texts += [row[c] for c in columns if row.get(c)] + row.get("choices", [])
    stories = [json.loads(line) for line in (root / "tasks/story/validation.jsonl").open()]
    texts += [s["context"] for s in stories] + [c for s in stories for c in s["choices"]]
    nli = pd.read_parquet(root / "tasks/nli/validation.parquet")
    texts += some(list(nli.premise), per_task) + some(list(nli.hypothesis), per_task // 2)
    texts += some(list(pd.read_csv(root / "tasks/entailment/validation.csv").sentence1), per_task // 2)
    return texts


def compare(name: str, tokenizer: Tokenizer, texts: list[str], expected: list[list[int]], show: int) -> None:
    """Print how many texts the exported tokenizer.json encodes to ``expected``, as transformers loads it."""
    from transformers import AutoTokenizer

    with tempfile.TemporaryDirectory() as d:
        (Path(d) / "tokenizer.json").write_text(hf_tokenizer_json(tokenizer), encoding="utf-8")
        (Path(d) / "tokenizer_config.json").write_text('{"tokenizer_class": "PreTrainedTokenizerFast"}')
        hf = AutoTokenizer.from_pretrained(d)
    pieces = {i: t for t, i in tokenizer.bpe.get_vocab().items()}
    same = differ = total = 0
    kinds: collections.Counter = collections.Counter()
    for ids, want in zip(hf(texts, add_special_tokens=False)["input_ids"], expected, strict=True):
        same += ids == want
        total += len(want)
        for op, a0, a1, b0, b1 in difflib.SequenceMatcher(a=want, b=ids, autojunk=False).get_opcodes():
            if op != "equal":
                differ += a1 - a0
                kinds[" ".join(pieces[i] for i in want[a0:a1]), " ".join(pieces[i] for i in ids[b0:b1])] += 1
    print(f"{name}: {same}/{len(texts)} texts ({same / len(texts):.1%}) the same ids; "
          f"{differ}/{total} tokens ({differ / total:.2%}) differ")  # fmt: skip
    for (want, got), n in kinds.most_common(show):
        print(f"    {n} x {want!r} -> {got!r}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_vocab = Path(__file__).resolve().parents[2] / "shared" / "reference" / "openai-vocab"
    parser.add_argument("--vocab", type=Path, default=default_vocab, help="OpenAI's vocab and golden.jsonl")
    parser.add_argument("--per-task", type=int, default=400, help="texts drawn from each sample source")
    parser.add_argument("--show", type=int, default=10, help="most common differences to print")
    args = parser.parse_args()
    root = Path(sample_data(tempfile.gettempdir() + "/gpt1-export-check"))
    texts = sample_texts(root, args.per_task)

    openai = load_tokenizer(args.vocab)
    golden = [json.loads(line) for line in (args.vocab / "golden.jsonl").open()]
    compare("openai vocab, golden.jsonl", openai, [g["text"] for g in golden], [g["ids"] for g in golden], args.show)
    compare("openai vocab, sample texts", openai, texts, openai.encode_batch(texts), args.show)

    from gpt1.text.tokenizer import train_bpe

    books = [(root / "books/train/northanger_abbey.txt").read_text()]
    trained = train_bpe(books, vocab_size=8192)
    compare("trained BPE (gpt1 pipeline), sample texts", trained, texts, trained.encode_batch(texts), args.show)


if __name__ == "__main__":
    main()
