"""Problem.from_tokens: next-token cross-entropy over sequences, chunked full-data evaluation
(slt.chunks) and the devinterp n_beta conversion (slt.tokens)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt
from slt.chunks import default_chunk_size, per_example_in_chunks
from slt.problem import Problem
from slt.validation import InputError

VOCABULARY, LENGTH, WIDTH, COUNT = 5, 6, 3, 7


def logits_fn(params, tokens):
    """A tiny causal model: embeddings, a running mean over the prefix, a readout."""
    hidden = jnp.tanh(params["embed"][tokens])                      # (b, T, D)
    prefix = jnp.cumsum(hidden, axis=1) / jnp.arange(1, tokens.shape[1] + 1)[:, None]
    return prefix @ params["out"] + params["bias"]                 # (b, T, V)


@pytest.fixture(scope="module")
def case():
    keys = jax.random.split(jax.random.key(0), 4)
    params = {"embed": jax.random.normal(keys[0], (VOCABULARY, WIDTH), jnp.float32),
              "out": jax.random.normal(keys[1], (WIDTH, VOCABULARY), jnp.float32),
              "bias": 0.1 * jax.random.normal(keys[2], (VOCABULARY,), jnp.float32)}
    tokens = np.asarray(jax.random.randint(keys[3], (COUNT, LENGTH), 0, VOCABULARY))
    mask = np.random.default_rng(0).random((COUNT, LENGTH)) < 0.7
    mask[:, 0] = False
    mask[:, -1] = True
    return params, tokens, mask


def reference_nll(params, tokens, mask):
    """NLL_i from the definition, in float64 NumPy: -log softmax(logits[t-1])[tokens[t]]."""
    logits = np.asarray(logits_fn(params, jnp.asarray(tokens)), np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_softmax = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    total = np.zeros(tokens.shape[0])
    for i in range(tokens.shape[0]):
        for t in range(1, tokens.shape[1]):
            if mask[i, t]:
                total[i] -= log_softmax[i, t - 1, tokens[i, t]]
    return total


def test_per_sequence_nll_is_the_masked_next_token_cross_entropy(case):
    params, tokens, mask = case
    for loss_mask, expected_mask in ((mask, mask), (None, np.arange(LENGTH) > 0)):
        problem = Problem.from_tokens(logits_fn, params, tokens, loss_mask)
        expected = reference_nll(params, tokens, np.broadcast_to(expected_mask, tokens.shape))
        np.testing.assert_allclose(-problem.loglik(params, problem.data), expected, rtol=1e-5)
        assert float(problem.loss(params)) == pytest.approx(expected.mean(), rel=1e-5)
        assert problem.n == COUNT and problem.dim == 2 * VOCABULARY * WIDTH + VOCABULARY


def test_chunked_evaluation_agrees_with_one_evaluation(case):
    """Chunks of 3 over 7 sequences (the last chunk overlaps): values, L_n and grad L_n
    against the per-sequence loss evaluated on all sequences at once."""
    params, tokens, mask = case
    chunked = Problem.from_tokens(logits_fn, params, tokens, mask, chunk_size=3)
    assert chunked.chunk_size == 3
    whole = jax.jit(slt.tokens.next_token_nll(logits_fn))

    def whole_loss(params):
        return jnp.mean(whole(params, chunked.data))

    np.testing.assert_allclose(-chunked.loglik(params, chunked.data),
                               whole(params, chunked.data), rtol=1e-6, atol=1e-6)
    assert float(chunked.loss(params)) == pytest.approx(float(whole_loss(params)), rel=1e-6)
    gradients = [jax.grad(loss)(params) for loss in (whole_loss, chunked.loss)]
    for leaf, other in zip(*map(jax.tree.leaves, gradients), strict=True):
        np.testing.assert_allclose(other, leaf, rtol=1e-5, atol=1e-6)


def test_chunks_cover_every_example_once():
    data = {"x": jnp.arange(10.0), "y": jnp.arange(10.0)[:, None] * jnp.ones(2)}

    def values(scale, batch):
        return scale * batch["x"] + batch["y"].sum(1)

    for chunk_size in (1, 3):  # 10 = 3 + 3 + 3 + 1: the last chunk overlaps by 2
        np.testing.assert_array_equal(per_example_in_chunks(values, 2.0, data, chunk_size),
                                      values(2.0, data))


def test_default_chunk_size_bounds_a_chunks_memory(case):
    params, tokens, _ = case
    data = {"tokens": jnp.zeros((1000, LENGTH), jnp.int32),
            "loss_mask": jnp.ones((1000, LENGTH), bool)}
    nll = slt.tokens.next_token_nll(logits_fn)
    per_example = LENGTH * VOCABULARY * 4          # at least the logits of one sequence
    chunk = default_chunk_size(nll, params, data, budget=100 * per_example)
    assert 1 <= chunk < 100                          # more intermediates than the logits alone
    assert default_chunk_size(nll, params, data) == 1000  # tiny: all at once


@pytest.mark.parametrize("change, message", [
    (lambda t, m: (t.astype(np.float32), m), "integer array"),
    (lambda t, m: (t[0], None), "shape \\(n, T\\)"),
    (lambda t, m: (t[:, :1], None), "T >= 2"),
    (lambda t, m: (t + VOCABULARY, m), "\\[0, 5\\)"),
    (lambda t, m: (t - VOCABULARY, m), "\\[0, V\\)"),
    (lambda t, m: (t, m[:, 1:]), "loss_mask must have the shape"),
    (lambda t, m: (t, m.astype(np.float32) * 0.5), "booleans"),
    (lambda t, m: (t, np.ones_like(m)), "column 0"),
    (lambda t, m: (t, np.zeros_like(m)), "no token"),
])
def test_bad_tokens_and_masks_are_named(case, change, message):
    params, tokens, mask = case
    with pytest.raises(InputError, match=message):
        Problem.from_tokens(logits_fn, params, *change(tokens, mask))


@pytest.mark.parametrize("bad_logits, message", [
    (lambda p, t: logits_fn(p, t)[:, :, 0], "shape \\(b, T, V\\)"),
    (lambda p, t: logits_fn(p, t)[:, :-1], "shape \\(b, T, V\\)"),
    (lambda p, t: p["embed"] @ t, "logits_fn\\(params, tokens\\) failed"),
    ("not a function", "logits_fn must be a function"),
])
def test_bad_logits_fn_is_named(case, bad_logits, message):
    params, tokens, _ = case
    with pytest.raises(InputError, match=message):
        Problem.from_tokens(bad_logits, params, tokens)


def test_devinterp_nbeta_conversion():
    """slt's nbeta L_n equals devinterp's n_beta times the mean per-token loss."""
    losses = np.random.default_rng(1).random((4, 9))          # per-token losses, T - 1 = 9
    n_beta = 300.0
    nbeta = slt.nbeta_from_devinterp(n_beta, tokens_per_sequence=9)
    assert nbeta * losses.sum(1).mean() == pytest.approx(n_beta * losses.mean())
    assert slt.nbeta_to_devinterp(nbeta, 9) == pytest.approx(n_beta)
    with pytest.raises(InputError, match="tokens_per_sequence"):
        slt.nbeta_from_devinterp(n_beta, 0)
