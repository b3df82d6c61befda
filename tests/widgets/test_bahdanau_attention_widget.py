"""The model and pure functions behind notebook 04's demos: fast, seeded, and right."""
import numpy as np
import pytest
import torch

from course_utils.models import seq2seq
from course_utils.data import dates
from course_utils.widgets import bahdanau_attention as demo


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    """Tiny models: one thread is fastest (and on a busy machine, much faster)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def model(one_thread):
    """Briefly trained, so that beam search has real choices to make; seeded."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        net = seq2seq.Seq2Seq(attention=True)
        seq2seq.fit(net, 15, seed=0)
    return net


def test_alignment_rows_are_distributions(model):
    for text in demo.EXAMPLES:
        source, output, weights = demo.alignment(model, text)
        assert source == list(text.lower())
        assert weights.shape == (len(output), len(source))
        assert (weights >= 0).all()
        np.testing.assert_allclose(weights.sum(axis=1), 1.0, atol=1e-5)


def test_padding_gets_no_weight():
    with torch.random.fork_rng():
        torch.manual_seed(1)
        net = seq2seq.Seq2Seq()
    _, weights = seq2seq.greedy_translate(net, ["1 may 2000", "wednesday, september 30, 2048"])
    assert (weights[0, :, len("1 may 2000"):] == 0).all()


def test_candidates_sorted_and_width_one_is_greedy(model):
    text = "22 November 2026"
    found = demo.candidates(model, text, beam_width=4)
    assert len(found) == 4
    per_token = [c[2] for c in found]
    assert per_token == sorted(per_token, reverse=True)
    greedy, _ = seq2seq.greedy_translate(model, [text])
    assert demo.candidates(model, text, beam_width=1)[0][0] == greedy[0]


def test_beam_log_prob_is_the_teacher_forced_log_prob(model):
    text = "sun 22 nov 2026"
    iso, log_prob, ids = seq2seq.beam_translate(model, text, beam_width=3)[0]
    src, mask = dates.pad_sources([text])
    with torch.no_grad():
        logits = seq2seq.teacher_forced_logits(model, src, mask, torch.tensor([ids]))
    expected = torch.log_softmax(logits[0], dim=-1)[torch.arange(len(ids)), torch.tensor(ids)].sum()
    assert log_prob == pytest.approx(float(expected), abs=1e-4)


def test_beam_vs_greedy_shapes(model):
    greedy, beam = demo.beam_vs_greedy(model, list(demo.EXAMPLES[:3]), beam_width=3)
    assert greedy.shape == beam.shape == (3,)
    assert (greedy <= 0).all() and (beam <= 0).all()


def test_model_without_attention_has_no_weights():
    net = seq2seq.Seq2Seq(attention=False)
    guesses, weights = seq2seq.greedy_translate(net, ["1 may 2000"])
    assert weights is None and isinstance(guesses[0], str)
    with pytest.raises(ValueError, match="no attention"):
        demo.alignment(net, "1 may 2000")


def test_training_is_repeatable():
    def run():
        with torch.random.fork_rng():
            torch.manual_seed(0)
            net = seq2seq.Seq2Seq()
            history = seq2seq.fit(net, 8, seed=0, eval_pairs=dates.held_out_set()[:20], eval_every=4)
        return history["loss"], history["accuracy"]
    assert run() == run()


def test_the_fast_gru_passes_compute_what_torch_computes():
    with torch.random.fork_rng():
        torch.manual_seed(3)
        gru = torch.nn.GRU(5, 4, batch_first=True, bidirectional=True)
        cell = torch.nn.GRUCell(5, 4)
        inputs = torch.randn(3, 7, 5, requires_grad=True)
        state = torch.randn(3, 4)
        weights = torch.randn(3, 7, 8)
    # Both directions side by side: the module's states and last states, bit for bit ...
    states, last = seq2seq.bidirectional_gru(gru, inputs)
    expected, expected_last = gru(inputs)
    assert torch.equal(states, expected) and torch.equal(last, expected_last)
    # ... and the same gradients, up to the order of their sums.
    (expected * weights).sum().backward()
    wanted = [p.grad.clone() for p in gru.parameters()] + [inputs.grad.clone()]
    gru.zero_grad()
    inputs.grad = None
    (states * weights).sum().backward()
    for got, want in zip([p.grad for p in gru.parameters()] + [inputs.grad], wanted):
        torch.testing.assert_close(got, want)
    # One layer from a GRU cell's parameters: the cell applied step after step.
    with torch.no_grad():
        states, last = seq2seq.gru_layer(cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh, inputs, state)
        h, steps = state, []
        for t in range(inputs.shape[1]):
            h = cell(inputs[:, t], h)
            steps.append(h)
    torch.testing.assert_close(states, torch.stack(steps, dim=1))
    torch.testing.assert_close(last, h)


@pytest.mark.parametrize("attention", [True, False])
def test_teacher_forcing_is_the_decoder_step_at_every_position(attention):
    with torch.random.fork_rng():
        torch.manual_seed(4)
        net = seq2seq.Seq2Seq(attention=attention)
    src, mask, tgt = next(dates.training_batches(5, seed=1))
    memory, state = seq2seq._memory(net, src, mask)
    prev, expected = torch.full((5,), dates.BOS), []
    with torch.no_grad():
        for t in range(tgt.shape[1]):
            logits, state, _ = seq2seq.decoder_step(net, prev, state, memory)
            expected.append(logits)
            prev = tgt[:, t]
        torch.testing.assert_close(seq2seq.teacher_forced_logits(net, src, mask, tgt), torch.stack(expected, dim=1))


def test_greedy_log_probs_score_what_a_beam_of_one_finds(model):
    texts = list(demo.EXAMPLES) + [source for source, _ in dates.held_out_set()[:12]]
    expected = [demo.candidates(model, text, beam_width=1)[0][2] for text in texts]
    np.testing.assert_allclose(seq2seq.greedy_log_probs(model, texts), expected, atol=1e-5)


def test_toy_step_rows_are_distributions_and_independent():
    toy = seq2seq.ToyStep(vocab=5, seed=2)
    states = toy.initial.repeat(3, 1)
    log_probs, new_states = toy(torch.tensor([0, 2, 3]), states)
    assert log_probs.shape == (3, 5) and new_states.shape == (3, 4)
    np.testing.assert_allclose(log_probs.exp().sum(dim=1).numpy(), 1.0)
    alone, _ = toy(torch.tensor([2]), toy.initial)
    torch.testing.assert_close(alone[0], log_probs[1])
    assert (log_probs[:, 0] < -20).all()  # BOS is never emitted


def test_forbidden_names_exist():
    for entry in seq2seq.FORBIDDEN:
        module, name = entry.split(":")
        assert module == "course_utils.models.seq2seq" and callable(getattr(seq2seq, name))


def test_training_stops_at_the_target_and_reports_when_it_got_there():
    pairs = dates.held_out_set()[:20]
    # A target of 0 is reached at the first measurement: training stops there.
    _, history = demo.train_to(True, seed=0, eval_pairs=pairs, target=0.0, max_steps=6, eval_every=2)
    assert history["step"] == [2] and len(history["loss"]) == 2
    assert seq2seq.steps_to(history, 0.0) == 2
    # An unreachable target: it runs to the cap, and steps_to says it never got there.
    _, never = demo.train_to(False, seed=0, eval_pairs=pairs, target=1.01, max_steps=4, eval_every=2)
    assert never["step"] == [2, 4] and seq2seq.steps_to(never, 1.01) is None
    # target=None trains the full budget whatever the accuracy.
    _, full = demo.train_to(True, seed=0, eval_pairs=pairs, target=None, max_steps=4, eval_every=2)
    assert full["step"] == [2, 4]
    speed = demo.compare_speed({"a": {0: history}, "b": {0: never}}, target=0.0)
    assert speed["a"] == {"steps": [2], "seconds": [history["seconds"][0]]}
    assert demo.compare_speed({"b": {0: never}}, target=1.01)["b"] == {"steps": [None], "seconds": [None]}


def test_train_many_to_gives_what_train_to_gives_alone():
    from course_utils.data import dates
    pairs = dates.held_out_set()[:20]
    runs = [(True, 1, 12, 5, None), (False, 2, 8, 4, None), (True, 0, 30, 5, 0.0)]
    together = demo.train_many_to(runs, eval_pairs=pairs)
    for (attention, seed, steps, every, target), (model, history) in zip(runs, together):
        alone_model, alone = demo.train_to(attention, seed, pairs, target=target, max_steps=steps, eval_every=every)
        assert history["loss"] == alone["loss"] and history["step"] == alone["step"]
        assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), alone_model.state_dict().values()))
    assert together[2][1]["step"] == [5]  # its target stopped it at the first measurement
