"""What a local run measures at its centre w* before the chains move: where they start, and
whether w* is a minimum of L_n.

Where the chains start: apart, over the local posterior's expected width.

Chains that all start at w* agree with each other for as long as none has moved far, whether
or not any has reached the local posterior: R-hat, which compares chains, cannot see that they
have not spread. Started apart, chains that have not mixed disagree, and the diagnostics
(`slt.estimators.local.diagnostics`, ChainsDisagree) can say so. `RunPlan(start="dispersed")`,
the default, starts every chain at

    w_0 = w* + s * xi,   xi ~ N(0, I),   s_j = min(1 / sqrt(n beta F_jj + gamma), (n beta)^(-1/4)),

over the coordinates it samples. F_jj is the loss's curvature along weight j at w*
(`start_scale`): the larger of the empirical Fisher information, the mean over examples
of (d l_i / d w_j)^2 (the Hessian's diagonal at a well-specified minimum), and a Hutchinson
estimate of the Hessian's diagonal, both from `NUM_EXAMPLES` examples evenly spaced through
the data. In an identified direction 1 / sqrt(n beta F_jj + gamma) is the local posterior's
conditional standard deviation (its Gaussian approximation's, which does not exceed the
marginal one: the start is never wider than the posterior there). In a direction the Fisher
information does not see (a singular one), the posterior's width is set by the loss's
higher-order terms: for a quartic term n beta w^4 it is (n beta)^(-1/4), the cap, which is
also far inside the localizer's 1 / sqrt(gamma). The chains' warmup then carries them the rest
of the way.

Whether w* is a minimum (`minimum_check`). lambda_hat(w*) = n beta (E[L_n(w)] - L_n(w*)) is
meant at a minimum of the loss. At a minimum of L_n its gradient g = grad L_n(w*) vanishes; at
a minimum of the population loss (a teacher's parameters, a true parameter) it is sampling
noise, g_j ~ N(0, V_jj / n) with V_jj the per-example gradients' variance, so that the score
statistic S = n sum_j g_j^2 / V_jj is about chi^2 with d degrees of freedom; a network stopped
before its loss converged has a gradient far above that. How much it costs: in the local
posterior's Gaussian approximation the gradient shifts the chains by -(n beta F + gamma)^-1 n
beta g and lowers lambda_hat by about

    shortfall = (1/2) sum_j (n beta g_j)^2 / (n beta F_jj + gamma),

about d / (2 log n) at a population minimum (part of the finite-n value of lambda_hat there)
and 0 at a minimum of L_n. The check reports S's excess over d in its own standard deviations
sqrt(2d), and the shortfall; `slt.estimators.local.diagnostics` warns (BelowMinimum) when
both are large.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from slt import compile_cache
from slt.problem import Params, Problem

__all__ = ["CHUNK", "NUM_EXAMPLES", "NUM_PROBES", "CenterMeasurements", "MinimumCheck",
           "measure_center", "minimum_check", "start_scale"]

NUM_EXAMPLES = 512
NUM_PROBES = 8
CHUNK = 64


class MinimumCheck(NamedTuple):
    """Whether w* is a minimum of L_n (module doc): the score statistic's excess over its
    value at a population minimum, in its standard deviations ((S - d) / sqrt(2d), d the
    weights sampled), and lambda_hat's expected shortfall from the gradient at w*."""

    gradient_z: float
    shortfall: float


class CenterMeasurements(NamedTuple):
    """What `measure_center` finds at w*, flat (`Problem.ravel` order), float64.

    gradient: grad L_n(w*) on the full data.
    mean, mean_square: the mean and the mean square over `NUM_EXAMPLES` examples (evenly
      spaced through the data) of the per-example gradients grad l_i(w*), l_i = -log p(z_i|w).
    hessian_diagonal: Hutchinson's estimate of the diagonal of the Hessian of the mean loss
      over the same examples, mean_k v_k * (H v_k) over `NUM_PROBES` Rademacher probes v_k
      (exact for a diagonal Hessian).
    """

    gradient: np.ndarray
    mean: np.ndarray
    mean_square: np.ndarray
    hessian_diagonal: np.ndarray


def measure_center(problem: Problem, params: Params) -> CenterMeasurements:
    """The `CenterMeasurements` of `params`: one compiled program per problem and shape
    (`slt.compile_cache`), the data its argument; per-example gradients `CHUNK` at a time
    (memory O(CHUNK d)), or `problem.chunk_size` at a time where that is smaller; the
    full-data gradient and the Hessian probes' losses chunked by `Problem.loglik`."""
    flat = problem.ravel(params)
    count = min(NUM_EXAMPLES, problem.n)
    block = min(CHUNK, count, problem.chunk_size)  # a chunk's memory (`Problem.chunk_size`)
    count -= count % block
    leaves = jax.tree.leaves(problem.data)
    signature = ("centre measurements", flat.shape, str(flat.dtype), (count, block),
                 tuple((leaf.shape, str(leaf.dtype)) for leaf in leaves))

    def measurements(flat, data):  # the examples and probes are constants of the program
        indices = jnp.linspace(0, problem.n - 1, count).astype(jnp.int32).reshape(-1, block)
        probes = jax.random.rademacher(jax.random.key(0), (NUM_PROBES, flat.size), flat.dtype)
        return _measurements(problem, flat, data, indices, probes)

    program, _ = compile_cache.compiled_for(
        problem, signature, lambda: jax.jit(measurements).lower(flat, problem.data).compile())
    return CenterMeasurements(*(np.asarray(value, np.float64) for value in program(
        flat, problem.data)))


def _measurements(problem: Problem, flat, data, indices, probes):
    """The traced body of `measure_center`'s program."""
    def example_loss(position, index):
        return -problem.loglik(problem.unravel(position), problem.take(index[None], data))[0]

    def moments(block):
        gradients = jax.vmap(jax.grad(example_loss), in_axes=(None, 0))(flat, block)
        return gradients.sum(0), (gradients**2).sum(0)

    sums, squares = jax.lax.map(moments, indices)
    batch = problem.take(indices.ravel(), data)

    def sample_loss(position):
        return -jnp.mean(problem.loglik(problem.unravel(position), batch))

    products = jax.lax.map(lambda v: v * jax.jvp(jax.grad(sample_loss), (flat,), (v,))[1],
                           probes)
    gradient = jax.grad(lambda position: -jnp.mean(problem.loglik(problem.unravel(position),
                                                                  data)))(flat)
    return gradient, sums.sum(0) / indices.size, squares.sum(0) / indices.size, products.mean(0)


def start_scale(measured: CenterMeasurements, *, nbeta: float, gamma: float) -> np.ndarray:
    """The standard deviations s_j of the chains' starting offsets around w* (module doc),
    one per flat weight, from its `measure_center`: the curvature along weight j is the
    larger of the empirical Fisher information (`mean_square`) and the Hessian's diagonal,
    never below 0 (the Fisher alone misses curvature the per-example gradients do not carry,
    as in a loss without noise; the Hessian's estimate alone is noisy where it is far from
    diagonal); a measurement that is not finite counts as no curvature."""
    # fmax ignores a NaN: a curvature the model cannot differentiate twice there (|w|^p at
    # w = 0, as in the normal crossings) counts as none
    curvature = np.fmax(np.fmax(measured.mean_square, measured.hessian_diagonal), 0.0)
    with np.errstate(divide="ignore"):
        identified = 1.0 / np.sqrt(nbeta * curvature + gamma)
    return np.minimum(identified, nbeta**-0.25)


def minimum_check(problem: Problem, measured: CenterMeasurements, *, nbeta: float,
                  gamma: float, mask: np.ndarray | None = None) -> MinimumCheck:
    """The `MinimumCheck` of w* (module doc) from its `measure_center`, over the weights
    `mask` selects (flat booleans; None: all). Weights whose per-example gradients do not
    vary, or whose measurements are not finite, carry no information and are left out."""
    gradient, mean, mean_square = measured.gradient, measured.mean, measured.mean_square
    variance = np.maximum(mean_square - mean**2, 0.0)
    selected = (variance > 0) & np.isfinite(gradient) & np.isfinite(variance)
    if mask is not None:
        selected &= np.asarray(mask)
    count = int(selected.sum())
    if count == 0:
        return MinimumCheck(0.0, 0.0)
    score = problem.n * np.sum(gradient[selected] ** 2 / variance[selected])
    shortfall = 0.5 * np.sum((nbeta * gradient[selected]) ** 2
                             / (nbeta * mean_square[selected] + gamma))
    return MinimumCheck(float((score - count) / np.sqrt(2 * count)), float(shortfall))
