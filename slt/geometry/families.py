"""Exponential-family observations: natural parameters, the Fisher's root, and exact KL.

For an observation y whose distribution is an exponential family with natural parameter
eta(theta) (per example, per output entry), the Fisher information of theta is

    I(theta) = sum_i w_i J_i^T F(eta_i) J_i,   J_i = d eta_i / d theta,

with F(eta) = Cov[T(y)] the family's own Fisher in eta (Amari & Nagaoka, "Methods of
Information Geometry", 2000, sec. 2.6). Writing F = R^T R with R held fixed at theta, the
rows R J_i are the Jacobian of z(t) = R eta(t): the same "whitened outputs" form as
Gaussian noise, so that the exact, matrix-free and natural-gradient paths share one code.

| family | eta | F(eta) | R |
|---|---|---|---|
| Bernoulli (logits or probs) | logit p | p (1 - p) | sqrt(p (1 - p)) |
| Binomial, N trials | logit p | N p (1 - p) | sqrt(N p (1 - p)) |
| Poisson | log rate | rate | sqrt(rate) |
| Categorical, K classes | log p (K entries) | diag(p) - p p^T | diag(sqrt p) - sqrt(p) p^T |
| MultivariateNormal, fixed Sigma = L L^T | the mean m (k entries) | Sigma^-1 | L^-1 |

(The categorical R: R^T R = diag(p) - 2 p p^T + (sum_k p_k) p p^T = diag(p) - p p^T. For the
multivariate normal the mean stands in for eta = Sigma^-1 m: with Sigma fixed the two differ
by a constant linear map, and J^T Sigma^-1 J is the Fisher in either; a covariance that
depends on the parameters is not this family here, `observation` routes it to Monte Carlo.)

KL(p_eta0 || p_eta1) per entry, closed forms: Bernoulli p0 log(p0/p1) + (1-p0)
log((1-p0)/(1-p1)); Binomial N times that; Poisson r0 log(r0/r1) - r0 + r1; Categorical
sum_k p0_k (log p0_k - log p1_k); MultivariateNormal with one fixed Sigma
|L^-1 (m0 - m1)|^2 / 2, returned per entry of L^-1 (m0 - m1).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpyro.distributions as dist

__all__ = ["EXPONENTIAL_FAMILIES", "family_of", "family_kl", "natural_parameter",
           "whitening_root"]

EXPONENTIAL_FAMILIES = ("bernoulli", "binomial", "poisson", "categorical", "multivariate_normal")


def family_of(base: dist.Distribution) -> str | None:
    """The family name of an unwrapped NumPyro distribution, or None if not one of these."""
    if isinstance(base, (dist.BernoulliLogits, dist.BernoulliProbs)):
        return "bernoulli"
    if isinstance(base, (dist.BinomialLogits, dist.BinomialProbs)):
        return "binomial"
    if isinstance(base, dist.Poisson) and not isinstance(base, dist.ZeroInflatedPoisson):
        return "poisson"
    if isinstance(base, (dist.CategoricalLogits, dist.CategoricalProbs)):
        return "categorical"
    if isinstance(base, dist.MultivariateNormal):
        return "multivariate_normal"
    return None


def natural_parameter(family: str, base: dist.Distribution) -> jax.Array:
    """eta of every entry: logits (Bernoulli, Binomial), log rate (Poisson), or the K log
    probabilities (Categorical, normalised: a shift of eta along 1 is not a change of p)."""
    if family in ("bernoulli", "binomial"):
        return base.logits
    if family == "poisson":
        return jnp.log(base.rate)
    if family == "multivariate_normal":
        return base.loc
    return jax.nn.log_softmax(base.logits, axis=-1)


def whitening_root(family: str, base: dist.Distribution):
    """eta -> R eta with R the family's Fisher root at `base` (module table), held fixed."""
    if family == "bernoulli":
        p = jax.lax.stop_gradient(base.probs)
        return lambda eta: jnp.sqrt(p * (1 - p)) * eta
    if family == "binomial":
        p, trials = jax.lax.stop_gradient(base.probs), base.total_count
        return lambda eta: jnp.sqrt(trials * p * (1 - p)) * eta
    if family == "poisson":
        rate = jax.lax.stop_gradient(base.rate)
        return lambda eta: jnp.sqrt(rate) * eta
    if family == "multivariate_normal":
        return _whitening_by(base)
    p = jax.lax.stop_gradient(jax.nn.softmax(base.logits, axis=-1))
    root_p = jnp.sqrt(p)
    # (R eta)_k = sqrt(p_k) eta_k - sqrt(p_k) sum_j p_j eta_j
    return lambda eta: root_p * (eta - jnp.sum(p * eta, axis=-1, keepdims=True))


def family_kl(family: str, first: dist.Distribution, second: dist.Distribution) -> jax.Array:
    """KL(first || second) per entry (summed over the K classes of a categorical)."""
    if family in ("bernoulli", "binomial"):
        l0, l1 = first.logits, second.logits
        p0 = jax.nn.sigmoid(l0)
        per_trial = (p0 * (jax.nn.log_sigmoid(l0) - jax.nn.log_sigmoid(l1))
                     + (1 - p0) * (jax.nn.log_sigmoid(-l0) - jax.nn.log_sigmoid(-l1)))
        return per_trial * (first.total_count if family == "binomial" else 1.0)
    if family == "poisson":
        r0, r1 = first.rate, second.rate
        return r0 * (jnp.log(r0) - jnp.log(r1)) - r0 + r1
    if family == "multivariate_normal":
        return 0.5 * _whitening_by(first)(first.loc - second.loc) ** 2
    log_p0 = jax.nn.log_softmax(first.logits, axis=-1)
    log_p1 = jax.nn.log_softmax(second.logits, axis=-1)
    return jnp.sum(jnp.exp(log_p0) * (log_p0 - log_p1), axis=-1)


def _whitening_by(base: dist.MultivariateNormal):
    """v -> L^-1 v over the last axis, L the (fixed) Cholesky factor of base's covariance."""
    inverse = jax.lax.stop_gradient(jnp.linalg.inv(base.scale_tril))
    return lambda v: jnp.squeeze(inverse @ v[..., None], -1)
