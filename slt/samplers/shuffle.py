"""Shuffled epochs without a sort: a keyed pseudo-random permutation evaluated index by index.

Minibatch b of epoch e holds the examples pi_e(b * B), ..., pi_e(b * B + B - 1), where pi_e is a
bijection of {0, ..., n - 1} drawn from the key and e. Every epoch visits each example exactly
once (sampling without replacement), epochs and chains get independent orders, and a step
computes only its own B indices: no permutation of n elements is ever materialised. (Sorting
n = 2e4 keys per epoch with `jax.random.permutation` cost more than all the SGLD steps of the
epoch on CPU; this costs a few integer operations per index.)

pi_e is a 4-round Feistel network on the smallest even number of bits 2h with 2^(2h) >= n
(round function: the lowbias32 integer hash of the right half xor a round key), restricted to
{0, ..., n - 1} by cycle walking: values >= n are permuted again until they land below n, which
keeps it a bijection. Round keys are 4 random 32-bit words of fold_in(key, epoch).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

__all__ = ["epoch_indices"]

FEISTEL_ROUNDS = 4  # 4 rounds make a Feistel network a pseudo-random permutation (Luby–Rackoff)


def _hash(x: jax.Array) -> jax.Array:
    """lowbias32 (C. Wellons): a well-mixing 32-bit integer hash."""
    x = x ^ (x >> 16)
    x = x * jnp.uint32(0x7FEB352D)
    x = x ^ (x >> 15)
    x = x * jnp.uint32(0x846CA68B)
    return x ^ (x >> 16)


def epoch_indices(key: jax.Array, epoch, positions: jax.Array, n: int) -> jax.Array:
    """pi_epoch(positions): the examples at `positions` (int array, values in [0, n)) of the
    epoch's order. Pure and jittable; `n` is static."""
    half_bits = max(1, -(-max(n - 1, 1).bit_length() // 2))
    mask = jnp.uint32((1 << half_bits) - 1)
    round_keys = jax.random.bits(jax.random.fold_in(key, epoch), (FEISTEL_ROUNDS,), jnp.uint32)

    def permute(x):
        left, right = x >> half_bits, x & mask
        for round_key in round_keys:
            left, right = right, left ^ (_hash(right ^ round_key) & mask)
        return (left << half_bits) | right

    def outside(x):
        return jnp.any(x >= n)

    def walk(x):
        return jnp.where(x >= n, permute(x), x)

    start = permute(jnp.asarray(positions).astype(jnp.uint32))
    return jax.lax.while_loop(outside, walk, start).astype(jnp.int32)
