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
(`curvature_diagonal`): the larger of the empirical Fisher information, the mean over examples
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

from slt.problem import Params, Problem

__all__ = ["NUM_EXAMPLES", "NUM_PROBES", "MinimumCheck", "curvature_diagonal", "minimum_check",
           "per_example_gradient_moments", "start_scale"]

NUM_EXAMPLES = 512
NUM_PROBES = 8


class MinimumCheck(NamedTuple):
    """Whether w* is a minimum of L_n (module doc): the score statistic's excess over its
    value at a population minimum, in its standard deviations ((S - d) / sqrt(2d), d the
    weights sampled), and lambda_hat's expected shortfall from the gradient at w*."""

    gradient_z: float
    shortfall: float


def per_example_gradient_moments(problem: Problem, params: Params, *,
                                 num_examples: int = NUM_EXAMPLES, chunk: int = 64
                                 ) -> tuple[jax.Array, jax.Array]:
    """The mean and the mean square, over examples, of the per-example gradients
    grad_w l_i(w) at `params` (flat, `Problem.ravel` order), l_i = -log p(z_i | w).

    `num_examples` examples evenly spaced through the data (all of them when n is smaller,
    rounded down to a multiple of `chunk`), their gradients computed `chunk` at a time so that
    memory is O(chunk * d).
    """
    count = min(num_examples, problem.n)
    count -= count % min(chunk, count)
    indices = jnp.linspace(0, problem.n - 1, count).astype(jnp.int32).reshape(-1, min(chunk, count))
    flat = problem.ravel(params)

    def example_loss(position, index):
        return -problem.loglik(problem.unravel(position), problem.take(index[None]))[0]

    def moments(block):
        gradients = jax.vmap(jax.grad(example_loss), in_axes=(None, 0))(flat, block)
        return gradients.sum(0), (gradients**2).sum(0)

    sums, squares = jax.lax.map(moments, indices)
    return sums.sum(0) / count, squares.sum(0) / count


def curvature_diagonal(problem: Problem, params: Params, *, num_probes: int = NUM_PROBES,
                       key: jax.Array | None = None) -> np.ndarray:
    """An estimate of the loss's curvature along every flat weight at `params`: the larger of
    the empirical Fisher information F_jj (`per_example_gradient_moments`) and Hutchinson's
    estimate of the Hessian's diagonal, mean_k v_k * (H v_k) over `num_probes` Rademacher
    probes v_k (exact for a diagonal Hessian), of the mean loss over the same
    `NUM_EXAMPLES` examples; never below 0. F alone misses curvature that the per-example
    gradients do not carry (a loss without noise, whose every per-example gradient vanishes at
    its minimum); H alone is noisy where the Hessian is far from diagonal."""
    count = min(NUM_EXAMPLES, problem.n)
    batch = problem.take(jnp.linspace(0, problem.n - 1, count).astype(jnp.int32))
    flat = problem.ravel(params)

    def sample_loss(position):
        return -jnp.mean(problem.loglik(problem.unravel(position), batch))

    probes = jax.random.rademacher(jax.random.key(0) if key is None else key,
                                   (num_probes, flat.size), flat.dtype)
    products = jax.lax.map(lambda v: v * jax.jvp(jax.grad(sample_loss), (flat,), (v,))[1],
                           probes)
    hessian = np.asarray(products.mean(0), np.float64)
    fisher = np.asarray(per_example_gradient_moments(problem, params)[1], np.float64)
    return np.maximum(np.maximum(fisher, hessian), 0.0)


def start_scale(problem: Problem, params: Params, *, nbeta: float, gamma: float) -> np.ndarray:
    """The standard deviations s_j of the chains' starting offsets around `params` (module
    doc), one per flat weight."""
    curvature = curvature_diagonal(problem, params)
    with np.errstate(divide="ignore"):
        identified = 1.0 / np.sqrt(nbeta * curvature + gamma)
    return np.minimum(identified, nbeta**-0.25)


def minimum_check(problem: Problem, params: Params, *, nbeta: float, gamma: float,
                  mask: np.ndarray | None = None) -> MinimumCheck:
    """The `MinimumCheck` of `params` (module doc): g = grad L_n on the full data, the
    per-example gradients' variance and mean square from `per_example_gradient_moments`,
    over the weights `mask` selects (flat booleans; None: all). Weights whose per-example
    gradients do not vary carry no information and are left out."""
    flat = problem.ravel(params)
    gradient = np.asarray(jax.grad(lambda position: problem.loss(problem.unravel(position)))(
        flat), np.float64)
    mean, mean_square = (np.asarray(v, np.float64) for v in per_example_gradient_moments(
        problem, params))
    variance = np.maximum(mean_square - mean**2, 0.0)
    selected = variance > 0 if mask is None else (variance > 0) & np.asarray(mask)
    count = int(selected.sum())
    if count == 0:
        return MinimumCheck(0.0, 0.0)
    score = problem.n * np.sum(gradient[selected] ** 2 / variance[selected])
    shortfall = 0.5 * np.sum((nbeta * gradient[selected]) ** 2
                             / (nbeta * mean_square[selected] + gamma))
    return MinimumCheck(float((score - count) / np.sqrt(2 * count)), float(shortfall))
