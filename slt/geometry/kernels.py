"""Fisher matrices as pure JAX functions of the coordinates theta (jit- and vmap-able).

Three kinds, one signature: `fisher_function(...)` returns `fisher(theta, arrays) -> (I, se)`,
with `se` the entry-wise standard error (zeros where the estimator is deterministic) and
`arrays` the inputs, weights, data, key or quadrature nodes it needs (`FisherArrays`).

* exact, Gaussian observation y ~ N(m(theta, x), s(theta, x)^2) entry-wise (regression with
  known or learned noise; a plain normal density): the closed form

      I(theta) = sum_i w_i sum_k [grad m_ik grad m_ik^T + 2 grad s_ik grad s_ik^T] / s_ik^2,

  which is (1/sigma^2) sum_i w_i J_i^T J_i for a known noise sd sigma: the Gauss-Newton
  matrix of the output Jacobian J_i. Inputs x_i carry weights w_i summing to 1 (uniform by
  default: the empirical input distribution; quadrature weights give the population one).
* exact, exponential-family observation (Bernoulli, Binomial, Poisson, Categorical; logits
  or probabilities): I(theta) = sum_i w_i J_i^T F(eta_i) J_i with eta the natural parameter
  and F its closed-form Fisher (`slt.geometry.families`), e.g. mean_i p_i (1 - p_i) x_i x_i^T
  for a logistic regression.
* exact, scalar mixture-of-normals density p(y | theta) (no inputs): quadrature over y,

      I(theta) = integral p(y) s(y) s(y)^T dy,   s = grad_theta log p(y | theta),

  by the trapezoid rule on a fixed grid (see `quadrature_grid`).
* monte_carlo: R independent replicates; replicate r draws y_ir ~ p(y | x_i, theta) for
  every input and gives I_r = sum_i w_i s_ir s_ir^T; the estimate is the mean of the I_r and
  its standard error their standard deviation / sqrt(R) (the replicates are i.i.d.).
* empirical: (1/n) sum_i g_i g_i^T with g_i = grad log p(y_i | x_i, theta) at the *observed*
  y_i. This is not the Fisher information away from the truth (Kunstner et al. 2019).

Large input sets are processed in chunks (`lax.scan`), so memory is O(chunk * outputs * d).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slt.geometry.coordinates import Coordinates
from slt.geometry.families import natural_parameter, whitening_root
from slt.geometry.observation import WHITENED_FAMILIES, ObservationModel, safe_log_prob, unwrap

__all__ = [
    "FisherArrays",
    "fisher_function",
    "fisher_trace_function",
    "mixture_extent",
    "quadrature_grid",
    "rows_per_example",
    "whitened_outputs",
]

# Quadrature over a mixture of normals N(mu_k, s_k^2). The grid spans every component's
# mean +- 10 sd: the normal density there is 8e-23 of its peak, and times the scores'
# polynomial growth (|s|^2 ~ y^4 ~ 1e4) the cut tails stay below 1e-18 of the integral.
# The step is the smaller of s_min / 6 and s_min^2 / (2 D), D the largest distance between
# component means: the trapezoid rule errs by about exp(-2 pi a / h) for an integrand
# analytic in the strip |Im y| < a, here p s s^T, whose poles are the complex zeros of p(y),
# at a distance a ~ pi s^2 / D from the real axis for two components D apart, so that
# h <= s^2 / (2 D) keeps the error below exp(-4 pi^2) ~ 1e-17; on a single component's own
# scale, the error exp(-2 pi^2 (s / h)^2) is nil for h <= s / 6. The tests check the
# result against adaptive quadrature to 1e-8 and against closed forms to 1e-10.
_TAIL_SDS = 10.0
_STEPS_PER_SD = 6.0
_NODE_MULTIPLE = 32  # node counts are padded to a multiple of this (zero weights)
_MAX_NODES = 200_000
_JACOBIAN_BUDGET = 2**22  # floats in one chunk's Jacobian (32 MiB): sets the chunk size


def _jacobian(fn: Callable, theta: jax.Array, num_outputs: int) -> jax.Array:
    """d fn / d theta, by reverse mode when there are fewer outputs than coordinates."""
    return (jax.jacrev if num_outputs < theta.shape[0] else jax.jacfwd)(fn)(theta)


def _sum_over_chunks(reduce, initial, rows_fn, theta, arrays, weights, num_rows: int,
                     chunk_size=None):
    """sum over chunks of reduce(R, w) with R = rows_fn(theta, arrays_chunk) (chunk, rows, d).

    `arrays` are pytrees with a leading example axis; the examples are split into chunks of
    at most `chunk_size` (default: the Jacobian budget), padded with zero-weight copies of
    the first example, and summed with `lax.scan` from `initial`.
    """
    n, d = weights.shape[0], theta.shape[0]
    if chunk_size is None:
        chunk_size = max(1, _JACOBIAN_BUDGET // (num_rows * d))
    chunk = min(n, chunk_size)
    num_chunks = -(-n // chunk)
    pad = num_chunks * chunk - n

    def padded(a, fill):
        a = jnp.concatenate([a, jnp.broadcast_to(fill, (pad,) + a.shape[1:])]) if pad else a
        return a.reshape((num_chunks, chunk) + a.shape[1:])

    chunks = jax.tree_util.tree_map(lambda a: padded(a, a[:1]), arrays)
    chunk_weights = padded(weights, 0.0)

    def step(total, xs):
        part, w = xs
        return total + reduce(rows_fn(theta, part), w), None

    total, _ = jax.lax.scan(step, initial, (chunks, chunk_weights))
    return total


def _gram_over_chunks(rows_fn, theta, arrays, weights, num_rows: int, chunk_size=None):
    """sum_i w_i R_i^T R_i with R_i = rows_fn(theta, arrays_i) of shape (rows, d), in chunks."""
    d = theta.shape[0]
    return _sum_over_chunks(
        lambda rows, w: jnp.einsum("bki,b,bkj->ij", rows, w, rows), jnp.zeros((d, d)),
        rows_fn, theta, arrays, weights, num_rows, chunk_size,
    )


def whitened_outputs(observation: ObservationModel, coordinates: Coordinates, theta, inputs):
    """The map t -> z(t), shape (b, rows), whose Jacobian at theta is the Fisher's root.

    For a Gaussian observation with k entries per example, z = m(t) / s, and with a learned
    scale also sqrt(2) s(t) / s, with s = s(theta) held fixed, so that sum_i w_i J_i^T J_i is
    the exact Fisher (module docstring) and I v = J^T diag(w) J v a Fisher-vector product.
    For an exponential family, z = R eta(t) with R the root of the family's Fisher at theta
    (`slt.geometry.families`; k K rows for a categorical with K classes).
    """
    if observation.family != "normal":
        return _family_outputs(observation, coordinates, theta, inputs)
    _, scale = observation.normal_moments(coordinates.to_values(theta), inputs)
    scale = jax.lax.stop_gradient(scale.reshape(scale.shape[0], -1))

    def outputs(t):
        mean, sd = observation.normal_moments(coordinates.to_values(t), inputs)
        b = mean.shape[0]
        whitened = mean.reshape(b, -1) / scale
        if not observation.learned_scale:
            return whitened
        return jnp.concatenate([whitened, jnp.sqrt(2.0) * sd.reshape(b, -1) / scale], axis=1)

    return outputs


def _family_outputs(observation, coordinates, theta, inputs):
    """`whitened_outputs` of an exponential-family observation."""
    family = observation.family
    size = 1 if inputs is None else inputs.shape[0]
    shape = (size,) + observation.output_shape + (
        (observation.num_classes,) if family == "categorical" else ())

    def eta(t):
        base = unwrap(observation.distribution(coordinates.to_values(t), inputs))
        return jnp.broadcast_to(natural_parameter(family, base), shape), base

    root = whitening_root(family, eta(theta)[1])

    def outputs(t):
        whitened = jnp.broadcast_to(root(eta(t)[0]), shape)
        return whitened.reshape(size, -1)

    return outputs


def rows_per_example(observation: ObservationModel) -> int:
    """Rows of `whitened_outputs` per example: entries of y, times 2 for a learned Gaussian
    scale, times K for a categorical."""
    rows = int(np.prod(observation.output_shape, dtype=int))
    if observation.family == "normal" and observation.learned_scale:
        rows *= 2
    return rows * (observation.num_classes or 1)


def _whitened_rows(observation, coordinates):
    outputs_per_example = rows_per_example(observation)

    def rows(theta, inputs):
        outputs = whitened_outputs(observation, coordinates, theta, inputs)
        size = 1 if inputs is None else inputs.shape[0]
        return _jacobian(outputs, theta, size * outputs_per_example)  # (b, rows, d)

    return rows, outputs_per_example


def _score_rows(observation, coordinates):
    def rows(theta, arrays):
        inputs, outputs = arrays

        def log_density(t):
            return observation.log_density(coordinates.to_values(t), inputs, outputs)

        return _jacobian(log_density, theta, outputs.shape[0])[:, None, :]  # (b, 1, d)

    return rows


def mixture_extent(observation, coordinates):
    """theta -> (lowest node, highest node, smallest sd, spread of the means) of the mixture
    p(y | theta): what `quadrature_grid` needs to know of each point (pure; vmap it)."""

    def extent(theta):
        base = unwrap(observation.distribution(coordinates.to_values(theta), None))
        components = unwrap(base.component_distribution)
        mean = jnp.ravel(jnp.broadcast_to(components.loc, jnp.shape(components.scale)))
        scale = jnp.ravel(jnp.broadcast_to(components.scale, jnp.shape(components.loc)))
        return (
            jnp.min(mean - _TAIL_SDS * scale),
            jnp.max(mean + _TAIL_SDS * scale),
            jnp.min(scale),
            jnp.max(mean) - jnp.min(mean),
        )

    return extent


def quadrature_grid(extents) -> tuple[np.ndarray, np.ndarray]:
    """Trapezoid nodes over y covering the mixture at m points, from their `mixture_extent`s.

    Args:
      extents: the four outputs of `mixture_extent`, vmapped over the m points: each (m,).

    Returns:
      (nodes, weights): the rule is sum_j weights_j f(nodes_j), weights_j = the step (the
      end points carry negligible mass); see the comment on `_TAIL_SDS` for accuracy. The
      count is padded to a multiple of 32 with zero-weight nodes, so that nearby points
      share one compiled function.
    """
    lower, upper, smallest_scale, spread = (np.asarray(a) for a in extents)
    s = float(smallest_scale.min())
    if not s > 0:
        raise ValueError("a mixture component has zero scale: its density is not defined")
    step = min(s / _STEPS_PER_SD, s * s / (2.0 * max(float(spread.max()), 1e-300)))
    width = float(upper.max() - lower.min())
    steps = width / step if step > 0 else np.inf  # inf (or nan) where the extent overflows
    if not np.ceil(steps) + 1 <= _MAX_NODES:
        raise ValueError(
            f"quadrature over y would need {np.ceil(steps) + 1:.3g} nodes (component scale "
            f"{s:.3g} against a spread of {width:.3g}); use kind='monte_carlo'"
        )
    count = int(np.ceil(steps)) + 1
    nodes = lower.min() + step * np.arange(count)
    padded = -(-count // _NODE_MULTIPLE) * _NODE_MULTIPLE
    weights = np.concatenate([np.full(count, step), np.zeros(padded - count)])
    return np.concatenate([nodes, np.full(padded - count, nodes[-1])]), weights


class FisherArrays(NamedTuple):
    """The array arguments of a Fisher function (None where the estimator does not use them).

    inputs: (n, ...) inputs of a regression model (None for a density model); weights: (n,)
    input weights summing to 1 ((1,) = [1] without inputs); outputs: observed y (n, ...) for
    "empirical"; key: PRNG key for "monte_carlo"; nodes, node_weights: the quadrature rule of
    `quadrature_grid` for an exact mixture Fisher.
    """

    inputs: jax.Array | None = None
    weights: jax.Array | None = None
    outputs: jax.Array | None = None
    key: jax.Array | None = None
    nodes: jax.Array | None = None
    node_weights: jax.Array | None = None


def _quadrature_fisher(observation, coordinates, theta, arrays):
    def log_density(t):
        base = unwrap(observation.distribution(coordinates.to_values(t), None))
        return safe_log_prob(base, arrays.nodes)

    scores = jax.jacfwd(log_density)(theta)  # (nodes, d)
    density = jnp.exp(log_density(theta)) * arrays.node_weights
    return jnp.einsum("ji,j,jk->ik", scores, density, scores)


def _monte_carlo_fisher(observation, coordinates, num_draws, theta, arrays):
    rows = _score_rows(observation, coordinates)
    inputs, weights = arrays.inputs, arrays.weights
    block = int(max(1, min(num_draws, _JACOBIAN_BUDGET // (weights.shape[0] * theta.shape[0]))))
    num_blocks = -(-num_draws // block)
    keys = jax.random.split(arrays.key, num_blocks * block).reshape(num_blocks, block)
    counted = (jnp.arange(num_blocks * block) < num_draws).reshape(num_blocks, block)
    values = jax.lax.stop_gradient(coordinates.to_values(theta))

    def replicate(k):
        y = observation.sample(k, values, inputs)
        scores = rows(theta, (inputs, y))[:, 0, :]
        return jnp.einsum("bi,b,bj->ij", scores, weights, scores)

    shift = replicate(keys[0, 0])  # centring the sums keeps the variance accurate

    def step(carry, xs):
        total, squares = carry
        block_keys, mask = xs
        deviation = (jax.vmap(replicate)(block_keys) - shift) * mask[:, None, None]
        return (total + deviation.sum(0), squares + (deviation**2).sum(0)), None

    zeros = jnp.zeros_like(shift)
    (total, squares), _ = jax.lax.scan(step, (zeros, zeros), (keys, counted))
    mean = total / num_draws
    variance = (squares / num_draws - mean**2) * num_draws / (num_draws - 1)
    return shift + mean, jnp.sqrt(jnp.maximum(variance, 0.0) / num_draws)


def fisher_function(
    kind: str,
    observation: ObservationModel,
    coordinates: Coordinates,
    *,
    num_draws: int | None = None,
    chunk_size: int | None = None,
) -> Callable[[jax.Array, FisherArrays], tuple[jax.Array, jax.Array]]:
    """`fisher(theta, arrays) -> (I, se)` for one estimator; inputs are validated by the caller.

    The returned function is pure; jit it once and call it for any theta and arrays of the
    same shapes (or map it over many theta, as `fisher_scan` does).

    Args:
      kind: "exact", "monte_carlo" or "empirical" (module docstring).
      observation, coordinates: the model and the coordinate system.
      num_draws: replicates R for "monte_carlo" (R >= 2).
      chunk_size: examples per chunk (default: a 32 MiB Jacobian budget).
    """
    d = coordinates.dim
    if kind == "monte_carlo":
        return partial(_monte_carlo_fisher, observation, coordinates, num_draws)
    if kind == "empirical":
        rows = _score_rows(observation, coordinates)

        def empirical(theta, arrays):
            n = arrays.outputs.shape[0]
            data = (arrays.inputs, arrays.outputs)
            total = _gram_over_chunks(rows, theta, data, jnp.full(n, 1.0 / n), 1, chunk_size)
            return total, jnp.zeros((d, d))

        return empirical
    if observation.family in WHITENED_FAMILIES:
        rows, per_example = _whitened_rows(observation, coordinates)

        def exact(theta, arrays):
            total = _gram_over_chunks(
                rows, theta, arrays.inputs, arrays.weights, per_example, chunk_size
            )
            return total, jnp.zeros((d, d))

        return exact

    def quadrature(theta, arrays):
        return _quadrature_fisher(observation, coordinates, theta, arrays), jnp.zeros((d, d))

    return quadrature


def fisher_trace_function(
    observation: ObservationModel, coordinates: Coordinates, *, chunk_size: int | None = None
) -> Callable[[jax.Array, jax.Array | None, jax.Array], jax.Array]:
    """`trace(theta, inputs, weights)`: the exact tr I(theta) of a Gaussian-noise or
    exponential-family model, without the d x d matrix (pure; jit or vmap it).

        tr I = tr sum_i w_i J_i^T J_i = sum_i w_i ||J_i||_F^2,

    the weighted sum of the squared entries of the whitened Jacobian (`whitened_outputs`),
    built a chunk of examples at a time: the cost of rows-per-example Fisher-vector products,
    memory O(chunk * rows * d) (at least one example's Jacobian; chunks as `fisher_function`).
    """
    rows, per_example = _whitened_rows(observation, coordinates)

    def trace(theta, inputs, weights):
        return _sum_over_chunks(
            lambda jacobian, w: jnp.einsum("bki,b->", jacobian**2, w), jnp.zeros(()),
            rows, theta, inputs, weights, per_example, chunk_size,
        )

    return trace
