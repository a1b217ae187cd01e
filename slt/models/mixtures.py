"""Gaussian mixtures, written with `MixtureSameFamily` so per-example likelihoods are marginal.

Data are {"y": (n,)} for 1-D mixtures and {"y": (n, D)} for D-dimensional ones.
"""

from __future__ import annotations

from dataclasses import replace

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from slt import flat_random
from slt.models.base import ModelSpec
from slt.validation import require_int

__all__ = ["gaussian_mixture", "fixed_component_mixture", "two_component_mixture"]


def gaussian_mixture(
    num_components: int,
    dim: int = 1,
    *,
    shared_scale: bool = False,
    mean_prior_scale: float = 10.0,
    weight_concentration: float = 1.0,
) -> ModelSpec:
    """K-component Gaussian mixture with diagonal covariances, weights on the simplex.

    p(y | w) = sum_k weights_k N(y; means_k, diag(scales_k^2)).

    Prior: weights ~ Dirichlet(weight_concentration * 1_K); means_k ~ N(0, mean_prior_scale^2 I_D);
    each scale ~ LogNormal(0, 1). The log-normal prior vanishes faster than any power of the
    scale at 0, so the MAP exists even though the likelihood is unbounded when a component
    collapses on one point (the MLE does not exist for separate scales).

    Sites: "weights" (K,) [K - 1 free], "means" (K, D), "scales" (K, D), or (D,) with
    `shared_scale=True`. d = (K - 1) + K D + (D if shared_scale else K D).
    """
    K = require_int("num_components", num_components, minimum=1)
    D = require_int("dim", dim, minimum=1)
    if not (mean_prior_scale > 0 and weight_concentration > 0):
        raise ValueError("mean_prior_scale and weight_concentration must be > 0")
    scale_shape = (D,) if shared_scale else (K, D)

    def components(values):
        means, scales = values["means"], jnp.broadcast_to(values["scales"], (K, D))
        if D == 1:
            return dist.Normal(means[:, 0], scales[:, 0])
        return dist.Normal(means, scales).to_event(1)

    def model(y=None):
        weights = numpyro.sample("weights", dist.Dirichlet(jnp.full(K, weight_concentration)))
        means = numpyro.sample(
            "means", dist.Normal(0.0, mean_prior_scale).expand([K, D]).to_event(2)
        )
        scales = numpyro.sample(
            "scales", dist.LogNormal(0.0, 1.0).expand(scale_shape).to_event(len(scale_shape))
        )
        mixture = dist.MixtureSameFamily(
            dist.Categorical(weights), components({"means": means, "scales": scales})
        )
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", mixture, obs=y)

    def simulate(key, values, n):
        key_label, key_noise = jax.random.split(key)
        labels = flat_random.categorical(key_label, jnp.log(values["weights"]), n)
        scales = jnp.broadcast_to(values["scales"], (K, D))
        y = values["means"][labels] + scales[labels] * flat_random.normal(key_noise, (n, D))
        return {"y": y[:, 0] if D == 1 else y}

    return ModelSpec(
        name=f"gaussian_mixture(K={K}, D={D}{', shared scale' if shared_scale else ''})",
        model=model,
        dim=(K - 1) + K * D + (D if shared_scale else K * D),
        prior=(
            f"weights ~ Dirichlet({weight_concentration}); means ~ N(0, "
            f"{mean_prior_scale}^2); scales ~ LogNormal(0, 1)"
        ),
        site_names=("weights", "means", "scales"),
        simulate_fn=simulate,
        exchangeable=() if K == 1 else ("means", "weights") if shared_scale
        else ("means", "scales", "weights"),
    )


def fixed_component_mixture(
    *,
    learn_scale: bool = True,
    mean_prior_scale: float = 1.0,
    names: tuple[str, str, str] = ("pi", "mu", "sigma"),
) -> ModelSpec:
    """The seed slides' mixture pi N(mu, sigma^2) + (1 - pi) N(0, 1), one component fixed.

    Prior: pi ~ Uniform(0, 1); mu ~ N(0, mean_prior_scale^2); sigma ~ LogNormal(0, 1) when
    learned (else sigma = 1). Singular at pi = 0 (mu, sigma unidentifiable) and at mu = 0,
    sigma = 1 (pi unidentifiable). d = 3, or 2 with `learn_scale=False`. Data: y (n,).
    `names` renames the sites (the toy `two_component_mixture` calls pi, mu "a", "b").
    """
    if not mean_prior_scale > 0:
        raise ValueError(f"mean_prior_scale must be > 0, got {mean_prior_scale}")
    weight_name, mean_name, scale_name = names

    def model(y=None):
        weight = numpyro.sample(weight_name, dist.Uniform(0.0, 1.0))
        mean = numpyro.sample(mean_name, dist.Normal(0.0, mean_prior_scale))
        scale = numpyro.sample(scale_name, dist.LogNormal(0.0, 1.0)) if learn_scale else 1.0
        mixture = dist.MixtureSameFamily(
            dist.Categorical(jnp.stack([1.0 - weight, weight])),
            dist.Normal(jnp.stack([0.0, mean]), jnp.stack([jnp.ones_like(scale), scale])),
        )
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", mixture, obs=y)

    sites = (weight_name, mean_name) + ((scale_name,) if learn_scale else ())

    def simulate(key, values, n):
        key_label, key_noise = jax.random.split(key)
        moved = jax.random.bernoulli(key_label, values[weight_name], (n,))
        scale = values[scale_name] if learn_scale else 1.0
        noise = jax.random.normal(key_noise, (n,))
        return {"y": jnp.where(moved, values[mean_name] + scale * noise, noise)}

    return ModelSpec(
        name=f"fixed_component_mixture({', '.join(sites)})",
        model=model,
        dim=len(sites),
        prior=(
            f"{weight_name} ~ Uniform(0, 1); {mean_name} ~ N(0, {mean_prior_scale}^2)"
            + (f"; {scale_name} ~ LogNormal(0, 1)" if learn_scale else "; sigma = 1")
        ),
        site_names=sites,
        simulate_fn=simulate,
    )


def two_component_mixture(*, mean_prior_scale: float = 1.0) -> ModelSpec:
    """The toy (1 - a) N(0, 1) + a N(b, 1): a ~ Uniform(0, 1), b ~ N(0, mean_prior_scale^2).

    At the truth N(0, 1) (a b = 0) the learning coefficient is 1/2 with multiplicity 2
    (`slt.truth.two_component_mixture_rlct`); the exact log evidence is a 2-D quadrature
    (`slt.truth.two_component_mixture_log_evidence`). d = 2. Data: y (n,).
    """
    spec = fixed_component_mixture(
        learn_scale=False, mean_prior_scale=mean_prior_scale, names=("a", "b", "sigma")
    )
    return replace(spec, name="two_component_mixture")
