"""How ``gpt1 bench`` prints its results: a line per measure, each figure the median of its runs with its range."""

from __future__ import annotations

from typing import Any


def _ms(seconds: float, spread: list[float]) -> str:
    """A time in ms with its range: "<median> ms (<fastest>-<slowest>)"."""
    return f"{seconds * 1e3:,.0f} ms ({spread[0] * 1e3:,.0f}-{spread[1] * 1e3:,.0f})"


def matmul_lines(out: dict[str, Any]) -> list[str]:
    """The CPU matmul kernels in effect per kind, and every kernel's time where measured."""
    if "cpu_matmuls" not in out:
        return []
    line = f"CPU matmuls ({out['cpu_matmuls_source']}): " + ", ".join(f"{k} {v}" for k, v in out["cpu_matmuls"].items())
    times = out.get("cpu_matmul_times")
    if not times:
        return [line]
    each = "; ".join(
        f"{k} " + ", ".join(f"{kernel} {s * 1e3:.1f}" for kernel, s in t.items()) for k, t in times.items()
    )
    return [line, f"  measured now, ms (the busiest thread's CPU time, least of its rounds): {each}"]


def report(out: dict[str, Any]) -> str:
    """A readable summary of ``bench``'s results: each figure the median of its runs, its range in brackets."""
    tr, gen = out["train"], out["generate"]
    lines = [
        f"gpt1 bench: {out['model']} ({out['layers']} blocks, {out['params']:,} params, dropout {out['dropout']}), "
        f"{out['device']}, torch {out['torch']}, "
        f"{out['precision']}, LM loss {out['lm_loss']}"
        + (
            f", vocab padded to a multiple of {out['pad_vocab_to_multiple']}"
            if out["pad_vocab_to_multiple"] > 1
            else ""
        ),
        *matmul_lines(out),
        (f"peak {out['peak_flops'] / 1e9:,.0f} GFLOP/s" if out["peak_flops"] else "peak unknown")
        + f" ({out['peak_source']}); memory bandwidth "
        f"{out['memory_bandwidth'] / 1e9:.1f} GB/s -> decode bound {out['decode_bound_ms']:.1f} ms/token; "
        f"matrix-vector products stream {out['gemv_bandwidth'] / 1e9:.1f} GB/s -> "
        f"{out['decode_gemv_bound_ms']:.1f} ms/token",
        f"train step {out['batch']}x{out['seq']}: {_ms(tr['step_s'], tr['step_s_range'])}, "
        f"{tr['tokens_per_s']:,.0f} tokens/s, "
        + (f"MFU {tr['mfu']:.1%}" if tr["mfu"] is not None else "MFU unknown")
        + (f", peak memory {tr['peak_memory_gib']:.1f} GiB" if "peak_memory_gib" in tr else "")
        + (f" (compiled in {out['compile_s']:.0f} s)" if "compile_s" in out else ""),
        "generation, ms/token: "
        + ", ".join(
            f"{k.removesuffix('_ms_per_token')} {v:.1f} ({gen[k + '_range'][0]:.1f}-{gen[k + '_range'][1]:.1f})"
            for k, v in gen.items()
            if k.endswith("ms_per_token")
        )
        + f"; batch 1 at {gen['bound_fraction']:.0%} of the bandwidth bound, {gen['gemv_bound_fraction']:.0%} of the "
        "matrix-vector bound",
    ]
    if "multiple_choice" in out:
        mc = out["multiple_choice"]
        lines.append(
            f"multiple-choice step {'x'.join(map(str, mc['shape']))} ({mc['real_tokens']:,} real tokens): "
            f"{_ms(mc['step_s'], mc['step_s_range'])}; with share_context "
            f"{_ms(mc['shared_context_step_s'], mc['shared_context_step_s_range'])}"
        )
    if "multiple_choice_skipped" in out:
        lines.append(out["multiple_choice_skipped"])
    if "hf" in out:
        hf = out["hf"]
        lines.append(
            f"vs HF: train step {_ms(hf['train_step_s'], hf['train_step_s_range'])}, "
            f"{hf['train_tokens_per_s']:,.0f} tokens/s -> gpt1 {hf['speedup_train']:.2f}x; "
            f"generate batch 1 {hf['generate_batch1_ms_per_token']:.1f} ms/token (one run) -> gpt1 "
            f"{hf['speedup_generate']:.1f}x"
        )
        if "speedup_multiple_choice" in hf:
            lines.append(
                f"vs HF DoubleHeads: {_ms(hf['multiple_choice_step_s'], hf['multiple_choice_step_s_range'])} "
                f"-> gpt1 {hf['speedup_multiple_choice']:.2f}x "
                f"({hf['speedup_multiple_choice_shared_context']:.2f}x with share_context)"
            )
    if "nanogpt" in out:
        ng = out["nanogpt"]
        lines.append(
            f"vs nanoGPT ({ng['model']}: {ng['note']}): train step "
            f"{_ms(ng['train_step_s'], ng['train_step_s_range'])}, {ng['train_tokens_per_s']:,.0f} tokens/s "
            f"-> gpt1 {ng['speedup_train']:.2f}x"
        )
    return "\n".join(lines)
