"""Notebook 13's figures, measured outside the notebook (figures only, never pass/fail):

* the bytes autograd keeps between forward and backward for one head of attention (d = 64,
  float32): naive attention against a Function that saves only (q, k, v, out, lse), at
  T = 256, 1024 and 4096, counted exactly with saved_tensors_hooks;
* the KV cache of a Mistral-7B-like model (32 layers, head size 128, float16, one sequence of
  32,768 tokens) for 1, 2, 4 and 8 key/value heads, without and with Mistral's window of 4096;
* the Llama-style block against notebook 08's, the notebook's comparison (200 steps, 3 seeds),
  then the same trained five times longer, to see whether the gap the notebook shows survives
  more training.
"""
import math
import time

import torch

from course_utils.models import llama_lm
from course_utils.reference import llm_attention as ref
from course_utils.widgets import llm_attention as demo

D, LENGTHS = 64, (256, 1024, 4096)
SEEDS = (0, 1, 2)


_OutAndLse = ref.OutAndLseAttention


def _naive(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def saved_bytes():
    print(f"13 llm_attention: bytes saved for backward, one head, d = {D}, float32")
    print(f"  {'T':>6} {'naive (MiB)':>12} {'out+lse (MiB)':>14} {'ratio':>6}")
    g = torch.Generator().manual_seed(0)
    for T in LENGTHS:
        q, k, v = (torch.randn(1, 1, T, D, generator=g, requires_grad=True) for _ in range(3))
        _, naive = demo.saved_tensor_bytes(_naive, q, k, v)
        _, ours = demo.saved_tensor_bytes(_OutAndLse.apply, q, k, v)
        (_OutAndLse.apply(q, k, v).sum()).backward()  # the backward runs on what was saved
        print(f"  {T:>6} {naive / 2**20:>12.2f} {ours / 2**20:>14.2f} {naive / ours:>6.1f}")


def cache_sizes():
    print("13 llm_attention: KV cache, Mistral-7B-like (32 layers, head 128, float16), T = 32,768")
    print(f"  {'h_kv':>5} {'full (GiB)':>11} {'window 4096 (GiB)':>18}")
    for h_kv in (1, 2, 4, 8):
        full = ref.kv_cache_gib(num_kv_heads=h_kv)
        windowed = ref.kv_cache_gib(num_kv_heads=h_kv, T=4096)
        print(f"  {h_kv:>5} {full:>11.3f} {windowed:>18.3f}")


def block_comparison():
    parts = llama_lm.choose_llama_parts(ref.rms_norm, ref.swiglu, ref.grouped_query_attention)
    for steps in (200, 1000):
        start = time.perf_counter()
        losses_08, losses_llama = llama_lm.compare_with_08(SEEDS, parts, steps=steps)
        print(f"13 llm_attention: held-out loss after {steps} steps, seeds {SEEDS} "
              f"({time.perf_counter() - start:.1f} s)")
        print(f"  08 block     {' '.join(f'{x:.3f}' for x in losses_08)}  mean {losses_08.mean():.3f}")
        print(f"  Llama-style  {' '.join(f'{x:.3f}' for x in losses_llama)}  mean {losses_llama.mean():.3f}")


def main():
    saved_bytes()
    cache_sizes()
    block_comparison()


if __name__ == "__main__":
    main()
