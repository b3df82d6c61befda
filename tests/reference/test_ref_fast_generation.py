"""The reference of notebook 11 against full recomputation and PyTorch."""
import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_utils.models.decoder_lm import DecoderLM
from course_utils.reference import fast_generation as ref

SETTINGS = settings(max_examples=30, deadline=None)


def random_model(seed, num_layers=2, num_heads=3):
    torch.manual_seed(seed)
    return DecoderLM(vocab_size=13, context=32, d_model=4 * num_heads, num_heads=num_heads,
                     num_layers=num_layers, d_ff=20).double().eval()


@pytest.mark.parametrize("seed, chunks", [(0, [3, 1, 1, 2, 1]), (1, [1, 1, 1, 1]), (2, [6]), (3, [2, 5, 1])])
@torch.no_grad()
def test_cached_logits_equal_full_recomputation(seed, chunks):
    model = random_model(seed, num_layers=1 + seed % 3, num_heads=1 + seed % 2)
    ids = torch.randint(0, 13, (3, sum(chunks)), generator=torch.Generator().manual_seed(seed))
    cache, logits, start = None, [], 0
    for n in chunks:
        before = None if cache is None else [(k.clone(), v.clone()) for k, v in cache]
        step, new_cache = ref.forward_with_cache(model, ids[:, start:start + n], cache)
        if cache is not None:  # the cache passed in is left alone
            assert all(torch.equal(k, k0) and torch.equal(v, v0) for (k, v), (k0, v0) in zip(cache, before))
        logits.append(step)
        start += n
        cache = new_cache
        for k, v in cache:
            assert k.shape == v.shape == (3, model.blocks[0].attn.num_heads, start, model.blocks[0].attn.head_dim)
    torch.testing.assert_close(torch.cat(logits, 1), model(ids), atol=1e-12, rtol=1e-12)


@torch.no_grad()
def test_cache_holds_the_keys_and_values_of_full_recomputation():
    model = random_model(4)
    ids = torch.randint(0, 13, (2, 5), generator=torch.Generator().manual_seed(0))
    keys = []
    hook = model.blocks[1].attn.k_proj.register_forward_hook(lambda m, i, o: keys.append(o))
    model(ids)
    hook.remove()
    _, cache = ref.forward_with_cache(model, ids)
    torch.testing.assert_close(cache[1][0], model.blocks[1].attn.split_heads(keys[0]))


def test_kv_cache_bytes_of_known_models():
    assert ref.kv_cache_bytes(32, 4096, 32, 32, 128, 2) == 2 * 2**30          # Llama-2-7B, 4096 tokens
    assert ref.kv_cache_bytes(32, 1, 32, 32, 128, 2) == 512 * 1024            # half a MiB per token
    assert ref.kv_cache_bytes(2, 10, 8, 2, 8, 2, batch_size=3) == 3840
    assert ref.predicted_cache_gib() == 3.0


@given(st.integers(1, 4), st.integers(1, 64), st.sampled_from([(8, 8), (8, 2), (8, 1)]), st.integers(1, 3))
@SETTINGS
def test_kv_cache_bytes_equals_the_bytes_of_a_real_cache(layers, T, heads, batch):
    """Against the reference cache's own tensors, with kv heads = heads (the model is MHA)."""
    num_heads, num_kv_heads = heads
    expected = ref.kv_cache_bytes(layers, T, num_heads, num_kv_heads, 4, 4, batch)
    tensors = [torch.zeros(batch, num_kv_heads, T, 4, dtype=torch.float32) for _ in range(2 * layers)]
    assert expected == sum(t.numel() * t.element_size() for t in tensors)


logit_rows = st.lists(st.sampled_from([-2.0, -1.0, 0.0, 0.5, 1.0, 3.0]), min_size=1, max_size=8)


@given(logit_rows, st.integers(1, 10), st.sampled_from([0.0, 0.5, 1.0, 2.0]))
@SETTINGS
def test_top_k_against_a_brute_force_definition(row, k, temperature):
    logits = torch.tensor(row, dtype=torch.float64)
    probs = ref.top_k_probs(logits, k, temperature)
    V = len(row)
    chosen = sorted(range(V), key=lambda i: (-row[i], i))[: (1 if temperature == 0 else min(k, V))]
    expected = torch.zeros(V, dtype=torch.float64)
    if temperature == 0:
        expected[chosen[0]] = 1.0
    else:
        expected[chosen] = torch.softmax(logits[chosen] / temperature, dim=0)
    torch.testing.assert_close(probs, expected)


@given(logit_rows, st.sampled_from([0.1, 0.25, 0.5, 0.75, 0.9, 1.0]))
@SETTINGS
def test_top_p_against_a_brute_force_definition(row, p):
    logits = torch.tensor(row, dtype=torch.float64)
    q = torch.softmax(logits, dim=0)
    order = sorted(range(len(row)), key=lambda i: (-row[i], i))
    kept = [i for n, i in enumerate(order) if n == 0 or float(q[order[:n]].sum()) < p - 1e-12]
    expected = torch.zeros(len(row), dtype=torch.float64)
    expected[kept] = q[kept] / q[kept].sum()
    torch.testing.assert_close(ref.top_p_probs(logits, p), expected)


def test_top_p_with_p_reached_exactly_and_batches():
    torch.testing.assert_close(ref.top_p_probs(torch.zeros(2, 4), 0.5), torch.tensor([[0.5, 0.5, 0, 0]] * 2))
    z = torch.randn(2, 3, 7, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(ref.top_p_probs(z, 1.0), torch.softmax(z, -1))
    torch.testing.assert_close(ref.top_k_probs(z, 7, 0.8), torch.softmax(z / 0.8, -1))
    assert ref.top_k_probs(z, 3).dtype == torch.float32


def test_top_k_then_top_p_chain_through_log_probabilities():
    z = torch.tensor([3.0, 2.0, 1.0, 0.0, -1.0], dtype=torch.float64)
    chained = ref.top_p_probs(torch.log(ref.top_k_probs(z, 3)), 0.7)
    assert (chained[3:] == 0).all() and chained.sum().item() == pytest.approx(1.0)
