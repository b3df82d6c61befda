"""Notebook 13's figures, measured outside the notebook (figures only, never pass/fail):

* the bytes autograd keeps between forward and backward for one head of attention (d = 64,
  float32): naive attention against a Function that saves only (q, k, v, out, lse), at
  T = 256, 1024 and 4096, counted exactly with saved_tensors_hooks;
* the KV cache of a Mistral-7B-like model (32 layers, head size 128, float16, one sequence of
  32,768 tokens) for 1, 2, 4 and 8 key/value heads, without and with Mistral's window of 4096;
* the PEAK memory of one forward and backward pass (one head, d = 64, float32, causal) at
  T = 1024, 4096 and 16384: naive attention (autograd keeps and builds T x T matrices), the
  out-and-lse Function (saves no T x T matrix, but builds the scores whole in both passes) and
  the blocked Function of course_utils.reference.llm_attention (FlashAttention-2's schedule:
  no T x T matrix at all). Each (method, T) runs in a fresh Python process; the figure is how
  far its resident memory rose above where it stood before the pass (Linux's VmHWM, reset
  through /proc/self/clear_refs after a small warm-up pass; ru_maxrss where that is missing),
  with the wall and CPU seconds the pass took;
* the Llama-style block against notebook 08's, the notebook's comparison (200 steps, 3 seeds),
  then the same trained five times longer, to see whether the gap the notebook shows survives
  more training.
"""
import json
import math
import os
import resource
import subprocess
import sys
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


PEAK_LENGTHS = (1024, 4096, 16384)
PEAK_METHODS = ("naive", "out+lse", "blocked")

_PEAK_CASE = r"""
import json, math, resource, sys, time
import torch
torch.set_num_threads(1)
from course_utils.reference import llm_attention as ref
from course_utils.widgets import llm_attention as demo

method, T, d = sys.argv[1], int(sys.argv[2]), 64


def naive(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(d)
    s = s.masked_fill(~torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


class OutAndLseCausal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        out, lse = ref.attention_forward_with_lse(q, k, v, causal=True)
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        return ref.attention_backward(*ctx.saved_tensors, grad_out, causal=True)


attend = {"naive": naive, "out+lse": OutAndLseCausal.apply,
          "blocked": lambda q, k, v: ref.BlockedAttention.apply(q, k, v, True)}[method]


def make(T):
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 1, T, d, generator=g, requires_grad=True) for _ in range(3))
    return q, k, v, torch.randn(1, 1, T, d, generator=g)


def step(q, k, v, grad_out):
    return torch.autograd.grad(attend(q, k, v), (q, k, v), grad_out)


step(*make(256))  # load the kernels and warm the allocator on a small case first
inputs = make(T)
rusage_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
wall, cpu = time.perf_counter(), time.process_time()
_, peak = demo.peak_memory_bytes(step, *inputs)
wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
if peak is None:  # no /proc: the rise of the process's high-water mark (0 if it stayed below)
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rusage_before, 0)
print(json.dumps({"peak": peak, "wall": wall, "cpu": cpu}))
"""


def peak_case(method, T):
    """{"peak": bytes, "wall": s, "cpu": s} of one forward and backward pass, in a fresh process."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    done = subprocess.run([sys.executable, "-c", _PEAK_CASE, method, str(T)], cwd=root, capture_output=True,
                          text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["failed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def peak_memory():
    print("13 llm_attention: PEAK memory of one forward + backward pass, causal, one head, d = 64, float32 "
          "(a fresh process per case; resident memory's rise above its level before the pass)")
    print(f"  {'T':>6} " + " ".join(f"{m + ' (MiB)':>16}" for m in PEAK_METHODS)
          + "   " + " ".join(f"{m + ' s wall/CPU':>20}" for m in PEAK_METHODS))
    for T in PEAK_LENGTHS:
        cases = [peak_case(m, T) for m in PEAK_METHODS]
        memory = " ".join(f"{c['peak'] / 2**20:>16.1f}" if "peak" in c else f"{'failed':>16}" for c in cases)
        seconds = " ".join(f"{c['wall']:>10.2f}/{c['cpu']:<9.2f}" if "wall" in c else f"{'-':>20}" for c in cases)
        print(f"  {T:>6} {memory}   {seconds}")
        for m, c in zip(PEAK_METHODS, cases):
            if "error" in c:
                print(f"    {m} at T = {T} failed: {c['error']}")
    print(f"  for scale: one T x T float32 matrix is {4 * 1024**2 / 2**20:.0f}, {4 * 4096**2 / 2**20:.0f} and "
          f"{4 * 16384**2 / 2**20:.0f} MiB; q, k, v, out, dO, dq, dk, dv together 8 x 4 T d bytes = "
          + ", ".join(f"{32 * T * D / 2**20:.0f}" for T in PEAK_LENGTHS) + " MiB")


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
    peak_memory()
    cache_sizes()
    block_comparison()


if __name__ == "__main__":
    main()
