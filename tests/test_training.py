"""The shared training helpers of course_utils.training."""
import os
import subprocess
import sys
import threading

import pytest
import torch

from course_utils import training
from course_utils.training import fit_and_evaluate, in_parallel

needs_fork = pytest.mark.skipif(not training._can_fork(), reason="no fork on this platform")


def _train_in_place(model, seed):
    """Train `model` in place (seeded) and return its losses and the model itself."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    losses = []
    for _ in range(20):
        x = torch.randn(32, 8, generator=generator)
        loss = (model(x) - x[:, :3]).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    print(f"trained seed {seed}")
    return {"losses": losses, "model": model, "pid": os.getpid()}


def _small_training(seed):
    """A seeded little regression trained for a few steps: its final weights, to compare.

    Its initial weights come from its own generator, not the global random numbers, which tasks
    running side by side on threads would draw from in turns."""
    model = torch.nn.Linear(8, 3)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.copy_(0.3 * torch.randn(parameter.shape, generator=generator))
    _train_in_place(model, seed)
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


def _fresh_models(n):
    models = []
    for seed in range(n):
        torch.manual_seed(seed)
        models.append(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3)))
    return models


@needs_fork
@pytest.mark.parametrize("processes", [True, False], ids=["forked workers", "threads"])
def test_in_parallel_trains_the_models_here_the_same_either_way(monkeypatch, capsys, processes):
    monkeypatch.setattr(training, "_can_fork", lambda: processes)
    alone = _fresh_models(3)
    expected = [_train_in_place(model, seed) for seed, model in enumerate(alone)]
    capsys.readouterr()
    models = _fresh_models(3)
    state = torch.random.get_rng_state()
    results = in_parallel([lambda m=m, s=s: _train_in_place(m, s) for s, m in enumerate(models)], workers=2,
                          models=models)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global random numbers as they were
    for model, same, result, wanted in zip(models, alone, results, expected):
        assert result["losses"] == wanted["losses"]
        assert result["model"] is model  # the module here, trained, not a copy
        for (name, ours), theirs in zip(model.state_dict().items(), same.state_dict().values()):
            assert torch.equal(ours, theirs), name
        assert not any(sub.training for sub in model.modules())  # the mode the task left it in
    assert ({result["pid"] for result in results} != {os.getpid()}) == processes
    printed = capsys.readouterr().out
    assert all(f"trained seed {seed}" in printed for seed in range(3))


@needs_fork
def test_in_parallel_without_models_keeps_to_threads():
    """Without `models` the runner cannot know what to bring back from a worker: it uses threads."""
    pids = in_parallel([os.getpid] * 3, workers=2)
    assert set(pids) == {os.getpid()}


@needs_fork
def test_a_failing_forked_task_raises_here_and_an_unpicklable_result_is_computed_here():
    def broken():
        raise ValueError("this run diverged")

    with pytest.raises(ValueError, match="diverged"):
        in_parallel([lambda: 1, broken, lambda: 3], models=[None] * 3)
    results = in_parallel([lambda: (os.getpid(), lambda: 0), lambda: (os.getpid(), 2)], models=[None, None])
    assert results[0][0] == os.getpid() and results[0][1]() == 0  # a lambda cannot be pickled
    assert results[1][0] != os.getpid() and results[1][1] == 2


@needs_fork
def test_an_interrupt_stops_the_forked_workers_at_once(tmp_path):
    """An interrupted cell does not wait for the runs under way: their workers are killed."""
    import signal

    def long_run(name):
        def task():
            (tmp_path / f"{name}.started").touch()
            threading.Event().wait(20)
            (tmp_path / f"{name}.finished").touch()
        return task

    def interrupt_once_both_started():
        while len(list(tmp_path.glob("*.started"))) < 2:
            threading.Event().wait(0.05)
        os.kill(os.getpid(), signal.SIGINT)

    # Ctrl-C in a notebook raises KeyboardInterrupt. A test started in the background by a shell
    # without job control inherits SIGINT ignored, and would wait the runs out: set the handler.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt_once_both_started, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            in_parallel([long_run("a"), long_run("b"), long_run("c")], models=[None] * 3)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not list(tmp_path.glob("*.finished"))  # killed, not waited for
    assert not (tmp_path / "c.started").exists()  # and the queued run never started


@needs_fork
def test_training_in_forked_workers_never_imports_torch_dynamo():
    # torch.optim would import torch._dynamo (about 1.1 s of CPU) in each worker or, before
    # course_utils.optim, in every kernel; a fresh process shows nobody imports it.
    code = ("import sys, torch; from course_utils import optim; from course_utils.training import in_parallel\n"
            "def train(model):\n"
            "    optimizer = optim.Adam(model.parameters(), lr=0.1)\n"
            "    for _ in range(3):\n"
            "        optimizer.zero_grad(); model(torch.ones(2, 3)).sum().backward(); optimizer.step()\n"
            "    return 'torch._dynamo' in sys.modules\n"
            "models = [torch.nn.Linear(3, 1), torch.nn.Linear(3, 1)]\n"
            "print(in_parallel([lambda m=m: train(m) for m in models], models=models), 'torch._dynamo' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[False, False] False"


@needs_fork
def test_in_parallel_falls_back_to_threads_when_no_process_can_start(monkeypatch):
    class NoProcesses:
        def __init__(self, *args, **kwargs):
            raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(training, "ProcessPoolExecutor", NoProcesses)
    models = _fresh_models(2)
    results = in_parallel([lambda m=m, s=s: _train_in_place(m, s) for s, m in enumerate(models)], models=models)
    assert {result["pid"] for result in results} == {os.getpid()}
    assert results[1]["model"] is models[1]


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


def test_in_parallel_forks_nothing_and_runs_one_at_a_time_while_graded(monkeypatch):
    """A grading container (half a CPU, 768 MB): forked copies of the kernel doubled 08's memory
    and got it OOM-killed. Under NBGRADER_EXECUTION the tasks run here, one at a time, and give
    the same results."""
    here = os.getpid()
    running, most = [0], [0]
    lock = threading.Lock()

    def task(i):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        torch.manual_seed(i)
        value = torch.randn(3).sum().item()
        with lock:
            running[0] -= 1
        return os.getpid(), value

    tasks = [lambda i=i: task(i) for i in range(4)]
    alone = [task(i)[1] for i in range(4)]
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    results = in_parallel(tasks, workers=2, models=[None] * 4)
    assert [pid for pid, _ in results] == [here] * 4 and most[0] == 1
    assert [value for _, value in results] == alone
