"""The shared training helpers of course_utils.training."""
import threading

import pytest
import torch

from course_utils.training import fit_and_evaluate, in_parallel


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


def _regression_batches(seed=0):
    generator = torch.Generator().manual_seed(seed)
    while True:
        x = torch.randn(16, 4, generator=generator)
        yield x, 3.0 * x.sum(dim=1, keepdim=True)


def _squared_error(model, x, y):
    return (model(x) - y).pow(2).mean()


def test_fit_and_evaluate_records_scores_at_its_interval_and_the_last_step():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    modes = []

    def evaluate(trained):
        modes.append(trained.training)
        return -_squared_error(trained, *next(_regression_batches(99))).item()

    rates = []
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    history = fit_and_evaluate(model, 25, _regression_batches(), _squared_error, optimizer, evaluate=evaluate,
                               eval_every=10, learning_rate=lambda step: rates.append(step) or 0.05)
    assert history["step"] == [10, 20, 25] and len(history["accuracy"]) == 3 and len(history["loss"]) == 25
    assert rates == list(range(1, 26))
    assert modes == [False, False, False] and not model.training  # evaluated, and left, in eval mode
    assert history["loss"][-1] < history["loss"][0] / 10  # it trained
    assert history["accuracy"][-1] > history["accuracy"][0]
    assert history["seconds"] == sorted(history["seconds"]) and history["total_seconds"] >= history["seconds"][-1]


def test_fit_and_evaluate_stops_at_the_first_score_that_reaches_stop_at():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    scores = iter([0.2, 0.6, 0.95, 0.99])
    history = fit_and_evaluate(model, 100, _regression_batches(), _squared_error,
                               torch.optim.SGD(model.parameters(), lr=0.01),
                               evaluate=lambda trained: next(scores), eval_every=5, stop_at=0.9)
    assert history["step"] == [5, 10, 15] and history["accuracy"] == [0.2, 0.6, 0.95]
    assert len(history["loss"]) == 15


def test_fit_and_evaluate_without_evaluation_only_trains():
    model = torch.nn.Linear(4, 1)
    history = fit_and_evaluate(model, 7, _regression_batches(), _squared_error,
                               torch.optim.SGD(model.parameters(), lr=0.01), eval_every=2)
    assert history["step"] == [] and len(history["loss"]) == 7
