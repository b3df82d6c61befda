"""The pure functions behind notebook 11's demos: the static cache, sampling, counting, training.

No test depends on timing: time_per_token is only checked for its shapes and positivity."""
import numpy as np
import pytest
import torch

from course_utils.models.decoder_lm import DecoderLM
from course_utils.widgets import fast_generation as demo


def random_model(seed=0, **kwargs):
    torch.manual_seed(seed)
    config = dict(vocab_size=11, context=24, d_model=12, num_heads=3, num_layers=2, d_ff=20) | kwargs
    return DecoderLM(**config).double().eval()


@pytest.mark.parametrize("chunks", [[5, 1, 1, 3], [1, 1, 1], [8]])
def test_static_cache_equals_full_recomputation(chunks):
    model = random_model()
    ids = torch.randint(0, 11, (3, sum(chunks)), generator=torch.Generator().manual_seed(1))
    cache = demo.StaticCache(model, 3, sum(chunks), dtype=torch.float64)
    logits, start = [], 0
    for n in chunks:
        logits.append(demo.static_forward(model, ids[:, start:start + n], cache))
        start += n
    torch.testing.assert_close(torch.cat(logits, dim=1), model(ids).detach(), atol=1e-10, rtol=1e-10)
    assert cache.length == sum(chunks)
    assert cache.nbytes() == 2 * 2 * 3 * sum(chunks) * 12 * 8


def test_generation_is_the_same_with_and_without_the_cache():
    model = random_model(seed=2)
    prompt = torch.randint(0, 11, (2, 4), generator=torch.Generator().manual_seed(0))
    fast = demo.generate_ids(model, prompt, 12, use_cache=True)
    slow = demo.generate_ids(model, prompt, 12, use_cache=False)
    assert fast.shape == (2, 16)
    assert torch.equal(fast, slow)
    assert torch.equal(fast[:, :4], prompt)


def test_time_per_token_returns_one_positive_time_per_length():
    model = random_model(context=40)
    with_cache, without = demo.time_per_token(model, [4, 8, 16], repeats=1)
    assert with_cache.shape == without.shape == (3,)
    assert (with_cache > 0).all() and (without > 0).all()


def test_loglog_slope_recovers_a_power_law():
    xs = np.array([16, 32, 64, 128])
    assert demo.loglog_slope(xs, 3.0 * xs ** 1.5) == pytest.approx(1.5)


def test_cache_table_counts_mha_gqa_and_mqa():
    rows = {name: (per_token, gib) for name, per_token, gib in demo.cache_table(T=4096, bytes_per_value=2)}
    assert rows["Llama-2-7B (MHA)"] == (2 * 32 * 32 * 128, pytest.approx(2.0))
    assert rows["Llama-2-70B (GQA, 8 kv heads)"][0] == 2 * 80 * 8 * 128
    assert rows["Falcon-7B (MQA, 1 kv head)"][0] == 2 * 32 * 1 * 64


# ----------------------------------------------------------------------- the sampling distribution

def test_plain_distribution_is_the_softmax():
    z = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0]])
    e = np.exp(z)
    np.testing.assert_allclose(demo.next_token_distribution(z), e / e.sum(-1, keepdims=True))


def test_temperature_divides_the_logits_and_zero_is_greedy_with_the_first_maximum():
    z = np.array([1.0, 0.0])
    np.testing.assert_allclose(demo.next_token_distribution(z, temperature=0.5), np.exp([2, 0]) / np.exp([2, 0]).sum())
    np.testing.assert_array_equal(demo.next_token_distribution(np.array([1.0, 3.0, 0.0, 3.0]), temperature=0), [0, 1, 0, 0])


def test_top_k_keeps_exactly_k_with_ties_to_the_lower_index():
    probs = demo.next_token_distribution(np.array([2.0, 1.0, 1.0, 1.0, 0.0]), k=2)
    np.testing.assert_allclose(probs, [np.e / (np.e + 1), 1 / (np.e + 1), 0, 0, 0])
    np.testing.assert_allclose(demo.next_token_distribution(np.array([0.3, 0.1]), k=10),
                               demo.next_token_distribution(np.array([0.3, 0.1])))


def test_top_p_keeps_the_crossing_token_and_stops_when_p_is_reached_exactly():
    np.testing.assert_allclose(demo.next_token_distribution(np.log([0.5, 0.3, 0.2]), p=0.6), [0.625, 0.375, 0.0])
    np.testing.assert_allclose(demo.next_token_distribution(np.zeros(4), p=0.5), [0.5, 0.5, 0.0, 0.0])
    np.testing.assert_allclose(demo.next_token_distribution(np.array([4.0, 0.0, -1.0]), p=0.5), [1.0, 0.0, 0.0])


@pytest.mark.parametrize("temperature, k, p", [(1.0, None, 1.0), (0.7, 5, 0.9), (2.0, 3, 0.5), (0.0, 4, 0.3)])
def test_every_setting_gives_distributions(temperature, k, p):
    z = np.random.default_rng(0).normal(size=(4, 9)) * 3
    probs = demo.next_token_distribution(z, temperature, k, p)
    assert probs.shape == z.shape and (probs >= 0).all()
    np.testing.assert_allclose(probs.sum(-1), 1.0)
    if k is not None:
        assert ((probs > 0).sum(-1) <= k).all()


# ----------------------------------------------------------------------- the trained model

@pytest.fixture(scope="module")
def run():
    return demo.train_lm(steps=15, context=16, batch_size=8, d_model=16, num_heads=2, num_layers=1, d_ff=16)


def test_training_is_seeded_and_lowers_the_loss(run):
    again = demo.train_lm(steps=15, context=16, batch_size=8, d_model=16, num_heads=2, num_layers=1, d_ff=16)
    assert run.losses == again.losses
    assert run.losses[-1] < run.losses[0]
    assert 0 < demo.held_out_loss(run, n_batches=2) < np.log(len(run.vocab)) + 0.5


def test_next_token_probs_and_samples(run):
    probs = demo.next_token_probs(run, "the cat", temperature=0.8, k=5, p=0.9)
    assert probs.shape == (len(run.vocab),) and (probs > 0).sum() <= 5
    assert probs.sum() == pytest.approx(1.0)
    texts = demo.sample_text(run, "the cat", n_chars=6, temperature=1.0, n_samples=3, seed=1)
    assert len(texts) == 3 and all(len(t) == 6 and set(t) <= set(run.vocab.chars) for t in texts)
    assert texts == demo.sample_text(run, "the cat", n_chars=6, temperature=1.0, n_samples=3, seed=1)
    greedy = demo.sample_text(run, "the cat", n_chars=6, temperature=0.0, n_samples=2)
    assert greedy[0] == greedy[1]


def test_sampling_stops_at_the_context(run):
    short = demo.sample_text(run, "the cat", n_chars=100, n_samples=1)[0]
    assert len("the cat") + len(short) == run.model.context
    long = demo.sample_text(run, "the cat sat on the mat. a dog", n_chars=100, n_samples=1)[0]
    assert len(long) == 1  # the prompt keeps its last context - 1 characters
