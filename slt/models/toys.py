"""The classic singular toys: normal crossing y = x prod_j w_j^{k_j} + eps, the product model.

Data are {"x": (n,), "y": (n,)}, x ~ N(0, input_scale^2), eps ~ N(0, noise_scale^2). The
two-component mixture toy lives with the mixtures (`slt.models.two_component_mixture`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import partial

import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from slt.models.base import ModelSpec, gaussian_regression_data
from slt.validation import require_int

__all__ = ["normal_crossing", "product_model"]


def normal_crossing(
    powers: Sequence[int],
    *,
    noise_scale: float = 1.0,
    prior_scale: float = 1.0,
    input_scale: float = 1.0,
) -> ModelSpec:
    """Normal-crossing model y = x * prod_j w_j^{k_j} + eps, w_j ~ N(0, prior_scale^2).

    At the truth w = 0 the KL divergence is K(w) = E[x^2] prod_j w_j^{2 k_j} / (2 noise^2), so the
    learning coefficient is `slt.truth.normal_crossing_rlct(powers)`: 1 / (2 max_j k_j) with
    multiplicity #{j : k_j = max k}. Site "w" of shape (len(powers),); d = len(powers).
    """
    powers = tuple(require_int("every power", k, minimum=0) for k in powers)
    if not powers or min(powers) < 0 or max(powers) < 1:
        raise ValueError(f"powers must be non-negative integers, one at least 1; got {powers}")
    if min(noise_scale, prior_scale, input_scale) <= 0:
        raise ValueError("noise_scale, prior_scale and input_scale must be > 0")
    exponents = jnp.array(powers)

    def mean_fn(values, x):
        return x * jnp.prod(values["w"] ** exponents)

    def model(x, y=None):
        w = numpyro.sample("w", dist.Normal(0.0, prior_scale).expand([len(powers)]).to_event(1))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(mean_fn({"w": w}, x), noise_scale), obs=y)

    def simulate(key, values, n):
        return gaussian_regression_data(
            key, n, (), partial(mean_fn, values), noise_scale, input_scale
        )

    return ModelSpec(
        name="normal_crossing(" + ",".join(map(str, powers)) + ")",
        model=model,
        dim=len(powers),
        prior=f"w_j ~ N(0, {prior_scale}^2) iid; noise sd {noise_scale} (known)",
        site_names=("w",),
        simulate_fn=simulate,
        mean_fn=mean_fn,
        noise_scale=noise_scale,
        input_scale=input_scale,
    )


def product_model(*, prior_scale: float = 1.0, noise_scale: float = 1.0) -> ModelSpec:
    """The product model y = a b x + eps: `normal_crossing((1, 1))` with w = (a, b).

    With a, b ~ N(0, 1) and unit noise its log evidence is exact by 1-D quadrature
    (`slt.truth.product_model_log_evidence`); lambda = 1/2, multiplicity 2 at ab = 0 and 1
    otherwise (`slt.truth.product_model_rlct`).
    """
    spec = normal_crossing((1, 1), noise_scale=noise_scale, prior_scale=prior_scale)
    return replace(spec, name="product_model")
