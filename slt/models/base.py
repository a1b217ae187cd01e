"""`ModelSpec`: a NumPyro model with its documented prior, parameter count and data generator."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp

from slt import flat_random
from slt.problem import Problem
from slt.validation import require_int

__all__ = ["ModelSpec", "gaussian_regression_data"]


@dataclass(frozen=True)
class ModelSpec:
    """A model of the library: what to sample from, what it costs, how to make data.

    Attributes:
      name: short name, e.g. "two_layer_tanh(1-3-1)".
      model: the NumPyro model, called with the data as keyword arguments (`model(x=x, y=y)`).
      dim: number of free (unconstrained) parameters d; equals `Problem.dim`.
      prior: the prior, in words and formulas.
      site_names: the latent sites, in the order the model samples them.
      simulate_fn: `(key, true_params, n) -> data` for `simulate`.
      mean_fn: for Gaussian-noise regression models, the regression function
        `mean_fn(values, x) -> E[y | x]` on constrained values (None for density models).
      noise_scale: the known noise standard deviation of a regression model, if fixed.
      input_scale: inputs are simulated as x ~ N(0, input_scale^2 I) (regression models).
      exchangeable: sites whose leading axis indexes interchangeable components (`Problem`'s
        argument of that name), e.g. a mixture's ("means", "scales", "weights").
    """

    name: str
    model: Callable[..., Any]
    dim: int
    prior: str
    site_names: tuple[str, ...]
    simulate_fn: Callable[[jax.Array, Mapping[str, Any], int], dict[str, jax.Array]] = field(
        repr=False
    )
    mean_fn: Callable[[Mapping[str, Any], jax.Array], jax.Array] | None = field(
        default=None, repr=False
    )
    noise_scale: float | None = None
    input_scale: float | None = None
    exchangeable: tuple[str, ...] = ()

    def simulate(self, key: jax.Array, true_params: Mapping[str, Any], n: int) -> dict:
        """Draw a data set of n examples from the model at `true_params` (constrained values)."""
        missing = set(self.site_names) - set(true_params)
        if missing:
            raise ValueError(f"{self.name}: true_params lack {sorted(missing)}")
        n = require_int("n", n, minimum=1)
        values = {name: jnp.asarray(true_params[name]) for name in self.site_names}
        return self.simulate_fn(key, values, n)

    def problem(self, data: Mapping[str, Any], **kwargs: Any) -> Problem:
        """`Problem(self.model, data, exchangeable=self.exchangeable, **kwargs)`."""
        return Problem(self.model, data, **({"exchangeable": self.exchangeable} | kwargs))


def gaussian_regression_data(
    key: jax.Array,
    n: int,
    input_shape: tuple[int, ...],
    mean: Callable[[jax.Array], jax.Array],
    noise_scale: jax.Array | float,
    input_scale: float,
) -> dict[str, jax.Array]:
    """x ~ N(0, input_scale^2 I) of shape (n, *input_shape), y = mean(x) + noise_scale * N(0, 1)."""
    key_x, key_noise = jax.random.split(key)
    x = input_scale * flat_random.normal(key_x, (n, *input_shape))
    y_mean = mean(x)
    return {"x": x, "y": y_mean + noise_scale * flat_random.normal(key_noise, y_mean.shape)}
