"""The pure functions behind notebook 12's demos: seeded, right, and honest about memory."""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from course_utils.widgets import long_context as demo


def test_rotary_score_is_flat_and_added_sinusoidal_is_not():
    shifts = np.arange(0, 80)
    for offset in (-5, 0, 3, 11):
        profile = demo.score_profile(offset, shifts)
        assert set(profile) == {"rotary", "sinusoidal (added)"}
        assert np.ptp(profile["rotary"]) < 1e-4 * max(1.0, np.abs(profile["rotary"]).max())
        assert np.ptp(profile["sinusoidal (added)"]) > 0.5


def test_rotary_score_changes_with_the_offset():
    shifts = np.arange(5, 10)
    scores = [demo.score_profile(offset, shifts)["rotary"][0] for offset in range(4)]
    assert len({round(s, 4) for s in scores}) == 4


def test_score_profile_is_seeded():
    a, b = demo.score_profile(2, range(10), seed=4), demo.score_profile(2, range(10), seed=4)
    assert all(np.array_equal(a[key], b[key]) for key in a)


def test_offset_recall_batch_targets_the_token_offset_back():
    x, y = demo.offset_recall_batch(3, 10, 7, 4, torch.Generator().manual_seed(0))
    assert x.shape == y.shape == (3, 10)
    assert (y[:, :4] == -100).all()
    assert torch.equal(y[:, 4:], x[:, :6])
    assert x.min() >= 0 and x.max() < 7


@pytest.mark.parametrize("kind", demo.POSITION_KINDS)
def test_position_model_is_causal_and_shaped(kind):
    torch.manual_seed(0)
    model = demo.PositionModel(kind, vocab_size=5, d_model=8, max_len=20).eval()
    x = torch.randint(0, 5, (2, 12))
    with torch.no_grad():
        logits = model(x)
        changed = x.clone()
        changed[:, 7:] = (changed[:, 7:] + 1) % 5
        assert logits.shape == (2, 12, 5)
        torch.testing.assert_close(model(changed)[:, :7], logits[:, :7])
    with pytest.raises(ValueError):
        model(torch.zeros(1, 21, dtype=torch.long))


def test_rotary_model_sees_only_offsets():
    """Without biases in the value path, a rotary model's output at position t for a sequence
    depends on relative positions only: shifting which positions are used changes nothing.
    Checked through the rotation helper: rotating q and k by positions p and p + s gives the
    same scores."""
    q, k = torch.randn(6, 8), torch.randn(6, 8)
    p = torch.arange(6)
    scores = demo._turn(q, p) @ demo._turn(k, p).T
    shifted = demo._turn(q, p + 37) @ demo._turn(k, p + 37).T
    torch.testing.assert_close(scores, shifted, atol=1e-4, rtol=1e-4)


def test_training_is_repeatable_and_learns():
    model_a, losses_a = demo.train_position_model("rotary", seed=1, steps=40)
    model_b, losses_b = demo.train_position_model("rotary", seed=1, steps=40)
    assert losses_a == losses_b
    assert losses_a[-1] < 0.5 * losses_a[0]
    assert demo.recall_accuracy(model_a, 16) == demo.recall_accuracy(model_b, 16)


def test_hand_written_adam_matches_torch_adam():
    torch.manual_seed(0)
    a = torch.nn.Linear(4, 3)
    b = torch.nn.Linear(4, 3)
    b.load_state_dict(a.state_dict())
    mine, theirs = demo._Adam(a.parameters(), lr=0.05), torch.optim.Adam(b.parameters(), lr=0.05)
    x = torch.randn(8, 4)
    for _ in range(5):
        for model, optimizer in ((a, mine), (b, theirs)):
            optimizer.zero_grad()
            model(x).pow(2).sum().backward()
            optimizer.step()
    for p, r in zip(a.parameters(), b.parameters()):
        torch.testing.assert_close(p, r)


def test_experiment_shape():
    result = demo.extrapolation_experiment(kinds=("learned",), seeds=(0,), test_lengths=(16, 32), steps=5)
    assert result.shape == (1, 1, 2)
    assert ((0 <= result) & (result <= 1)).all()


def _plain(q, k, v):
    return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v


def test_peak_counts_the_tensors_alive_together():
    def three_at_once():
        a = torch.ones(1000)       # 4000 bytes
        b = torch.ones(2000)       # 8000 bytes
        del a
        c = torch.ones(500)        # 2000 bytes: a is gone, so the peak stays 12000
        return b + c[0]            # 8000 more: b, c and the result alive -> 18000

    _, peak = demo.peak_tensor_bytes(three_at_once)
    assert peak == 18000


def test_peak_of_plain_attention_is_two_T_by_T_matrices_and_inputs_are_not_counted():
    for T in (64, 256):
        q, k, v = (torch.randn(T, 16) for _ in range(3))
        out, peak = demo.peak_tensor_bytes(_plain, q, k, v)
        torch.testing.assert_close(out, torch.nn.functional.scaled_dot_product_attention(q, k, v))
        assert peak == 2 * 4 * T * T


_RSS_SCRIPT = textwrap.dedent("""
    import math, sys, torch
    from course_utils.widgets import long_context as demo
    from course_utils.reference.long_context import blocked_attention

    def plain(q, k, v):
        return torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]), dim=-1) @ v

    fn = {"plain": plain, "blocked": lambda q, k, v: blocked_attention(q, k, v, block_size=128)}[sys.argv[1]]
    torch.set_num_threads(1)
    small = torch.randn(64, 64)
    demo.peak_tensor_bytes(fn, small, small, small)  # warm up: kernels, modules, the counting mode
    q, k, v = (torch.randn(4096, 64) for _ in range(3))

    def status(field):  # kB -> bytes
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

    # The peak so far (VmHWM) may be higher than what is resident now: reset it to the present.
    # (getrusage's ru_maxrss would not do: Linux carries it over from the parent through exec.)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = status("VmRSS")
    _, counted = demo.peak_tensor_bytes(fn, q, k, v)
    after = status("VmHWM")
    print(counted, after - before)
""")


def _counted_and_grown(kind):
    # glibc's malloc raises its mmap threshold as large blocks are freed, after which freed
    # memory may stay resident and new blocks land elsewhere: resident memory then overstates
    # what is alive. A fixed threshold returns every block of 64 KiB or more to the system.
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="65536", OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-c", _RSS_SCRIPT, kind], capture_output=True, text=True,
                            check=True, env=env)
    return tuple(map(int, result.stdout.split()))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_counted_peak_agrees_with_resident_memory():
    """The count is checked against the operating system, in fresh processes: while plain
    attention runs at T = 4096 the peak resident memory grows by the counted bytes (two 64 MiB
    matrices, give or take the allocator and other processes' pressure on memory), and while
    blocked attention runs by far less."""
    counted, grown = _counted_and_grown("plain")
    assert counted == 2 * 4 * 4096 * 4096
    assert 0.75 * counted <= grown <= 1.5 * counted, (counted, grown)
    blocked_counted, blocked_grown = _counted_and_grown("blocked")
    assert blocked_counted < counted / 10
    assert 0.75 * blocked_counted <= blocked_grown <= 2 * blocked_counted + 4 * 2**20, (blocked_counted, blocked_grown)


def test_rotation_helper_handles_negative_positions():
    x = torch.randn(3, 4)
    torch.testing.assert_close(demo._turn(demo._turn(x, torch.tensor([-2, 5, 0])), torch.tensor([2, -5, 0])), x,
                               atol=1e-5, rtol=1e-5)
