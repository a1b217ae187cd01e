"""Two-layer networks n -> h -> m with Gaussian noise: F(x) = U act(V x + b) + c.

Data are {"x": (n, n_in), "y": (n, n_out)}. Names follow the symmetry paper (seed 003):
V (h, n_in) and b (h,) into the hidden layer, U (n_out, h) and c (n_out,) out of it.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpyro
import numpyro.distributions as dist

from slt.models.base import ModelSpec, gaussian_regression_data
from slt.validation import require_int

__all__ = ["ACTIVATIONS", "two_layer_network"]

ACTIVATIONS = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "sigmoid": jax.nn.sigmoid,
    "identity": lambda z: z,
}


def two_layer_network(
    num_inputs: int,
    num_hidden: int,
    num_outputs: int,
    *,
    activation: str = "tanh",
    bias: bool = True,
    noise_scale: float | None = 1.0,
    prior_scale: float = 1.0,
    input_scale: float = 1.0,
) -> ModelSpec:
    """Two-layer network y = U act(V x + b) + c + eps, eps ~ N(0, s^2 I).

    Prior: every weight and bias ~ N(0, prior_scale^2). Noise: known sd `noise_scale`, or with
    `noise_scale=None` learned, s ~ LogNormal(0, 1) (site "noise_scale").
    Sites: "V" (h, n_in), ["b" (h,)], "U" (n_out, h), ["c" (n_out,)], ["noise_scale"].
    d = h n_in + h n_out [+ h + n_out with biases] [+ 1 with learned noise].
    Activations: tanh, relu, sigmoid, identity (see `ACTIVATIONS`). Simulated x ~ N(0,
    input_scale^2 I).
    """
    sizes = tuple(require_int(name, value, minimum=1) for name, value in (
        ("num_inputs", num_inputs), ("num_hidden", num_hidden), ("num_outputs", num_outputs)))
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    if not prior_scale > 0 or (noise_scale is not None and not noise_scale > 0):
        raise ValueError("prior_scale and noise_scale must be > 0")
    n_in, h, n_out = sizes
    act = ACTIVATIONS[activation]
    shapes = {"V": (h, n_in), "b": (h,), "U": (n_out, h), "c": (n_out,)}
    if not bias:
        shapes = {name: shapes[name] for name in ("V", "U")}

    def mean_fn(values, x):
        hidden = x @ values["V"].T + (values["b"] if bias else 0.0)
        return act(hidden) @ values["U"].T + (values["c"] if bias else 0.0)

    def model(x, y=None):
        values = {
            name: numpyro.sample(
                name, dist.Normal(0.0, prior_scale).expand(shape).to_event(len(shape))
            )
            for name, shape in shapes.items()
        }
        noise = (
            numpyro.sample("noise_scale", dist.LogNormal(0.0, 1.0))
            if noise_scale is None
            else noise_scale
        )
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(mean_fn(values, x), noise).to_event(1), obs=y)

    sites = tuple(shapes) + (("noise_scale",) if noise_scale is None else ())

    def simulate(key, values, n):
        noise = values["noise_scale"] if noise_scale is None else noise_scale
        return gaussian_regression_data(
            key, n, (n_in,), partial(mean_fn, values), noise, input_scale
        )

    return ModelSpec(
        name=f"two_layer_{activation}({n_in}-{h}-{n_out}{'' if bias else ', no bias'})",
        model=model,
        dim=sum(int(jnp.prod(jnp.array(s))) for s in shapes.values())
        + (noise_scale is None),
        prior=(
            f"every weight and bias ~ N(0, {prior_scale}^2); "
            + (
                "noise_scale ~ LogNormal(0, 1)"
                if noise_scale is None
                else f"noise sd {noise_scale} (known)"
            )
        ),
        site_names=sites,
        simulate_fn=simulate,
        mean_fn=mean_fn,
        noise_scale=noise_scale,
        input_scale=input_scale,
    )
