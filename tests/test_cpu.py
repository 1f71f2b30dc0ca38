"""gpt1.cpu.settings.configure: nothing at import, the CPU settings applied by one call, the matmul kernels chosen by
(stubbed) measurement and cached per machine, measured again once quiet where measured under load; gpt1.cpu.probe's
statistic, its process and the load it records; gpt1.cpu.allocator's settings."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gpt1.cpu.allocator
import gpt1.cpu.kernels
import gpt1.cpu.probe
import gpt1.cpu.settings

FAST = {"onednn": 1.0, "torch": 2.0}
SLOW = {"onednn": 2.0, "torch": 1.0}
TIMINGS = {
    "train.forward": FAST,
    "train.input_grad": SLOW,
    "train.weight_grad": SLOW,
    "head.forward": FAST,
    "head.input_grad": SLOW,
    "head.weight_grad": {"onednn": 0.99, "torch": 1.0},
    "decode": {"onednn": 1.5, "row_blocks": 1.0, "column_blocks": 1.2, "torch": 2.0},
    "batched": {"onednn": 0.99, "torch": 1.0},
}
"""Stubbed measurements: oneDNN twice as fast for the forward products, half as fast for the input gradients, 1%
faster (within the margin: a tie) for the head's weight gradient and batched products; decoding's row blocks the
fastest of four."""
CHOSEN = {
    "train.forward": "onednn",
    "train.input_grad": "torch",
    "train.weight_grad": "torch",
    "head.forward": "onednn",
    "head.input_grad": "torch",
    "head.weight_grad": "torch",
    "decode": "row_blocks",
    "batched": "torch",
}


class Busy:
    """A stand-in for gpt1.cpu.probe.OtherWork: other processes took ``share`` of the CPUs while measuring."""

    def __init__(self, share: float | None) -> None:
        self.share = lambda: share


@pytest.fixture
def cpu(monkeypatch, tmp_path):
    """gpt1.cpu.settings with its cache under tmp_path, this process's memo empty, oneDNN available, the measurement
    stubbed (its calls counted), and gpt1.cpu.kernels's choices restored afterwards."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    for name in ("GPT1_CPU_MATMUL", "GPT1_SYSTEM_MALLOC", "THP_MEM_ALLOC_ENABLE", *gpt1.cpu.settings.ISA_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(gpt1.cpu.settings, "_MEASURED", {})
    monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", dict(gpt1.cpu.kernels.CPU_MATMULS))
    monkeypatch.setattr(gpt1.cpu.kernels, "onednn_available", lambda: True)
    monkeypatch.setattr(gpt1.cpu.settings, "tune_cpu_allocator", lambda: True)  # the process's allocator is left alone
    monkeypatch.setattr(gpt1.cpu.settings, "_load", lambda: 0.0)  # a quiet machine
    monkeypatch.setattr(gpt1.cpu.settings, "OtherWork", lambda: Busy(0.0))  # no other work while measuring
    calls = []
    monkeypatch.setattr(gpt1.cpu.settings, "measure_matmuls", lambda: calls.append(1) or TIMINGS)
    gpt1.cpu.settings.calls = calls
    yield gpt1.cpu.settings
    del gpt1.cpu.settings.calls


def _run(code: str, **env: str) -> str:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, env={**os.environ, **env}
    ).stdout


def test_importing_gpt1_changes_no_environment_warning_filter_or_allocator():
    """Beyond what importing torch itself does: os.environ, warnings.filters and gpt1.cpu.kernels's choices (all
    torch's)."""
    code = """if True:
        import os, warnings, torch
        env, filters = dict(os.environ), list(warnings.filters)
        import gpt1, gpt1.cpu.kernels, gpt1.cpu.settings, gpt1.cpu.allocator, gpt1.model
        assert dict(os.environ) == env, set(os.environ.items()) ^ set(env.items())
        assert warnings.filters == filters, [f for f in warnings.filters if f not in filters]
        print(sorted(set(gpt1.cpu.kernels.CPU_MATMULS.values())))"""
    assert _run(code).split() == ["['torch']"]


def test_forced_matmuls_are_not_measured(cpu, monkeypatch):
    for choice in ("onednn", "torch"):
        monkeypatch.setenv("GPT1_CPU_MATMUL", choice)
        settings = cpu.configure()
        assert settings.matmuls == dict.fromkeys(gpt1.cpu.kernels.KINDS, choice) == gpt1.cpu.kernels.CPU_MATMULS
        assert settings.source == f"GPT1_CPU_MATMUL={choice}" and settings.timings == {}
    assert cpu.calls == []
    monkeypatch.setattr(gpt1.cpu.kernels, "onednn_available", lambda: False)
    monkeypatch.setenv("GPT1_CPU_MATMUL", "onednn")
    assert cpu.configure().matmuls == dict.fromkeys(
        gpt1.cpu.kernels.KINDS, "torch"
    )  # no oneDNN: torch's whatever is asked


def test_auto_picks_the_measured_faster_kernel_per_kind_torch_on_a_tie(cpu, monkeypatch):
    settings = cpu.configure()
    assert settings.matmuls == CHOSEN
    assert gpt1.cpu.kernels.CPU_MATMULS == settings.matmuls and settings.source == "measured"
    assert settings.timings == TIMINGS and cpu.calls == [1]
    monkeypatch.setenv("GPT1_CPU_MATMUL", "mkl")
    with pytest.warns(UserWarning, match="GPT1_CPU_MATMUL='mkl' is not auto, onednn or torch: using auto"):
        assert cpu.configure().matmuls == settings.matmuls
    assert cpu.choose({"batched": {"onednn": 0.96, "torch": 1.0}}) == {"batched": "onednn"}  # beyond the 3% margin
    # the fastest of three, where it beats torch's by the margin; else torch's, however the other two compare
    assert cpu.choose({"decode": {"onednn": 0.9, "row_blocks": 0.8, "torch": 1.0}}) == {"decode": "row_blocks"}
    decode = {"onednn": 0.9, "row_blocks": 0.8, "column_blocks": 0.7, "torch": 1.0}
    assert cpu.choose({"decode": decode}) == {"decode": "column_blocks"}
    assert cpu.choose({"decode": {"onednn": 0.98, "row_blocks": 0.99, "torch": 1.0}}) == {"decode": "torch"}


def test_configure_is_idempotent_and_reads_the_environment_when_called(cpu, monkeypatch):
    first = cpu.configure()
    assert cpu.configure() == first and cpu.calls == [1]  # measured once per process
    monkeypatch.setenv("GPT1_CPU_MATMUL", "torch")
    assert cpu.configure().matmuls == dict.fromkeys(gpt1.cpu.kernels.KINDS, "torch")
    monkeypatch.delenv("GPT1_CPU_MATMUL")
    assert cpu.configure() == first and cpu.calls == [1]


def test_measurements_are_cached_per_machine_torch_thread_count_and_probes(cpu, monkeypatch, tmp_path):
    cpu.configure()
    path = tmp_path / "gpt1" / "cpu-matmuls.json"
    assert cpu.cache_path() == path
    entries = json.loads(path.read_text())
    entry = entries[cpu.machine_key()]
    assert entry["timings"] == TIMINGS and entry["choices"] == CHOSEN
    assert cpu.torch.__version__ in cpu.machine_key() and cpu.cpu_model() in cpu.machine_key()
    monkeypatch.setattr(cpu, "_MEASURED", {})  # a new process: read from the file, not measured
    assert cpu.configure().source == "cached" and cpu.calls == [1]
    monkeypatch.setattr(cpu.torch, "get_num_threads", lambda: 97)  # another thread count: measured anew
    assert cpu.configure().source == "measured" and cpu.calls == [1, 1]
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")  # an ISA override too
    cpu.configure()
    assert cpu.calls == [1, 1, 1] and len(json.loads(path.read_text())) == 3
    monkeypatch.setattr(cpu, "PROBES", cpu.PROBES + 1)  # other probes
    cpu.configure()
    assert cpu.calls == [1, 1, 1, 1] and len(json.loads(path.read_text())) == 4


def test_timings_taken_on_a_busy_machine_are_taken_again_once_it_is_quiet(cpu, monkeypatch, tmp_path):
    """The share of the CPUs other work took while measuring is cached with the timings; at or above BUSY (a
    quarter), the next start on a quiet machine (load average at most QUIET per core) measures again, and the quiet
    measurement replaces the busy one."""
    cores, path = os.cpu_count(), tmp_path / "gpt1" / "cpu-matmuls.json"
    monkeypatch.setattr(cpu, "OtherWork", lambda: Busy(0.5))  # another process held half of the CPUs while measuring
    monkeypatch.setattr(cpu, "_load", lambda: float(cores))
    cpu.configure()
    assert json.loads(path.read_text())[cpu.machine_key()]["busy"] == 0.5
    monkeypatch.setattr(cpu, "_MEASURED", {})
    monkeypatch.setattr(cpu, "_load", lambda: cpu.QUIET * cores + 0.5)  # still busy: the cached timings stand
    assert cpu.configure().source == "cached" and cpu.calls == [1]
    monkeypatch.setattr(cpu, "_MEASURED", {})
    monkeypatch.setattr(cpu, "_load", lambda: cpu.QUIET * cores)  # quiet now: measured again
    monkeypatch.setattr(cpu, "OtherWork", lambda: Busy(0.02))
    assert cpu.configure().source == "measured" and cpu.calls == [1, 1]
    assert json.loads(path.read_text())[cpu.machine_key()]["busy"] == 0.02  # the quiet measurement replaced it
    monkeypatch.setattr(cpu, "_MEASURED", {})
    assert cpu.configure().source == "cached" and cpu.calls == [1, 1]
    for busy in (cpu.BUSY - 0.01, None):  # measured on a machine busy by less than BUSY, or of unknown load: it stands
        entries = json.loads(path.read_text())
        entries[cpu.machine_key()]["busy"] = busy
        path.write_text(json.dumps(entries))
        monkeypatch.setattr(cpu, "_MEASURED", {})
        assert cpu.configure().source == "cached" and cpu.calls == [1, 1]


OLD_KINDS = {"train": FAST, "head": SLOW, "decode": FAST, "batched": FAST}
"""A cache entry of the kinds before the products were told apart: measured again."""


@pytest.mark.parametrize(
    "content",
    ["not json", "[]", '{"KEY": {"timings": {"train": {"onednn": 1}}}}', json.dumps({"KEY": {"timings": OLD_KINDS}})],
)
def test_an_unreadable_or_incomplete_cache_is_measured_again(cpu, monkeypatch, tmp_path, content):
    path = tmp_path / "gpt1" / "cpu-matmuls.json"
    path.parent.mkdir()
    path.write_text(content.replace("KEY", cpu.machine_key()))
    assert cpu.configure().source == "measured" and cpu.calls == [1]
    assert json.loads(path.read_text())[cpu.machine_key()]["timings"] == TIMINGS


def test_an_unwritable_cache_only_costs_a_measurement(cpu, monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    (tmp_path / "file").write_text("")  # a file where the cache directory would be
    assert cpu.configure().matmuls == CHOSEN


def test_the_real_measurement_times_every_kernel_of_every_kind_in_a_process_whose_threads_sleep(monkeypatch):
    """measure_matmuls (shrunk: one round after the untimed one) runs the probe in a process of its own, its threads
    waiting asleep (OMP_WAIT_POLICY=PASSIVE), on this process's thread count: a positive figure per kind and kernel,
    and this process's choices left as they were."""
    monkeypatch.setattr(gpt1.cpu.kernels, "CPU_MATMULS", dict.fromkeys(gpt1.cpu.kernels.KINDS, "torch"))
    if not gpt1.cpu.kernels.onednn_available():
        pytest.skip("no oneDNN linear on this CPU")
    runs = []
    real_run = subprocess.run
    monkeypatch.setattr(
        gpt1.cpu.probe.subprocess, "run", lambda cmd, **kw: runs.append((cmd, kw)) or real_run(cmd, **kw)
    )
    monkeypatch.setenv("GOMP_SPINCOUNT", "1000000")  # the user's, which would make the probe's threads spin
    timings = gpt1.cpu.probe.measure_matmuls(rounds=1)
    assert {kind: set(t) for kind, t in timings.items()} == {
        kind: set(k) for kind, k in gpt1.cpu.kernels.KERNELS.items()
    }
    assert all(seconds > 0 for t in timings.values() for seconds in t.values())
    assert gpt1.cpu.kernels.CPU_MATMULS == dict.fromkeys(gpt1.cpu.kernels.KINDS, "torch")
    ((cmd, kw),) = runs
    assert cmd[1:] == ["-m", "gpt1.cpu.probe", str(gpt1.cpu.probe.torch.get_num_threads()), "1"]
    assert kw["env"]["OMP_WAIT_POLICY"] == "PASSIVE" and "GOMP_SPINCOUNT" not in kw["env"]


def test_where_the_probes_process_fails_it_measures_in_this_one_and_says_so(monkeypatch):
    def fail(cmd, **kw):
        raise subprocess.CalledProcessError(1, cmd, stderr="Traceback ...\nImportError: no torch here\n")

    monkeypatch.setattr(gpt1.cpu.probe.subprocess, "run", fail)
    monkeypatch.setattr(gpt1.cpu.probe, "probe_matmuls", lambda rounds: {"rounds": rounds})
    with pytest.warns(
        UserWarning, match=r"probe's process failed \(ImportError: no torch here\): measuring in this one"
    ):
        assert gpt1.cpu.probe.measure_matmuls(rounds=2) == {"rounds": 2}


def test_each_kernel_gets_the_least_cpu_time_of_its_busiest_thread_over_rounds_taken_in_turn(monkeypatch):
    """interleaved: an untimed round, then each kernel once a round, the order reversed every other round; a
    kernel's figure is its least figure of any round (load only adds); a round's figure the CPU seconds of the main
    thread or of the others' mean, whichever is more."""
    clock = [0.0, 0.0]  # (this thread's CPU seconds, the process's)
    monkeypatch.setattr(gpt1.cpu.probe, "cpu_seconds", lambda: tuple(clock))
    monkeypatch.setattr(gpt1.cpu.probe.torch, "get_num_threads", lambda: 3)
    # per call of each kernel: (the main thread's seconds, the two others' together)
    costs = {"a": iter([(9, 9), (5, 4), (3, 10), (4, 2)]), "b": iter([(9, 9), (2, 2), (2, 2), (1, 8)])}
    order = []

    def probe(kernel: str) -> None:
        order.append(kernel)
        own, others = next(costs[kernel])
        clock[0] += own
        clock[1] += own + others

    assert gpt1.cpu.probe.interleaved(probe, ("a", "b"), rounds=3) == {
        "a": 4,
        "b": 2,
    }  # a: max(5, 2), max(3, 5), max(4, 1)
    assert order == ["b", "a", "a", "b", "b", "a", "a", "b"]


def test_the_other_work_is_the_machines_busy_time_less_this_process_and_its_childrens(monkeypatch):
    """OtherWork's share: (the machine's busy CPU seconds - this process's and its children's) / all CPU seconds."""
    readings = iter([(100.0, 400.0, 10.0), (160.0, 500.0, 30.0)])  # (busy, total, own) at the start and at share()
    monkeypatch.setattr(gpt1.cpu.probe, "_machine_and_own", lambda: next(readings))
    assert gpt1.cpu.probe.OtherWork().share() == pytest.approx((60 - 20) / 100)
    monkeypatch.setattr(gpt1.cpu.probe, "_machine_and_own", lambda: None)  # no /proc/stat
    assert gpt1.cpu.probe.OtherWork().share() is None
    monkeypatch.undo()
    share = gpt1.cpu.probe.OtherWork().share()  # the real counters: a share, or None off Linux
    assert share is None or 0.0 <= share <= 1.0


def test_the_allocator_keeps_freed_memory_and_asks_for_huge_pages_unless_opted_out(monkeypatch):
    calls = []
    monkeypatch.setattr(gpt1.cpu.allocator, "_tuned", False)  # (the fake tuning below must not outlive the test)
    monkeypatch.setattr(gpt1.cpu.allocator, "_mallopt", lambda: lambda param, value: calls.append((param, value)) or 1)
    monkeypatch.setattr(gpt1.cpu.allocator.sys, "platform", "linux")
    monkeypatch.delenv("GPT1_SYSTEM_MALLOC", raising=False)
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    assert gpt1.cpu.allocator.tune_cpu_allocator()
    assert calls == [(-3, 2**30), (-1, 2**31 - 1)]  # M_MMAP_THRESHOLD 1 GiB, M_TRIM_THRESHOLD: never trim
    assert gpt1.cpu.allocator.request_huge_pages() and os.environ["THP_MEM_ALLOC_ENABLE"] == "1"
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", "0")  # the user's value stands
    assert not gpt1.cpu.allocator.request_huge_pages() and os.environ["THP_MEM_ALLOC_ENABLE"] == "0"
    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE")
    monkeypatch.setenv("GPT1_SYSTEM_MALLOC", "1")
    calls.clear()
    assert not gpt1.cpu.allocator.tune_cpu_allocator() and calls == []
    assert not gpt1.cpu.allocator.request_huge_pages() and "THP_MEM_ALLOC_ENABLE" not in os.environ
    monkeypatch.delenv("GPT1_SYSTEM_MALLOC")
    monkeypatch.setattr(gpt1.cpu.allocator, "_mallopt", lambda: None)  # a libc without mallopt (musl)
    assert not gpt1.cpu.allocator.tune_cpu_allocator()


def test_large_blocks_go_back_while_a_table_converts_where_the_allocator_keeps_them(monkeypatch):
    calls = []
    monkeypatch.setattr(gpt1.cpu.allocator, "_mallopt", lambda: lambda param, value: calls.append((param, value)) or 1)
    monkeypatch.setattr(gpt1.cpu.allocator, "_tuned", False)
    with gpt1.cpu.allocator.large_blocks_returned():  # glibc's own settings: left alone
        assert calls == []
    monkeypatch.setattr(gpt1.cpu.allocator, "_tuned", True)
    with pytest.raises(KeyError), gpt1.cpu.allocator.large_blocks_returned():
        assert calls == [(-3, 1 << 20)]  # M_MMAP_THRESHOLD: blocks of 1 MB and more mapped apart
        raise KeyError
    assert calls == [(-3, 1 << 20), (-3, 2**30)]  # then as tuned, also after an error


@pytest.mark.skipif(
    not sys.platform.startswith("linux") or "[never]" in Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text()
    if Path("/sys/kernel/mm/transparent_hugepage/enabled").exists()
    else True,
    reason="needs Linux with THP not [never]",
)
def test_configure_after_importing_torch_still_gets_huge_pages():
    """torch reads THP_MEM_ALLOC_ENABLE at its first CPU allocation, not at import: configure() after `import
    torch`, before any allocation, still backs a large tensor with huge pages."""
    code = """if True:
        import torch, gpt1.cpu.settings
        gpt1.cpu.settings.configure()
        x = torch.ones(64 * 2**20 // 4)
        print(next(int(l.split()[1]) for l in open("/proc/self/smaps_rollup") if l.startswith("AnonHugePages")))"""
    env = {k: v for k, v in os.environ.items() if k not in ("THP_MEM_ALLOC_ENABLE", "GPT1_SYSTEM_MALLOC")}
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={**env, "GPT1_CPU_MATMUL": "torch"},
    ).stdout
    assert int(out) > 0
