"""Per-example functions over many examples, evaluated a chunk of examples at a time.

A full-data evaluation (L_n(w*), the validation of a Problem, the loss an exact chain records,
the gradient of L_n at the centre) calls the per-example log-likelihood on all n examples. For
a language model, all n at once means logits of shape (n, T, V): 20 000 sequences of 256
tokens over a vocabulary of 5 000 are 100 GB in float32. `per_example_in_chunks` evaluates
the examples `chunk_size` at a time with `jax.lax.map`, so memory is bounded by one chunk, not
by n:

* one program serves every chunk: the k-th chunk is the slice [k c, k c + c) of the data, and
  the last one, where c does not divide n, is the slice [n - c, n) (it overlaps the one before;
  the overlapping values are dropped), so no chunk is padded and no padding can be NaN;
* the data stay arguments (slices of the arrays passed in), never constants of the program;
* each chunk's evaluation is wrapped in `jax.checkpoint`: a gradient (or a Hessian-vector
  product) through the chunked evaluation stores no chunk's intermediates, only its inputs,
  and recomputes the chunk's forward pass on the way back; memory stays bounded by a chunk
  for derivatives too, at the price of one more forward pass;
* where n <= c, the function is called once on all of the data, as if unchunked.

`default_chunk_size` chooses c from memory: the bytes of the intermediate values of an
evaluation on one example (read off its traced program), and a budget of `CHUNK_BYTES` for all
the intermediates of one chunk.

Example:
  >>> def squares(params, batch):
  ...     return (batch["x"] * params) ** 2
  >>> data = {"x": jnp.arange(7.0)}
  >>> per_example_in_chunks(squares, 2.0, data, 3)   # chunks [0, 3), [3, 6), [4, 7)
  Array([  0.,   4.,  16.,  36.,  64., 100., 144.], dtype=float64)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["CHUNK_BYTES", "default_chunk_size", "per_example_in_chunks"]

# The memory budget of one chunk's intermediate values (the sum of their sizes, an upper bound
# on what XLA keeps alive at once): 256 MiB. Small models never reach it (a linear regression
# at n = 1e6 evaluates in one chunk); a language model's logits do (a sequence of 256 tokens
# over 5 000 words carries 5 MB of logits and as much again of their softmax).
CHUNK_BYTES = 2**28


def per_example_in_chunks(function: Callable[[Any, Mapping[str, jax.Array]], jax.Array],
                          params: Any, data: Mapping[str, jax.Array], chunk_size: int
                          ) -> jax.Array:
    """`function(params, data)`, shape (n, ...), computed `chunk_size` examples at a time.

    Args:
      function: `function(params, batch) -> (b, ...)`, one value per example of `batch`.
      params: its first argument (any pytree), the same for every chunk.
      data: dict of arrays with a shared leading (example) axis of length n.
      chunk_size: the examples per evaluation, c >= 1 (module doc: the last chunk overlaps).

    Returns:
      The per-example values, equal to `function(params, data)` up to floating-point
      rounding.
    """
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    if n <= chunk_size:
        return function(params, data)
    count = -(-n // chunk_size)
    starts = jnp.minimum(jnp.arange(count) * chunk_size, n - chunk_size)

    @jax.checkpoint
    def chunk(params, data, start):
        return function(params, {key: jax.lax.dynamic_slice_in_dim(value, start, chunk_size)
                                 for key, value in data.items()})

    values = jax.lax.map(lambda start: chunk(params, data, start), starts)
    overlap = count * chunk_size - n
    return jnp.concatenate([values[:-1].reshape(-1, *values.shape[2:]), values[-1, overlap:]])


def default_chunk_size(function: Callable[[Any, Mapping[str, jax.Array]], jax.Array],
                       params: Any, data: Mapping[str, jax.Array],
                       budget: int = CHUNK_BYTES) -> int:
    """The chunk size c for `per_example_in_chunks`: `budget` // (bytes per example), at
    least 1 and at most n (module doc).

    The bytes per example are the summed sizes of every intermediate value of `function`'s
    program traced on one example (an upper bound: values that do not grow with the batch,
    such as products of the parameters alone, count too; one trace, not two, as a Problem is
    built). Nothing is evaluated: the program is traced on shapes. A function that cannot be
    traced on one example gets c = n (one evaluation, as unchunked).
    """
    n = jax.tree_util.tree_leaves(data)[0].shape[0]
    try:
        per_example = _intermediate_bytes(jax.make_jaxpr(function)(params, {
            key: jax.ShapeDtypeStruct((1, *value.shape[1:]), value.dtype)
            for key, value in data.items()}).jaxpr)
    except Exception:  # noqa: BLE001 - a model that needs all n examples: evaluate it whole
        return n
    return int(min(n, max(1, budget // max(per_example, 1))))


def _intermediate_bytes(jaxpr) -> int:
    """The summed sizes of the values every equation of `jaxpr` (and of the programs nested
    in it: jit, scan, cond, custom derivatives) produces."""
    total = 0
    for equation in jaxpr.eqns:
        for variable in equation.outvars:
            aval = variable.aval
            if hasattr(aval, "shape") and hasattr(aval, "dtype"):
                total += int(np.prod(aval.shape, dtype=np.int64)) * np.dtype(aval.dtype).itemsize
        for value in equation.params.values():
            for inner in value if isinstance(value, tuple | list) else (value,):
                if isinstance(inner, jax.extend.core.ClosedJaxpr):
                    total += _intermediate_bytes(inner.jaxpr)
                elif isinstance(inner, jax.extend.core.Jaxpr):
                    total += _intermediate_bytes(inner)
    return total
