"""The shared training helpers of course_utils.training."""
import threading

import pytest
import torch

from course_utils.training import in_parallel


def _small_training(seed):
    """A seeded little regression trained for a few steps: its final weights, to compare."""
    torch.manual_seed(seed)
    model = torch.nn.Linear(8, 3)
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    for _ in range(20):
        x = torch.randn(32, 8, generator=generator)
        loss = (model(x) - x[:, :3]).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.weight.detach().clone()


def test_in_parallel_gives_what_each_task_gives_alone_in_order():
    alone = [_small_training(seed) for seed in range(4)]
    together = in_parallel([lambda seed=seed: _small_training(seed) for seed in range(4)], workers=2)
    assert len(together) == 4
    for a, b in zip(alone, together):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert not torch.equal(together[0], together[1])  # the order is the tasks' order, not by chance equal


def test_in_parallel_uses_several_threads_with_one_torch_thread_each():
    seen = []

    def task():
        seen.append((threading.get_ident(), torch.get_num_threads()))
        threading.Event().wait(0.05)  # long enough for the second worker to pick up a task
        return len(seen)

    in_parallel([task] * 4, workers=2)
    assert {threads for _, threads in seen} == {1}
    assert len({ident for ident, _ in seen}) == 2


def test_in_parallel_raises_a_tasks_error_and_restores_the_thread_count():
    before = torch.get_num_threads()

    def broken():
        raise ValueError("this run diverged")

    with pytest.raises(ValueError, match="diverged"):
        in_parallel([lambda: 1, broken, lambda: 3])
    assert torch.get_num_threads() == before
