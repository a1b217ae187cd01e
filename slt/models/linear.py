"""Linear models: Bayesian linear regression, reduced-rank regression, deep linear networks.

Data are {"x": (n, M), "y": ...}: y has shape (n,) for linear regression and (n, N) for
reduced-rank regression and deep linear networks. Exact answers: `slt.truth` (closed-form
evidences for linear regression, Aoyagi's learning coefficients for the other two).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from slt import flat_random
from slt.models.base import ModelSpec, gaussian_regression_data
from slt.validation import require_int

__all__ = [
    "linear_regression",
    "deep_linear_network",
    "reduced_rank_regression",
    "random_low_rank",
]


def _positive(name: str, value: float) -> float:
    if not value > 0:
        raise ValueError(f"{name} must be > 0, got {value}")
    return float(value)


def _widths(widths: Sequence[int]) -> tuple[int, ...]:
    widths = tuple(require_int("every width", w, minimum=1) for w in widths)
    if len(widths) < 2 or min(widths) < 1:
        raise ValueError(f"widths must be >= 2 positive integers, got {widths}")
    return widths


def linear_regression(
    num_features: int,
    *,
    noise_scale: float | None = 1.0,
    prior_precision: float = 1.0,
    noise_a0: float = 2.0,
    noise_b0: float = 1.0,
    input_scale: float = 1.0,
) -> ModelSpec:
    """Bayesian linear regression y = x w + eps, with the conjugate priors of TRUTH.md.

    Known noise (`noise_scale` = s > 0): eps ~ N(0, s^2), w ~ N(0, a^{-1} I_d) with a =
    `prior_precision`; d = num_features parameters; log Z in closed form
    (`slt.truth.linear_regression_log_evidence`).

    Unknown noise (`noise_scale=None`): normal–inverse-gamma, s^2 ~ InvGamma(a0, b0) (site
    "noise_variance"), w | s^2 ~ N(0, s^2 a^{-1} I_d); d = num_features + 1; log Z in closed form
    (`slt.truth.nig_linear_regression_log_evidence` with mu0 = 0, Lambda0 = a I).

    Sites: "w" (d,) [, "noise_variance"]. Data: x (n, d), y (n,); simulated x ~ N(0,
    input_scale^2 I).
    """
    d = require_int("num_features", num_features, minimum=1)
    precision = _positive("prior_precision", prior_precision)
    if noise_scale is None:
        a0, b0 = _positive("noise_a0", noise_a0), _positive("noise_b0", noise_b0)

        def model(x, y=None):
            variance = numpyro.sample("noise_variance", dist.InverseGamma(a0, b0))
            scale = jnp.sqrt(variance / precision)
            w = numpyro.sample("w", dist.Normal(0.0, scale).expand([d]).to_event(1))
            with numpyro.plate("data", x.shape[0]):
                numpyro.sample("y", dist.Normal(x @ w, jnp.sqrt(variance)), obs=y)

        sites = ("noise_variance", "w")
        prior = (
            f"noise_variance ~ InvGamma({a0}, {b0}); "
            f"w | noise_variance ~ N(0, noise_variance / {precision} I_{d})"
        )
        fixed_noise = None
    else:
        noise = _positive("noise_scale", noise_scale)

        def model(x, y=None):
            w = numpyro.sample("w", dist.Normal(0.0, precision**-0.5).expand([d]).to_event(1))
            with numpyro.plate("data", x.shape[0]):
                numpyro.sample("y", dist.Normal(x @ w, noise), obs=y)

        sites = ("w",)
        prior = f"w ~ N(0, {precision}^-1 I_{d}); noise sd {noise} (known)"
        fixed_noise = noise

    def mean_fn(values, x):
        return x @ values["w"]

    def simulate(key, values, n):
        noise = fixed_noise if fixed_noise is not None else jnp.sqrt(values["noise_variance"])
        return gaussian_regression_data(key, n, (d,), partial(mean_fn, values), noise, input_scale)

    return ModelSpec(
        name=f"linear_regression(d={d})",
        model=model,
        dim=d + (noise_scale is None),
        prior=prior,
        site_names=sites,
        simulate_fn=simulate,
        mean_fn=mean_fn,
        noise_scale=fixed_noise,
        input_scale=input_scale,
    )


def deep_linear_network(
    widths: Sequence[int],
    *,
    noise_scale: float = 1.0,
    prior_scale: float = 1.0,
    input_scale: float = 1.0,
) -> ModelSpec:
    """Deep linear network y = W_L ... W_1 x + eps, widths [H_1 (input), ..., H_{L+1} (output)].

    Prior: every entry of every W_l ~ N(0, prior_scale^2); eps ~ N(0, noise_scale^2 I). Sites
    "W1", ..., "WL" with W_l of shape (H_{l+1}, H_l); d = sum_l H_l H_{l+1}. The learning
    coefficient at a truth of rank r is `slt.truth.dln_rlct(widths, r)`. Data: x (n, H_1),
    y (n, H_{L+1}); simulated x ~ N(0, input_scale^2 I).
    """
    widths = _widths(widths)
    noise = _positive("noise_scale", noise_scale)
    prior_sd = _positive("prior_scale", prior_scale)
    names = tuple(f"W{layer + 1}" for layer in range(len(widths) - 1))
    shapes = {name: (widths[i + 1], widths[i]) for i, name in enumerate(names)}

    def mean_fn(values, x):
        for name in names:
            x = x @ values[name].T
        return x

    def model(x, y=None):
        values = {
            name: numpyro.sample(name, dist.Normal(0.0, prior_sd).expand(shape).to_event(2))
            for name, shape in shapes.items()
        }
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(mean_fn(values, x), noise).to_event(1), obs=y)

    def simulate(key, values, n):
        return gaussian_regression_data(
            key, n, (widths[0],), partial(mean_fn, values), noise, input_scale
        )

    return ModelSpec(
        name="deep_linear_network(" + "-".join(map(str, widths)) + ")",
        model=model,
        dim=sum(a * b for a, b in zip(widths[:-1], widths[1:], strict=True)),
        prior=f"every entry of W1..W{len(names)} ~ N(0, {prior_sd}^2); noise sd {noise} (known)",
        site_names=names,
        simulate_fn=simulate,
        mean_fn=mean_fn,
        noise_scale=noise,
        input_scale=input_scale,
    )


def reduced_rank_regression(
    num_inputs: int,
    num_hidden: int,
    num_outputs: int,
    *,
    noise_scale: float = 1.0,
    prior_scale: float = 1.0,
    input_scale: float = 1.0,
) -> ModelSpec:
    """Reduced-rank regression y = B A x + eps: the depth-2 deep linear network [M, H, N].

    A = "W1" (H x M), B = "W2" (N x H); priors and data as in `deep_linear_network`. The learning
    coefficient is `slt.truth.rrr_rlct(M, N, H, r)`. Watanabe's WBIC experiment uses M = N = 6,
    noise_scale 0.1, prior_scale 10, input_scale 3 (`slt.truth.watanabe_wbic_experiment()`).
    """
    spec = deep_linear_network(
        [num_inputs, num_hidden, num_outputs],
        noise_scale=noise_scale,
        prior_scale=prior_scale,
        input_scale=input_scale,
    )
    name = f"reduced_rank_regression(M={num_inputs}, H={num_hidden}, N={num_outputs})"
    return replace(spec, name=name)


def random_low_rank(key: jax.Array, widths: Sequence[int], rank: int, scale: float = 1.0):
    """True weights for a deep linear network whose product has rank `rank` exactly.

    Each W_l is a N(0, scale^2) matrix; the first layer's output is projected on a random
    rank-`rank` subspace (rank 0 gives zero weights in W1), so the product W_L ... W_1 has rank
    `rank` with probability one when rank <= min(widths).
    """
    widths = _widths(widths)
    rank = require_int("rank", rank, minimum=0)
    if not rank <= min(widths):
        raise ValueError(f"rank must be in [0, min(widths)={min(widths)}], got {rank}")
    keys = jax.random.split(key, len(widths))
    values = {
        f"W{i + 1}": scale * flat_random.normal(keys[i], (widths[i + 1], widths[i]))
        for i in range(len(widths) - 1)
    }
    basis = flat_random.normal(keys[-1], (widths[1], rank))
    projector = basis @ jnp.linalg.pinv(basis) if rank else jnp.zeros((widths[1], widths[1]))
    values["W1"] = projector @ values["W1"]
    return values
