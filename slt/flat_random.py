"""`jax.random` draws of several dimensions, drawn flat and reshaped: the same values, compiled
in a third of the time on CPUs.

Under `jax_threefry_partitionable` (JAX's default) the bits of a draw of shape (a, b, ...) are
the Threefry cipher of each element's flat index, as they are under the older setting, so a
flat draw of a·b·... values reshaped to (a, b, ...) is bitwise the same array (a test checks
it for `normal`, `uniform` and `categorical` under both settings). XLA's CPU compiler takes
0.2–0.6 s for a program holding the multi-dimensional form (the more rows, the longer) and
0.16–0.18 s for the flat one (jax 0.10: benchmarks/RESULTS.md, "Random draws drawn flat"), a
cost that every program of slt drawing a matrix of noise paid once per shape: the proposal
draws of the free energy's importance sampling, the chains' starting offsets, the models'
simulated data.

A draw under `vmap` over keys is batched into a multi-dimensional one whatever its own shape;
these functions do not change that.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

__all__ = ["categorical", "normal", "uniform"]


def normal(key: jax.Array, shape: tuple[int, ...], dtype=float) -> jax.Array:
    """`jax.random.normal(key, shape, dtype)`, bitwise, drawn flat (module doc)."""
    return jax.random.normal(key, (math.prod(shape),), dtype).reshape(shape)


def uniform(key: jax.Array, shape: tuple[int, ...], dtype=float, minval=0.0,
            maxval=1.0) -> jax.Array:
    """`jax.random.uniform(key, shape, dtype, minval, maxval)`, bitwise, drawn flat."""
    return jax.random.uniform(key, (math.prod(shape),), dtype, minval, maxval).reshape(shape)


def categorical(key: jax.Array, logits: jax.Array, num: int) -> jax.Array:
    """`jax.random.categorical(key, logits, shape=(num,))` for a 1-D `logits`, bitwise: the
    Gumbel-max draw argmax_k (g_k + logits_k), its (num, K) Gumbel noise drawn flat."""
    logits = jnp.asarray(logits)
    size = logits.shape[-1]
    gumbel = jax.random.gumbel(key, (num * size,), logits.dtype).reshape(num, size)
    return jnp.argmax(gumbel + logits, axis=-1)
