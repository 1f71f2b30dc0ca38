"""``gpt1 report`` on synthetic sweep directories (fake overrides.yaml and metrics.json): groups, medians and
spreads over seeds, a seeds-only sweep, failed jobs, jobs of several attempts, the paper's numbers, the plots, the
peak-memory line, and one-line errors. Fast: no training."""

import csv
import json
import re
from pathlib import Path

import pytest
import yaml

from gpt1.tools.report import main, report
from gpt1.tools.report_jobs import find_jobs
from gpt1.tools.report_rows import PAPER, group

FACTS = Path(__file__).resolve().parents[2] / "shared" / "reference" / "gpt1-facts.md"


def job(directory: Path, overrides: list[str], metrics: dict | None, config: dict | None = None) -> Path:
    """A fake job directory: .hydra/overrides.yaml (and config.yaml), and metrics.json unless ``metrics`` is None
    (a failed job)."""
    (directory / ".hydra").mkdir(parents=True)
    (directory / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(overrides))
    (directory / ".hydra" / "config.yaml").write_text(yaml.safe_dump(config or {"task": {"metrics": ["accuracy"]}}))
    if metrics is not None:
        (directory / "metrics.json").write_text(json.dumps(metrics))
    return directory


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.fixture
def aux_sweep(tmp_path: Path) -> Path:
    """aux_lm_weight 0 and 0.5 over seeds 1-3 on sst2; the job of (0.5, seed 3) failed."""
    sweep = tmp_path / "sweep"
    scores = {("0", 1): 0.70, ("0", 2): 0.80, ("0", 3): 0.74, ("0.5", 1): 0.60, ("0.5", 2): 0.66}
    for num, (weight, seed) in enumerate((w, s) for w in ("0", "0.5") for s in (1, 2, 3)):
        score = scores.get((weight, seed))
        metrics = (
            None
            if score is None
            else {
                "task": "sst2",
                "val/accuracy": score,
                "val/loss": 1 - score,
                "baseline/accuracy": 0.5,
                "steps": 10,
                "examples": {"train": 16},
            }
        )
        job(sweep / str(num), ["task=sst2", f"aux_lm_weight={weight}", f"seed={seed}"], metrics)
    return sweep


def test_rows_are_settings_with_the_median_and_spread_over_seeds(aux_sweep):
    result = report([aux_sweep])
    assert result["swept"] == ["aux_lm_weight"] and result["jobs"] == 6
    assert result["failed"] == [str(aux_sweep / "5")]
    rows = read_csv(aux_sweep / "report.csv")
    assert [r["aux_lm_weight"] for r in rows] == ["0", "0.5"]
    first, second = rows
    assert (first["n"], first["failed"], second["n"], second["failed"]) == ("3", "0", "2", "1")
    assert float(first["val/accuracy median"]) == pytest.approx(0.74)
    assert (float(first["val/accuracy min"]), float(first["val/accuracy max"])) == pytest.approx((0.70, 0.80))
    assert float(second["val/accuracy median"]) == pytest.approx(0.63)  # the median of two: their mean
    assert float(first["val/accuracy paper"]) == pytest.approx(0.913)  # SST-2, beside our score
    assert "val/loss paper" not in first and "baseline/accuracy paper" not in first

    text = (aux_sweep / "report.md").read_text()
    assert "| 0 | 3 | 0 | 0.74 [0.7, 0.8] | 0.913 |" in text
    assert "Fixed: `task=sst2`" in text
    assert "## Failed jobs" in text and f"`{aux_sweep / '5'}`: task=sst2, aux_lm_weight=0.5, seed=3" in text
    plots = [p.name for p in result["plots"]]
    assert plots == ["ablation-val_accuracy.png"]
    assert (aux_sweep / plots[0]).read_bytes().startswith(b"\x89PNG") and f"({plots[0]})" in text


def test_a_resumed_sweeps_jobs_are_one_setting_whether_resume_was_given_or_not(tmp_path):
    """A sweep started without resume=auto and resumed with it (docs/experiments.md): the jobs that ran in the second
    command have resume=auto among their overrides, which says how they ran, not which job they are: one row."""
    for seed, extra in ((1, []), (2, ["resume=auto"]), (3, ["resume=auto"])):
        job(tmp_path / "sweep" / f"seed={seed}", ["task=sst2", f"seed={seed}", *extra], {"val/accuracy": 0.7})
    result = report([tmp_path / "sweep"])
    assert result["swept"] == [] and result["jobs"] == 3
    (row,) = read_csv(tmp_path / "sweep" / "report.csv")
    assert row["n"] == "3" and "resume" not in row


def test_a_layers_transferred_sweep_is_a_curve_and_several_dirs_merge(tmp_path):
    for sweep, layers in (("a", (0, 6)), ("b", (12,))):
        for n in layers:
            for seed in (1, 2):
                job(
                    tmp_path / sweep / f"{n}-{seed}",
                    ["task=mnli", f"n_transfer={n}", f"seed={seed}"],
                    {
                        "task": "mnli",
                        "val/accuracy": 0.4 + n / 100 + seed / 1000,
                        "val_mismatched/accuracy": 0.4,
                        "baseline/accuracy": 0.35,
                    },
                )
    out = tmp_path / "out"
    result = report([tmp_path / "a", tmp_path / "b"], out)
    assert result["swept"] == ["n_transfer"] and [p.name for p in result["plots"]] == [
        "layers_transferred-val_accuracy.png"
    ]
    rows = read_csv(out / "report.csv")
    assert [r["n_transfer"] for r in rows] == ["0", "6", "12"]  # in numeric order
    assert float(rows[2]["val/accuracy median"]) == pytest.approx(0.5215)
    assert float(rows[0]["val_mismatched/accuracy paper"]) == pytest.approx(0.814)  # MNLI-mm
    assert float(rows[0]["val/accuracy paper"]) == pytest.approx(0.821)  # MNLI-m
    assert not (tmp_path / "a" / "report.md").exists() and (out / "report.md").is_file()


def test_zero_shot_jobs_are_curves_over_checkpoints(tmp_path):
    for task, base in (("sentiment", 0.5), ("cola", 0.0)):
        metric = "accuracy" if task == "sentiment" else "mcc"
        checkpoints = [
            {"path": f"run/step{s}.ckpt", "step": s, metric: base + s / 1000, "truncated": 0} for s in (100, 200, 300)
        ]
        job(
            tmp_path / "zs" / task,
            [f"task={task}"],
            {"task": task, "heuristic": "verbalizer", "checkpoints": checkpoints, f"baseline/{metric}": base},
            {"task": {"metrics": [metric]}},
        )
    result = report([tmp_path / "zs"])
    assert result["swept"] == ["task", "step"]
    assert sorted(p.name for p in result["plots"]) == ["zero_shot-zeroshot_accuracy.png", "zero_shot-zeroshot_mcc.png"]
    rows = read_csv(tmp_path / "zs" / "report.csv")
    assert [(r["task"], r["step"]) for r in rows] == [
        ("cola", "100"),
        ("cola", "200"),
        ("cola", "300"),
        ("sentiment", "100"),
        ("sentiment", "200"),
        ("sentiment", "300"),
    ]
    assert float(rows[4]["zeroshot/accuracy median"]) == pytest.approx(0.7)
    assert not any(k.endswith("paper") for k in rows[0])  # the paper gives curves, not numbers, for zero-shot


def test_a_single_run_directory_is_a_report_of_one_row(tmp_path, capsys):
    run = job(
        tmp_path / "run",
        ["trainer.max_steps=300"],
        {"val/ppl": 227.6, "val/loss": 5.4, "val_ppl": 227.6},
        {"trainer": {"max_steps": 300}},
    )
    result = main([str(run)])
    assert result["swept"] == [] and len(result["rows"]) == 1
    assert result["plots"] == []  # a plot of one run would compare it with nothing
    assert "| 1 | 0 | 227.6 | 5.4 |" in (run / "report.md").read_text()
    assert "1 jobs (0 failed), 1 row; swept: nothing: one setting" in capsys.readouterr().out


def test_a_seeds_only_sweep_is_one_setting_over_its_seeds(tmp_path, capsys):
    """gpt1 finetune -m seed=1,2,3: no parameter but the seed differs. Named as such (it read "swept: nothing, 1
    rows", its plot named ablation-...), its table the one setting's median and spread over the seeds, its plot the
    seeds of that setting; and, as every command's, the last line is the peak memory."""
    for seed, score in ((1, 0.70), (2, 0.80), (3, 0.74)):
        job(tmp_path / "seeds" / str(seed), ["task=sst2", f"seed={seed}"], {"task": "sst2", "val/accuracy": score})
    result = main([str(tmp_path / "seeds")])
    out, err = capsys.readouterr()
    assert out.splitlines()[0] == "3 jobs (0 failed), 1 row; swept: the seed only (seeds 1, 2, 3): one setting"
    assert err.splitlines()[-1].startswith("peak memory: host ") and len(err.splitlines()) == 1
    assert [p.name for p in result["plots"]] == ["seeds-val_accuracy.png"] and result["sweep"].startswith("the seed")
    text = (tmp_path / "seeds" / "report.md").read_text()
    assert "Swept: the seed only (seeds 1, 2, 3): one setting." in text
    assert (
        "| n | failed | val/accuracy | val/accuracy (paper) |" in text and "| 3 | 0 | 0.74 [0.7, 0.8] | 0.913 |" in text
    )
    (ax,) = figures([tmp_path / "seeds"]).values()
    assert ax.get_title().startswith("val/accuracy of one setting over 3 seeds: every run (point), median (line)")
    assert [t.get_text() for t in ax.get_xticklabels()] == ["the one setting"]


def test_a_job_of_several_attempts_says_so_with_each_attempts_outcome(aux_sweep, capsys):
    """A job stopped by SIGTERM and resumed has two attempts in its provenance.json: the table counts each job's
    attempts (a row's in seed order), a list gives each attempt's outcome, as does the console."""
    stopped = {"outcome": "stopped", "exit_status": 143}
    (aux_sweep / "1" / "provenance.json").write_text(json.dumps({"attempts": [stopped, {"outcome": "finished"}]}))
    for n in (0, 2, 3, 4, 5):  # one attempt each (the failed job's killed outright: no outcome)
        attempt = {"outcome": "finished"} if n != 5 else {}
        (aux_sweep / str(n) / "provenance.json").write_text(json.dumps({"attempts": [attempt]}))
    result = main([str(aux_sweep)])
    said = f"{aux_sweep / '1'}: 2 attempts: stopped (exit status 143), then finished"
    assert said in capsys.readouterr().out.splitlines()
    assert result["attempts"] == {str(aux_sweep / "1"): ["stopped (exit status 143)", "finished"]}
    text = (aux_sweep / "report.md").read_text()
    assert "| aux_lm_weight | n | failed | attempts | val/accuracy |" in text
    assert "| 0 | 3 | 0 | 1, 2, 1 | 0.74 [0.7, 0.8] |" in text and "| 0.5 | 2 | 1 | 1, 1, 1 |" in text
    assert f"## Jobs of several attempts (their provenance.json)\n\n- `{said.replace(': 2', '`: 2', 1)}" in text
    assert [row["attempts"] for row in read_csv(aux_sweep / "report.csv")] == ["1, 2, 1", "1, 1, 1"]
    (aux_sweep / "1" / "provenance.json").unlink()  # one attempt each again: no column, no list
    report([aux_sweep])
    text = (aux_sweep / "report.md").read_text()
    assert "| attempts |" not in text and "several attempts" not in text
    assert "attempts" not in read_csv(aux_sweep / "report.csv")[0]


@pytest.mark.parametrize("case", ["missing", "empty", "bad_json"])
def test_bad_input_is_one_line_and_exit_status_2(tmp_path, capsys, case):
    target = tmp_path / "sweep"
    if case == "empty":
        target.mkdir()
    if case == "bad_json":
        job(target / "0", ["seed=1"], {})
        (target / "0" / "metrics.json").write_text("{not json")
    with pytest.raises(SystemExit) as exit_info:
        main([str(target)])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {target}")
    assert {"missing": "no such directory", "empty": "no jobs found", "bad_json": "not valid JSON"}[case] in err


@pytest.mark.skipif(not FACTS.is_file(), reason="no ../shared/reference/gpt1-facts.md beside the checkout")
def test_the_paper_numbers_are_those_of_the_facts_file():
    table = dict(re.findall(r"^\| ([^|]+?) \| [^|]+ \| ([\d. /]+) \|$", FACTS.read_text(), re.M))
    facts = {name: [float(v) for v in value.split("/")] for name, value in table.items()}
    assert facts["MNLI-m / MNLI-mm"] == [PAPER["mnli"]["/accuracy"], PAPER["mnli"]["_mismatched/accuracy"]]
    assert facts["RACE-m / RACE-h / RACE"] == [PAPER[t]["/accuracy"] for t in ("race_middle", "race_high", "race")]
    for name, task, key in [
        ("SNLI", "snli", "/accuracy"),
        ("SciTail", "scitail", "/accuracy"),
        ("QNLI", "qnli", "/accuracy"),
        ("RTE", "rte", "/accuracy"),
        ("Story Cloze", "story_cloze", "/accuracy"),
        ("CoLA", "cola", "/mcc"),
        ("SST-2", "sst2", "/accuracy"),
        ("MRPC", "mrpc", "/f1"),
        ("STS-B", "stsb", "/pearson"),
        ("QQP", "qqp", "/f1"),
    ]:
        assert facts[name] == [PAPER[task][key]], name


# -- the plots show the differences they are drawn for (issue 27) -------------------------------------------------


def figures(dirs: list[Path]) -> dict[str, object]:
    """main metric -> its plot's axes, as ``report`` draws them (unsaved)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    from gpt1.tools.report_plots import figure

    swept, _, rows = group(find_jobs(dirs))
    axes = {}
    for metric in dict.fromkeys(r.main for row in rows for r in row.done if r.main):
        fig, _ = figure(plt, swept, [row for row in rows if any(r.main == metric for r in row.done)], metric)
        axes[metric] = fig.axes[0]
        plt.close(fig)
    return axes


def test_ablation_plots_show_every_run_span_the_data_and_the_title_says_what_was_aggregated(aux_sweep):
    ax = figures([aux_sweep])["val/accuracy"]
    low, high = ax.get_ylim()
    assert 0.4 < low < 0.5 and 0.913 < high < 1  # seeds 0.6-0.8, baseline 0.5, paper 0.913: not from 0
    assert (
        ax.get_title() == "val/accuracy per setting: every run (point), median over 2-3 seeds (line), min-max (whisker)"
    )
    from matplotlib.collections import PathCollection

    points = sorted(float(y) for c in ax.collections if isinstance(c, PathCollection) for _, y in c.get_offsets())
    done = sorted(v for row in group(find_jobs([aux_sweep]))[2] for v in row.values("val/accuracy"))
    assert points == pytest.approx(done) and not ax.patches  # a point per run, no bars (whose floor is not 0)


def test_one_run_per_setting_says_there_is_no_spread(tmp_path):
    for i, value in enumerate((0.5907, 0.5852)):
        job(
            tmp_path / "one" / str(i),
            ["task=sentiment", f"aux_lm_weight={i / 2}"],
            {"task": "sentiment", "val/accuracy": value},
        )
    ax = figures([tmp_path / "one"])["val/accuracy"]
    assert "one run each" in ax.get_title() and "no spread" in ax.get_title() and "seed=1,2,3" in ax.get_title()
    assert not ax.patches and len([c for c in ax.collections if len(c.get_offsets()) == 1]) == 2  # 2 points


def test_zero_shot_baselines_are_per_task_in_the_tasks_colour_and_no_seeds_are_claimed(tmp_path):
    for task, base in (("sentiment", 0.5), ("story", 0.25)):
        checkpoints = [{"path": f"step{s}.ckpt", "step": s, "accuracy": base + s / 1000} for s in (100, 200)]
        job(
            tmp_path / "zs" / task,
            [f"task={task}"],
            {"task": task, "checkpoints": checkpoints, "baseline/accuracy": base},
        )
    ax = figures([tmp_path / "zs"])["zeroshot/accuracy"]
    legend = {t.get_text(): h for t, h in zip(ax.get_legend().get_texts(), ax.get_legend().legend_handles)}
    for task in ("sentiment", "story"):
        curve, baseline = legend[f"task={task}"], legend[f"task={task}: baseline (majority / mean)"]
        assert curve.get_color() == baseline.get_color()
    assert legend["task=sentiment"].get_color() != legend["task=story"].get_color()
    assert "seeds" in ax.get_title() and "median" not in ax.get_title()  # "no seeds to aggregate"


def test_an_optuna_sweeps_floats_are_rounded_in_the_plot_and_the_table(tmp_path):
    lrs = ["1.9182157424526116e-05", "6.250000000000001e-05", "0.00012345678901234567"]
    for i, lr in enumerate(lrs):
        job(
            tmp_path / "optuna" / str(i), ["task=rte", f"optim.lr={lr}"], {"task": "rte", "val/accuracy": 0.5 + i / 100}
        )
    ax = figures([tmp_path / "optuna"])["val/accuracy"]
    assert [t.get_text() for t in ax.get_xticklabels()] == [
        "optim.lr=1.918e-05",
        "optim.lr=6.25e-05",
        "optim.lr=0.0001235",
    ]
    report([tmp_path / "optuna"])
    table = (tmp_path / "optuna" / "report.md").read_text()
    assert "| 1.918e-05 | 1 | 0 | 0.5 |" in table and "1.9182157424526116e-05" not in table
    assert [r["optim.lr"] for r in read_csv(tmp_path / "optuna" / "report.csv")] == lrs  # in full


def test_what_ran_the_jobs_is_a_column_where_it_differs_and_a_line_where_it_does_not(tmp_path):
    """provenance.json (gpt1/core/provenance.py): the host and torch differ between the seeds of a setting (both shown
    in its cell), gpt1's commit is the same for every job (a line), and a job resumed on another commit shows both."""

    def attempt(torch: str, host: str, commit: str = "a" * 40) -> dict:
        machine = {"host": host, "cpu": "EPYC", "python": "3.11.7", "gpu": None, "gpus": 0}
        run = {"processes": 2, "nodes": 1, "precision": "32-true", "kernels": {"cpu_matmuls": {"decode": "torch"}}}
        code = {"version": "0.1.0", "commit": commit, "dirty": False}
        return {"gpt1": code, "packages": {"torch": torch}, "machine": machine, "run": run, "outcome": "finished"}

    runs = {1: [attempt("2.13.0", "node1")], 2: [attempt("2.13.0", "node2")], 3: [attempt("2.12.0", "node1")]}
    for seed, attempts in runs.items():
        run = job(tmp_path / "sweep" / str(seed), ["task=sst2", f"seed={seed}"], {"task": "sst2", "val/accuracy": 0.7})
        (run / "provenance.json").write_text(json.dumps({"attempts": attempts}))
    result = report([tmp_path / "sweep"])
    assert result["ran_with"] == ["torch", "host"]
    text = (tmp_path / "sweep" / "report.md").read_text()
    assert "| torch | host | n | failed | val/accuracy |" in text
    assert "| 2.12.0 / 2.13.0 | node1 / node2 | 3 | 0 | 0.7 |" in text
    assert (
        "Ran with (every job): gpt1 0.1.0 aaaaaaaaaa; python 3.11.7; cpu EPYC; gpu none; processes 2 (1 node);" in text
    )
    (row,) = read_csv(tmp_path / "sweep" / "report.csv")
    assert (row["torch"], row["host"]) == ("2.12.0 / 2.13.0", "node1 / node2")

    moved = tmp_path / "sweep" / "3" / "provenance.json"  # resumed on another commit
    moved.write_text(json.dumps({"attempts": [*runs[3], attempt("2.12.0", "node1", commit="b" * 40)]}))
    assert "0.1.0 aaaaaaaaaa -> 0.1.0 bbbbbbbbbb" in find_jobs([tmp_path / "sweep"])[2].ran["gpt1"]
