"""The attention-only transformer, its induction task and its head scores.

The forward pass is checked against an independent numpy implementation (loops over heads and
positions, no einsum), and Problem.from_tokens's per-sequence NLL on it against the same
numpy logits; the scores on attention patterns built by hand, whose scores are known exactly.
"""

import jax
import jax.flatten_util
import numpy as np
import pytest

import slt
from slt.models import (
    bigram_transitions,
    head_scores,
    induction_sequences,
    transformer_forward,
    transformer_init,
)
from slt.validation import InputError

V, T, L, H, D, E = 7, 6, 2, 3, 5, 4  # tiny: every size different, so a swapped axis fails
# one compiled program per input shape instead of one per operation (op-by-op dispatch)
forward = jax.jit(transformer_forward, static_argnames="return_patterns")


@pytest.fixture(scope="module")
def params():
    params = transformer_init(jax.random.key(0), V, T, num_layers=L, num_heads=H, d_model=D,
                              d_head=E)
    # non-zero biases, so that a bias on the wrong axis shows
    flat, unravel = jax.flatten_util.ravel_pytree(params)
    return unravel(flat + 0.1 * jax.random.normal(jax.random.key(1), flat.shape))


@pytest.fixture(scope="module")
def tokens():
    return jax.random.randint(jax.random.key(2), (3, T), 0, V)


def numpy_forward(params, tokens):
    """The forward pass written out with loops: logits (b, T, V) and patterns (L, b, H, T, T)."""
    params = jax.tree.map(np.asarray, params)
    tokens = np.asarray(tokens)
    b, length = tokens.shape
    x = params["embed"][tokens] + params["pos_embed"][:length]
    patterns = np.zeros((len(params["blocks"]), b, H, length, length))
    for index, block in enumerate(params["blocks"]):
        out = x + block["b_O"]
        for i in range(b):
            for h in range(H):
                q = x[i] @ block["W_Q"][h] + block["b_Q"][h]
                k = x[i] @ block["W_K"][h] + block["b_K"][h]
                v = x[i] @ block["W_V"][h] + block["b_V"][h]
                for t in range(length):
                    scores = np.array([q[t] @ k[s] for s in range(t + 1)]) / np.sqrt(E)
                    weights = np.exp(scores - scores.max())
                    weights /= weights.sum()
                    patterns[index, i, h, t, : t + 1] = weights
                    out[i, t] += (weights @ v[: t + 1]) @ block["W_O"][h]
        x = out
    return x @ params["unembed"] + params["b_U"], patterns


def test_parameter_shapes_and_count(params):
    block = params["blocks"][0]
    assert {name: block[name].shape for name in block} == {
        "W_Q": (H, D, E), "W_K": (H, D, E), "W_V": (H, D, E), "W_O": (H, E, D),
        "b_Q": (H, E), "b_K": (H, E), "b_V": (H, E), "b_O": (D,)}
    assert params["embed"].shape == (V, D) and params["pos_embed"].shape == (T, D)
    assert params["unembed"].shape == (D, V) and params["b_U"].shape == (V,)
    assert len(params["blocks"]) == L
    count = sum(leaf.size for leaf in jax.tree.leaves(params))
    assert count == V * D + T * D + L * (4 * H * D * E + 3 * H * E + D) + D * V + V


def test_initial_scales():
    """N(0, 1 / fan_in) matrices and zero biases, checked on a wide model (sd to 3%: each
    matrix has over 4000 entries, so the sample sd is within 1.1% of its own sd at 1 se)."""
    params = transformer_init(jax.random.key(3), 64, 64, num_layers=1, num_heads=8,
                              d_model=64, d_head=16)
    block = params["blocks"][0]
    for leaf, fan_in in ((params["embed"], 1), (block["W_Q"], 64), (block["W_O"], 128),
                         (params["unembed"], 64)):
        assert np.std(leaf) * np.sqrt(fan_in) == pytest.approx(1.0, rel=0.03)
    assert not np.any(block["b_Q"]) and not np.any(params["b_U"])


def test_forward_matches_loops(params, tokens):
    logits, patterns = forward(params, tokens, return_patterns=True)
    expected_logits, expected_patterns = numpy_forward(params, tokens)
    assert logits.shape == (3, T, V) and patterns.shape == (L, 3, H, T, T)
    np.testing.assert_allclose(logits, expected_logits, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(patterns, expected_patterns, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(forward(params, tokens), logits)


def test_shorter_sequences_use_the_first_positions(params, tokens):
    np.testing.assert_allclose(forward(params, tokens[:, :4]),
                               numpy_forward(params, tokens[:, :4])[0], rtol=1e-10, atol=1e-10)


def test_causal(params, tokens):
    """Changing token k changes no logits or patterns at positions before k."""
    logits, patterns = forward(params, tokens, return_patterns=True)
    for k in range(1, T):
        changed = tokens.at[:, k].set((tokens[:, k] + 1) % V)
        new_logits, new_patterns = forward(params, changed, return_patterns=True)
        np.testing.assert_array_equal(new_logits[:, :k], logits[:, :k])
        np.testing.assert_array_equal(new_patterns[:, :, :, :k], patterns[:, :, :, :k])
        assert not np.allclose(new_logits[:, k], logits[:, k])


def test_problem_nll_against_numpy(params, tokens):
    """Problem.from_tokens on the transformer: NLL_i = sum over counted target positions t of
    -log softmax(logits[i, t - 1])[tokens[i, t]], from the numpy logits."""
    mask = np.zeros((3, T), bool)
    mask[:, 2:] = True
    mask[1, 4] = False
    problem = slt.Problem.from_tokens(transformer_forward, params, tokens, mask)
    logits = numpy_forward(params, tokens)[0]
    log_p = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    targets = np.asarray(tokens)
    expected = [-sum(log_p[i, t - 1, targets[i, t]] for t in range(1, T) if mask[i, t])
                for i in range(3)]
    np.testing.assert_allclose(-problem.loglik(params, problem.data), expected, rtol=1e-10)
    assert problem.dim == sum(leaf.size for leaf in jax.tree.leaves(params))


def test_transitions():
    transitions = bigram_transitions(jax.random.key(4), 10, branching=4)
    assert transitions.shape == (10, 10)
    np.testing.assert_allclose(transitions.sum(axis=1), 1.0)
    assert np.all((transitions > 0).sum(axis=1) == 4)
    # the successors differ between tokens (a shared set would make it a unigram model)
    assert len({tuple(np.flatnonzero(row)) for row in transitions}) > 1
    np.testing.assert_array_equal(bigram_transitions(jax.random.key(4), 10, 4), transitions)


def test_induction_sequences_structure():
    transitions = bigram_transitions(jax.random.key(5), 9, branching=2)
    tokens, repeated = induction_sequences(jax.random.key(6), transitions, 60, 12)
    tokens, repeated = np.asarray(tokens), np.asarray(repeated)
    assert tokens.shape == repeated.shape == (60, 12) and tokens.dtype == np.int32
    spans = repeated.argmax(axis=1) - 1  # the first repeated target is m + 1
    assert set(spans) == {3, 4, 5, 6}  # m uniform on {ceil(12/4), ..., 12/2}: each seen
    for row, mask, m in zip(tokens, repeated, spans, strict=True):
        np.testing.assert_array_equal(row[m:2 * m], row[:m])
        np.testing.assert_array_equal(np.flatnonzero(mask), np.arange(m + 1, 2 * m))
        # every other transition is one of the chain's (position m is the jump back)
        steps = [t for t in range(1, 12) if t != m]
        assert np.all(transitions[row[np.array(steps) - 1], row[steps]] > 0)
    assert not repeated[:, 0].any()


def test_induction_sequences_bad_input():
    transitions = bigram_transitions(jax.random.key(5), 4)
    with pytest.raises(InputError, match="transitions"):
        induction_sequences(jax.random.key(0), transitions[:, :3], 5, 8)
    with pytest.raises(InputError, match="context"):
        induction_sequences(jax.random.key(0), transitions, 5, 3)
    with pytest.raises(InputError, match="branching"):
        bigram_transitions(jax.random.key(0), 4, branching=5)
    with pytest.raises(InputError, match="d_head"):
        transformer_init(jax.random.key(0), 4, 4, d_head=0)


def induction_pattern(tokens):
    """The pattern of a perfect induction head: from each position to the one after the latest
    earlier occurrence of its token (to itself when there is none)."""
    b, length = tokens.shape
    pattern = np.zeros((b, length, length))
    for i in range(b):
        for t in range(length):
            earlier = [s for s in range(t) if tokens[i, s] == tokens[i, t]]
            pattern[i, t, earlier[-1] + 1 if earlier else t] = 1.0
    return pattern


def test_head_scores_on_hand_built_patterns():
    tokens = np.array([[0, 1, 2, 0, 1, 2, 3], [4, 4, 5, 6, 5, 6, 4]])
    # (row, query, key after the latest earlier occurrence of the query's token), by hand
    pairs = [(0, 3, 1), (0, 4, 2), (0, 5, 3), (1, 1, 1), (1, 4, 3), (1, 5, 4), (1, 6, 2)]
    previous = np.eye(7, k=-1)
    previous[0, 0] = 1.0
    uniform = np.tril(np.ones((7, 7))) / np.arange(1, 8)[:, None]
    heads = np.stack([np.broadcast_to(previous, (2, 7, 7)), induction_pattern(tokens),
                      np.broadcast_to(uniform, (2, 7, 7))], axis=1)  # (b, H, t, t)
    scores = head_scores(np.stack([heads, heads[:, ::-1]]), tokens)  # two layers
    assert scores["previous_token"].shape == scores["induction"].shape == (2, 3)
    # the previous-token head hits the induction key at (1, 4, 3) and (1, 5, 4); the
    # induction head attends to t - 1 at rows 1, t = 4 and 5 of the 12 queries t >= 1
    uniform_previous = np.mean([1 / (t + 1) for t in range(1, 7)])
    uniform_induction = np.mean([uniform[t, key] for _, t, key in pairs])
    np.testing.assert_allclose(scores["previous_token"][0], [1.0, 2 / 12, uniform_previous])
    np.testing.assert_allclose(scores["induction"][0], [2 / 7, 1.0, uniform_induction])
    np.testing.assert_allclose(scores["induction"][1], scores["induction"][0][::-1])
    # queries 0 and 1 only: previous-token over t = 1, induction over (1, 1, 1) alone
    early = head_scores(heads[None], tokens, query_mask=np.arange(7) < 2)
    np.testing.assert_allclose(early["previous_token"][0], [1.0, 0.0, 0.5])
    np.testing.assert_allclose(early["induction"][0], [0.0, 1.0, 0.5])
    first = head_scores(heads[None], tokens, query_mask=np.arange(7) < 1)  # no query counts
    assert np.all(np.isnan(first["previous_token"])) and np.all(np.isnan(first["induction"]))


def test_head_scores_bad_shapes():
    with pytest.raises(InputError, match="patterns"):
        head_scores(np.zeros((1, 2, 3, 4, 4)), np.zeros((2, 5), int))


@pytest.mark.slow
def test_induction_is_learned():
    """Trained briefly (2000 Adam steps), the model predicts the repeated tokens far better than
    the chain's entropy log(branching), the best any model without induction can do there,
    while the other tokens stay near that entropy (nothing else is learnable)."""
    vocab, context, branching = 32, 32, 16
    transitions = bigram_transitions(jax.random.key(0), vocab, branching)
    tokens, repeated = induction_sequences(jax.random.key(1), transitions, 2000, context)
    params = transformer_init(jax.random.key(2), vocab, context)
    problem = slt.Problem.from_tokens(transformer_forward, params, tokens)
    trained = slt.train_checkpoints(problem, params, jax.random.key(3), num_steps=2000,
                                    num_checkpoints=1, batch_size=64,
                                    learning_rate=3e-3)[2000]
    held, held_repeated = induction_sequences(jax.random.key(4), transitions, 500, context)
    others = np.ones(held.shape, bool) & ~np.asarray(held_repeated)
    others[:, 0] = False
    per_token = {}
    for name, mask in (("repeated", held_repeated), ("others", others)):
        held_problem = slt.Problem.from_tokens(transformer_forward, trained, held, mask)
        per_token[name] = float(held_problem.loss(trained)) / float(np.sum(mask, 1).mean())
    assert per_token["repeated"] < 0.5 * np.log(branching)
    assert per_token["others"] > 0.9 * np.log(branching)
