"""A Gaussian mixture fitted to a particle cloud by EM: the proposal of independent MH moves.

q(w) = sum_m pi_m N(w; mu_m, Sigma_m), fitted to points w_1..w_N by expectation–maximisation
(Dempster, Laird & Rubin 1977) with a fixed number of iterations, so that it runs under `jit`
and `vmap`. Used by `slt.samplers.tempering` for independent Metropolis–Hastings moves: a
proposal drawn from q does not depend on the particle's current position, so one move can
carry a particle between modes of a multimodal posterior (the label-switched copies of a
mixture model's posterior, say) that gradient-based moves cannot cross.

Conventions:
- EM runs in coordinates whitened by the cloud's own covariance (`whitening`, a Cholesky
  factor L with L L^T = Cov), where the cloud has unit spread in every direction; each
  component's covariance gets `ridge` * I added (in whitened units) so that a component that
  collapses on few points keeps a proper density.
- Components start at `num_components` distinct points drawn at random from the cloud, each
  with the whole cloud's covariance divided by num_components^(2/d) (so that together they
  cover about the cloud's volume), and equal weights.
- A component that no point responds to keeps its previous parameters (no division by zero).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import logsumexp

from slt import flat_random

__all__ = [
    "GaussianMixture",
    "cross_fitted_independence_sweep",
    "fit_cross_mixtures",
    "fit_gaussian_mixture",
    "mixture_log_density",
    "padded_mixture",
    "sample_mixture",
    "whitening_factor",
]


class GaussianMixture(NamedTuple):
    """Weights, means and Cholesky factors of the covariances, in the original coordinates.

    log_weights: (M,); means: (M, d); cholesky: (M, d, d) lower triangular, Sigma_m = L_m L_m^T;
    inverse_cholesky: L_m^{-1}. Densities use the inverse by matrix products: a triangular
    solve (a LAPACK call) inside the tempering's vmapped `while_loop` hung XLA's CPU runtime
    (jax 0.10.2, 4 copies, d = 8), and products are faster at these sizes anyway.
    """

    log_weights: jax.Array
    means: jax.Array
    cholesky: jax.Array
    inverse_cholesky: jax.Array


def _component_log_densities(points, mixture: GaussianMixture):
    """log N(w_j; mu_m, Sigma_m) for every point and component, shape (N, M)."""
    dim = points.shape[-1]
    residual = jnp.einsum("mij,mnj->nmi", mixture.inverse_cholesky,
                          points[None, :, :] - mixture.means[:, None, :])
    log_det = -jnp.sum(jnp.log(jnp.diagonal(mixture.inverse_cholesky, axis1=1, axis2=2)), axis=1)
    return -0.5 * jnp.sum(residual**2, axis=2) - log_det - 0.5 * dim * jnp.log(2 * jnp.pi)


def mixture_log_density(points, mixture: GaussianMixture):
    """log q(w_j) of each point, shape (N,)."""
    return logsumexp(_component_log_densities(points, mixture) + mixture.log_weights, axis=1)


def padded_mixture(mixture: GaussianMixture, size: int) -> GaussianMixture:
    """`mixture` with components of weight 0 (log weight -inf; mean 0, identity covariance)
    added up to `size` components (as it is when it has that many or more): the same density,
    in arrays of one shape for every smaller mixture (its draws differ: a categorical draw
    reads noise for every component)."""
    extra = size - mixture.means.shape[0]
    if extra <= 0:
        return mixture
    dim, dtype = mixture.means.shape[1], mixture.means.dtype
    eye = jnp.broadcast_to(jnp.eye(dim, dtype=dtype), (extra, dim, dim))
    return GaussianMixture(
        log_weights=jnp.concatenate([mixture.log_weights,
                                     jnp.full(extra, -jnp.inf, mixture.log_weights.dtype)]),
        means=jnp.concatenate([mixture.means, jnp.zeros((extra, dim), dtype)]),
        cholesky=jnp.concatenate([mixture.cholesky, eye]),
        inverse_cholesky=jnp.concatenate([mixture.inverse_cholesky, eye]),
    )


def sample_mixture(key, mixture: GaussianMixture, num: int):
    """`num` independent draws from the mixture, shape (num, d)."""
    component_key, noise_key = jax.random.split(key)
    components = flat_random.categorical(component_key, mixture.log_weights, num)
    noise = flat_random.normal(noise_key, (num, mixture.means.shape[1]), mixture.means.dtype)
    factors = mixture.cholesky[components]
    return mixture.means[components] + jnp.einsum("nij,nj->ni", factors, noise)


def fit_gaussian_mixture(
    key, points, whitening, *, num_components: int, num_iterations: int = 30,
    ridge: float = 1e-4,
) -> GaussianMixture:
    """Fit q to the rows of `points` (N, d) by EM (module doc); `whitening` is L, L L^T = Cov."""
    size, dim = points.shape
    dtype = points.dtype
    white = jax.scipy.linalg.solve_triangular(whitening, (points - points.mean(0)).T,
                                              lower=True).T
    eye = jnp.eye(dim, dtype=dtype)
    start = jax.random.choice(key, size, (num_components,), replace=False)
    spread = num_components ** (-1.0 / dim)
    initial = GaussianMixture(
        log_weights=jnp.full(num_components, -jnp.log(num_components), dtype),
        means=white[start],
        cholesky=jnp.broadcast_to(spread * eye, (num_components, dim, dim)),
        inverse_cholesky=jnp.broadcast_to(eye / spread, (num_components, dim, dim)),
    )

    def em_step(mixture, _):
        log_joint = _component_log_densities(white, mixture) + mixture.log_weights
        responsibility = jnp.exp(log_joint - logsumexp(log_joint, axis=1, keepdims=True))
        counts = responsibility.sum(axis=0)  # (M,)
        alive = counts > 1e-8 * size
        safe = jnp.where(alive, counts, 1.0)
        means = responsibility.T @ white / safe[:, None]
        centered = white[None, :, :] - means[:, None, :]  # (M, N, d)
        covariances = jnp.einsum("nm,mni,mnj->mij", responsibility, centered, centered)
        covariances = covariances / safe[:, None, None] + ridge * eye
        factors = jnp.linalg.cholesky(covariances)
        inverses = jax.scipy.linalg.solve_triangular(
            factors, jnp.broadcast_to(eye, factors.shape), lower=True
        )
        update = (alive & jnp.all(jnp.isfinite(inverses), axis=(1, 2)))[:, None, None]
        new = GaussianMixture(
            log_weights=jnp.log(jnp.where(alive, counts, 1e-300) / size),
            means=jnp.where(alive[:, None], means, mixture.means),
            cholesky=jnp.where(update, factors, mixture.cholesky),
            inverse_cholesky=jnp.where(update, inverses, mixture.inverse_cholesky),
        )
        return new, None

    fitted, _ = jax.lax.scan(em_step, initial, None, length=num_iterations)
    # Back to the original coordinates: w = mean + L u.
    whitening_inverse = jax.scipy.linalg.solve_triangular(whitening, eye, lower=True)
    return GaussianMixture(
        log_weights=fitted.log_weights - logsumexp(fitted.log_weights),
        means=points.mean(0) + fitted.means @ whitening.T,
        cholesky=jnp.einsum("ij,mjk->mik", whitening, fitted.cholesky),
        inverse_cholesky=jnp.einsum("mij,jk->mik", fitted.inverse_cholesky, whitening_inverse),
    )


def whitening_factor(points):
    """Cholesky factor L of the points' covariance (L L^T = Cov), with a relative jitter of
    1e-10 so that a cloud collapsed in some direction still has a factor."""
    center = points - points.mean(axis=0)
    covariance = center.T @ center / points.shape[0]
    jitter = 1e-10 * jnp.trace(covariance) / points.shape[1] + 1e-30
    return jnp.linalg.cholesky(covariance + jitter * jnp.eye(points.shape[1], dtype=points.dtype))


def _halves(position):
    """The first 2 * (N // 2) rows as two halves, shape (2, N // 2, ...); with N odd the last
    particle belongs to neither (it is moved by the gradient moves alone)."""
    half = position.shape[0] // 2
    return position[:2 * half].reshape(2, half, *position.shape[1:])


def fit_cross_mixtures(key, position, num_components: int):
    """Mixtures fitted to the first and to the second half of the particles (`_halves`), as
    one `GaussianMixture` whose arrays have a leading axis of 2, in that order."""

    def fit(index, points):
        return fit_gaussian_mixture(jax.random.fold_in(key, index), points,
                                    whitening_factor(points), num_components=num_components)

    return jax.vmap(fit)(jnp.arange(2), _halves(position))


def _independence_moves(key, position, loglik, log_target_values, mixture):
    """One independent MH transition per row of `position`, proposals drawn from `mixture`.

    Accepts w' ~ q with probability min(1, pi(w') q(w) / (pi(w) q(w'))).
    """
    proposal_key, accept_key = jax.random.split(key)
    proposal = sample_mixture(proposal_key, mixture, position.shape[0])
    size = position.shape[0]
    values, logliks = log_target_values(jnp.concatenate([position, proposal]))  # one trace
    value, new_value, new_loglik = values[:size], values[size:], logliks[size:]
    log_ratio = (new_value - value + mixture_log_density(position, mixture)
                 - mixture_log_density(proposal, mixture))
    log_ratio = jnp.where(jnp.isnan(log_ratio), -jnp.inf, log_ratio)
    uniform = jax.random.uniform(accept_key, log_ratio.shape, log_ratio.dtype)
    accept = jnp.log(uniform) < log_ratio
    return (
        jnp.where(accept[:, None], proposal, position),
        jnp.where(accept, new_loglik, loglik),
        jnp.mean(jnp.exp(jnp.minimum(log_ratio, 0.0))),
    )


def cross_fitted_independence_sweep(key, position, loglik, log_target_values, mixtures):
    """Independent MH for every particle, each half with the mixture fitted to the other half.

    Args:
      key: PRNG key.
      position: (N, d) particles; loglik: (N,) their log-likelihoods.
      log_target_values: (M, d) points -> ((M,) log target, (M,) log-likelihood).
      mixtures: `fit_cross_mixtures(key, position_at_fit, ...)`.

    Returns:
      (position, loglik, mean acceptance probability over the moved particles).

    Why cross-fitted: a proposal fitted to the particle being moved depends on that particle's
    own position, and the move is then not invariant for the target. Measured with tempered
    SMC on a Gaussian likelihood with the exact evidence (Old Faithful, K = 1, d = 2): 8
    components fitted to all 500 particles gave log Z 0.155 +- 0.049 too high; fitted to the
    other half, 0.027 +- 0.029 too low. Resampled duplicates are contiguous, so at most one
    ancestor has offspring in both halves. The mixtures were fitted before either half moves,
    so the two halves move independently of each other, side by side (`vmap`: one trace of
    the target in the compiled program instead of two).
    """
    other = jax.tree_util.tree_map(lambda leaf: leaf[::-1], mixtures)
    moved, moved_loglik, rates = jax.vmap(
        lambda *args: _independence_moves(*args[:3], log_target_values, args[3])
    )(jax.random.split(key), _halves(position), _halves(loglik), other)
    count = 2 * moved_loglik.shape[1]
    position = position.at[:count].set(moved.reshape(count, -1))
    return position, loglik.at[:count].set(moved_loglik.reshape(count)), jnp.mean(rates)
