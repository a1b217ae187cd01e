"""A small attention-only transformer in plain JAX, and a language task that needs induction.

The network (TransformerLens's layout and names, no layer norm, no MLP): token and position
embeddings, `num_layers` blocks of `num_heads` causal attention heads each adding to the
residual stream, and an unembedding. Parameters, a plain pytree (V vocabulary, T context,
D = d_model, H heads of dimension E = d_head, L layers):

    {"embed": (V, D), "pos_embed": (T, D),
     "blocks": [{"W_Q", "W_K", "W_V": (H, D, E), "W_O": (H, E, D),
                 "b_Q", "b_K", "b_V": (H, E), "b_O": (D,)}, ... L of them],
     "unembed": (D, V), "b_U": (V,)}

Forward pass on tokens (b, T): x = embed[tokens] + pos_embed[:T]; per block, for every head h,
q = x W_Q[h] + b_Q[h] (likewise k, v), pattern = softmax over keys s <= t of q_t . k_s / sqrt(E)
(causal), z = pattern v, and x <- x + sum_h z_h W_O[h] + b_O; logits = x unembed + b_U. The
logits at position t predict the token at t + 1.

The task (`bigram_transitions`, `induction_sequences`): sequences from a sparse Markov chain
in which a span of random length is repeated. Outside the repeat a token is predictable only to
the chain's entropy log(branching); each repeated token after the first is predictable exactly
by an induction circuit (a previous-token head feeding a head that attends to the token after the
current token's earlier occurrence). `head_scores` measures both behaviours per head from the
attention patterns.
"""

from __future__ import annotations

import math
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from slt import flat_random
from slt.validation import InputError, require_int, require_key

__all__ = [
    "bigram_transitions",
    "head_scores",
    "induction_sequences",
    "transformer_forward",
    "transformer_init",
]


def transformer_init(
    key: jax.Array,
    vocab_size: int,
    context: int,
    *,
    num_layers: int = 2,
    num_heads: int = 4,
    d_model: int = 32,
    d_head: int = 8,
) -> dict:
    """Random parameters of the attention-only transformer (layout in the module docstring).

    Initialisation: every matrix ~ N(0, 1 / fan_in), fan_in the number of terms summed into
    one output (1 for the embeddings, which select one row: N(0, 1); D for W_Q, W_K, W_V and
    the unembedding; H E for W_O, whose heads' outputs add up); every bias 0. The residual
    stream then starts with entries of variance about 2 and each block adds about as much.

    Args:
      key: PRNG key.
      vocab_size, context: V and the largest sequence length T.
      num_layers, num_heads, d_model, d_head: L, H, D and E (defaults 2, 4, 32, 8).

    Returns:
      The parameter pytree, float32 (float64 under jax_enable_x64), d = V D + T D +
      L (4 H D E + 3 H E + D) + D V + V weights.

    Raises:
      InputError (a ValueError): a size that is not a positive integer, or a bad key.

    Example:
      >>> params = slt.models.transformer_init(jax.random.key(0), 5, 6, num_layers=1,
      ...                                      num_heads=2, d_model=4, d_head=2)
      >>> params["blocks"][0]["W_Q"].shape, params["unembed"].shape
      ((2, 4, 2), (4, 5))
    """
    key = require_key(key)
    vocab_size, context, num_layers, num_heads, d_model, d_head = (
        require_int(name, value, minimum=1) for name, value in (
            ("vocab_size", vocab_size), ("context", context), ("num_layers", num_layers),
            ("num_heads", num_heads), ("d_model", d_model), ("d_head", d_head)))
    return _init(key, vocab_size, context, num_layers, num_heads, d_model, d_head)


@partial(jax.jit, static_argnums=(1, 2, 3, 4, 5, 6))
def _init(key, vocab_size, context, num_layers, num_heads, d_model, d_head):
    """`transformer_init` on checked sizes, compiled as one program."""
    embed_key, pos_key, unembed_key, *block_keys = jax.random.split(key, 3 + num_layers)

    def normal(key, shape, fan_in):
        return flat_random.normal(key, shape) / math.sqrt(fan_in)

    def block(key):
        q_key, k_key, v_key, o_key = jax.random.split(key, 4)
        heads = (num_heads, d_model, d_head)
        return {
            "W_Q": normal(q_key, heads, d_model),
            "W_K": normal(k_key, heads, d_model),
            "W_V": normal(v_key, heads, d_model),
            "W_O": normal(o_key, (num_heads, d_head, d_model), num_heads * d_head),
            "b_Q": jnp.zeros((num_heads, d_head)),
            "b_K": jnp.zeros((num_heads, d_head)),
            "b_V": jnp.zeros((num_heads, d_head)),
            "b_O": jnp.zeros(d_model),
        }

    return {
        "embed": normal(embed_key, (vocab_size, d_model), 1),
        "pos_embed": normal(pos_key, (context, d_model), 1),
        "blocks": [block(block_key) for block_key in block_keys],
        "unembed": normal(unembed_key, (d_model, vocab_size), d_model),
        "b_U": jnp.zeros(vocab_size),
    }


def transformer_forward(params: dict, tokens: jax.Array, *, return_patterns: bool = False):
    """Logits of the attention-only transformer (module docstring), and its attention patterns.

    Args:
      params: the parameters (`transformer_init`'s layout).
      tokens: (b, t) integer tokens, t <= the context T of pos_embed.
      return_patterns: also return the attention patterns.

    Returns:
      logits (b, t, V), the logits at position s predicting the token at s + 1; with
      return_patterns, (logits, patterns), patterns (L, b, H, t, t): patterns[l, i, h, s, r] is
      the attention of head h of layer l from query position s to key position r (zero for
      r > s; each row sums to 1).

    Example:
      >>> params = slt.models.transformer_init(jax.random.key(0), 5, 6, num_layers=1,
      ...                                      num_heads=2, d_model=4, d_head=2)
      >>> logits, patterns = slt.models.transformer_forward(params, jnp.zeros((3, 6), int),
      ...                                                   return_patterns=True)
      >>> logits.shape, patterns.shape
      ((3, 6, 5), (1, 3, 2, 6, 6))
    """
    length = tokens.shape[-1]
    x = params["embed"][tokens] + params["pos_embed"][:length]
    causal = jnp.tril(jnp.ones((length, length), bool))
    patterns = []
    for block in params["blocks"]:
        q, k, v = (jnp.einsum("btd,hde->bhte", x, block[f"W_{name}"]) + block[f"b_{name}"][:, None]
                   for name in "QKV")
        scores = jnp.einsum("bhte,bhse->bhts", q, k) / math.sqrt(q.shape[-1])
        pattern = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1)
        z = jnp.einsum("bhts,bhse->bhte", pattern, v)
        x = x + jnp.einsum("bhte,hed->btd", z, block["W_O"]) + block["b_O"]
        patterns.append(pattern)
    logits = x @ params["unembed"] + params["b_U"]
    return (logits, jnp.stack(patterns)) if return_patterns else logits


def bigram_transitions(key: jax.Array, vocab_size: int, branching: int = 3) -> np.ndarray:
    """A sparse Markov chain on the tokens: each token is followed by one of `branching`
    distinct tokens (drawn at random per token), each with probability 1 / branching.

    Args:
      key: PRNG key (the same key, the same chain).
      vocab_size: V.
      branching: successors per token, 1 <= branching <= V (default 3).

    Returns:
      The (V, V) transition matrix P[a, b] = p(next = b | current = a), float64; every row
      has entropy log(branching).

    Raises:
      InputError (a ValueError): bad sizes or key.

    Example:
      >>> P = slt.models.bigram_transitions(jax.random.key(0), 6, branching=2)
      >>> P.shape, sorted(set(P.ravel().tolist()))
      ((6, 6), [0.0, 0.5])
    """
    key = require_key(key)
    vocab_size = require_int("vocab_size", vocab_size, minimum=1)
    branching = require_int("branching", branching, minimum=1)
    if branching > vocab_size:
        raise InputError(f"branching must be at most vocab_size = {vocab_size}, got {branching}")
    keys = jax.random.split(key, vocab_size)
    successors = np.asarray(jax.vmap(
        lambda k: jax.random.permutation(k, vocab_size)[:branching])(keys))
    transitions = np.zeros((vocab_size, vocab_size))
    np.put_along_axis(transitions, successors, 1.0 / branching, axis=1)
    return transitions


def induction_sequences(key: jax.Array, transitions, num_sequences: int, context: int
                        ) -> tuple[jax.Array, jax.Array]:
    """Markov-chain sequences with a span repeated at a random offset, and the mask of the
    tokens an induction head predicts.

    Each sequence is a run x_0, x_1, ... of the Markov chain `transitions` (uniform first
    token) with its first m tokens repeated right after them: tokens = x_0 ... x_{m-1} x_0 ...
    x_{m-1} x_m x_{m+1} ..., cut at T tokens, m drawn per sequence uniformly from
    {ceil(T / 4), ..., floor(T / 2)}. The tokens at positions m + 1, ..., 2m - 1 repeat the
    token that followed the current token's earlier occurrence (tokens[t - 1] = x_{t-1-m} was
    followed by x_{t-m}): an induction circuit (a previous-token head feeding a head that
    attends to the position after the earlier occurrence) predicts them exactly. Because m
    varies, no fixed positional offset does. Every other token follows its predecessor by the
    chain (entropy log(branching) per token), except the token at m (a jump back to x_0).

    Args:
      key: PRNG key.
      transitions: the (V, V) matrix of `bigram_transitions` (rows sum to 1).
      num_sequences: n.
      context: T >= 4.

    Returns:
      (tokens, repeated): tokens (n, T) int32 and repeated (n, T) bool, True at the positions
      m + 1, ..., 2m - 1 of each sequence (as a loss mask: the target positions an induction
      head predicts).

    Raises:
      InputError (a ValueError): bad sizes, key, or a transition matrix that is not square
        with rows of non-negative entries summing to 1.

    Example:
      >>> P = slt.models.bigram_transitions(jax.random.key(0), 8)
      >>> tokens, repeated = slt.models.induction_sequences(jax.random.key(1), P, 3, 8)
      >>> m = jnp.argmax(repeated, axis=1) - 1       # the first repeated target is m + 1
      >>> [bool(jnp.all(row[k:2 * k] == row[:k])) for row, k in zip(tokens, m.tolist())]
      [True, True, True]
    """
    key = require_key(key)
    num_sequences = require_int("num_sequences", num_sequences, minimum=1)
    context = require_int("context", context, minimum=4)
    transitions = np.asarray(transitions, dtype=float)
    if (transitions.ndim != 2 or transitions.shape[0] != transitions.shape[1]
            or np.any(transitions < 0) or not np.allclose(transitions.sum(axis=1), 1.0)):
        raise InputError("transitions must be a square matrix of non-negative rows summing to "
                         f"1 (bigram_transitions); got shape {transitions.shape}")
    return _sample_sequences(key, jnp.log(jnp.asarray(transitions)), num_sequences, context)


@partial(jax.jit, static_argnums=(2, 3))
def _sample_sequences(key, log_transitions, num_sequences, context):
    """`induction_sequences` on checked arguments, compiled as one program."""
    vocab_size = log_transitions.shape[0]
    start_key, chain_key, span_key = jax.random.split(key, 3)

    def step(current, step_key):
        following = jax.random.categorical(step_key, log_transitions[current])
        return following, following

    first = jax.random.randint(start_key, (num_sequences,), 0, vocab_size)
    _, rest = jax.lax.scan(step, first, jax.random.split(chain_key, context - 1))
    chain = jnp.concatenate([first[:, None], rest.T], axis=1).astype(jnp.int32)
    span = jax.random.randint(span_key, (num_sequences, 1), -(-context // 4), context // 2 + 1)
    positions = jnp.arange(context)
    tokens = jnp.take_along_axis(chain, jnp.where(positions < span, positions, positions - span),
                                 axis=1)
    return tokens, (positions > span) & (positions < 2 * span)


def head_scores(patterns, tokens, query_mask=None) -> dict[str, np.ndarray]:
    """Previous-token and induction scores of every head, from its attention patterns.

    previous_token[l, h]: the mean attention from a query position s >= 1 to s - 1.
    induction[l, h]: the mean attention from a query position s whose token occurred before to
    the position after that earlier occurrence, r + 1 (r the latest r < s with tokens[r] =
    tokens[s]): where an induction head looks to copy the token that followed last time. Both
    are fractions of the query's attention, in [0, 1]; 1 is a perfect head of the kind.

    Args:
      patterns: (L, b, H, t, t) attention patterns (`transformer_forward(...,
        return_patterns=True)`).
      tokens: the (b, t) tokens they were computed on.
      query_mask: optional (b, t) booleans, the query positions to average over (e.g. the
        repeated half of `induction_sequences`); default every position.

    Returns:
      {"previous_token": (L, H), "induction": (L, H)} as numpy arrays (NaN for induction when
      no selected query has an earlier occurrence of its token).

    Raises:
      InputError (a ValueError): shapes that do not match.

    Example:
      >>> tokens = jnp.array([[0, 1, 2, 0]])
      >>> previous = jnp.eye(4, k=-1).at[0, 0].set(1.0)    # every query attends to s - 1
      >>> scores = slt.models.head_scores(previous[None, None, None], tokens)
      >>> scores["previous_token"].tolist(), scores["induction"].tolist()
      ([[1.0]], [[0.0]])
    """
    patterns, tokens = np.asarray(patterns), np.asarray(tokens)
    if patterns.ndim != 5 or tokens.shape != patterns.shape[1:2] + patterns.shape[3:4] or (
            patterns.shape[3] != patterns.shape[4]):
        raise InputError(f"patterns must be (L, b, H, t, t) and tokens (b, t); got patterns "
                         f"{patterns.shape} and tokens {tokens.shape}")
    length = tokens.shape[1]
    selected = (np.ones(tokens.shape, bool) if query_mask is None
                else np.broadcast_to(np.asarray(query_mask, bool), tokens.shape))
    positions = np.arange(length)
    same = (tokens[:, :, None] == tokens[:, None, :]) & (positions[None, :] < positions[:, None])
    latest = np.where(same.any(axis=2), np.where(same, positions, -1).max(axis=2), -1)

    def mean_attention(queries_selected, keys_of):
        rows, queries = np.nonzero(queries_selected)
        if rows.size == 0:
            return np.full((patterns.shape[0], patterns.shape[2]), np.nan)
        # advanced indices apart: the selected (query, key) pairs come first, (pairs, L, H)
        return patterns[:, rows, :, queries, keys_of(rows, queries)].mean(axis=0)

    return {
        "previous_token": mean_attention(selected & (positions >= 1),
                                         lambda rows, queries: queries - 1),
        "induction": mean_attention(selected & (latest >= 0),
                                    lambda rows, queries: latest[rows, queries] + 1),
    }
