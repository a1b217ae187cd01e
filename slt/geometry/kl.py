"""Kullback-Leibler divergence between two parameter points of one model.

    KL(w0 || w1) = E_x integral p(y | x, w0) log[p(y | x, w0) / p(y | x, w1)] dy,

averaged over the given inputs x (with weights) for a regression model. Its Hessian in w1 at
w1 = w0 is the Fisher information I(w0) (and so is its Hessian in w0; Grosse, "Metrics", Eqn 8),
and KL(w || w + delta) = delta^T I(w) delta / 2 + O(|delta|^3).

* Gaussian observations, entry-wise: log(s1/s0) + (s0^2 + (m0 - m1)^2) / (2 s1^2) - 1/2.
* Bernoulli, Binomial, Poisson, Categorical observations: the closed forms of
  `slt.geometry.families.family_kl`, entry-wise.
* A scalar mixture of normals: the same trapezoid quadrature over y as the exact Fisher
  (`slt.geometry.kernels.quadrature_grid`, nodes covering both points).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slt.geometry.families import EXPONENTIAL_FAMILIES, family_kl
from slt.geometry.fisher import prepare
from slt.geometry.kernels import FisherArrays
from slt.geometry.observation import (
    as_model_spec,
    observation_model,
    resolve_model,
    safe_log_prob,
    unwrap,
)
from slt.geometry.request import FisherRequest
from slt.models.base import ModelSpec
from slt.problem import Problem

__all__ = ["exact_kl_available", "kl_divergence", "kl_function"]


def exact_kl_available(observation) -> bool:
    """Whether `kl_function` has an exact form for the observation model: Gaussian noise, an
    exponential family or a scalar mixture of normals."""
    return observation.family != "other" and not (
        observation.family == "normal_mixture" and observation.output_shape != ()
    )


def kl_function(observation, coordinates):
    """The pure function kl(theta0, theta1, arrays) -> KL(p_theta0 || p_theta1), jit-able.

    `arrays` is a `FisherArrays` with inputs and weights (Gaussian models) or with quadrature
    nodes covering both points (mixtures). Differentiate it for the Fisher (its Hessian).
    """
    if observation.family == "normal":

        def kl(theta0, theta1, arrays: FisherArrays):
            m0, s0 = observation.normal_moments(coordinates.to_values(theta0), arrays.inputs)
            m1, s1 = observation.normal_moments(coordinates.to_values(theta1), arrays.inputs)
            terms = jnp.log(s1 / s0) + (s0**2 + (m0 - m1) ** 2) / (2.0 * s1**2) - 0.5
            return jnp.sum(arrays.weights * jnp.reshape(terms, (terms.shape[0], -1)).sum(axis=1))

        return kl

    if observation.family in EXPONENTIAL_FAMILIES:

        def kl(theta0, theta1, arrays: FisherArrays):
            first, second = (
                unwrap(observation.distribution(coordinates.to_values(t), arrays.inputs))
                for t in (theta0, theta1)
            )
            terms = family_kl(observation.family, first, second)
            size = arrays.weights.shape[0]
            terms = jnp.broadcast_to(terms, (size,) + observation.output_shape)
            return jnp.sum(arrays.weights * terms.reshape(size, -1).sum(axis=1))

        return kl

    def kl(theta0, theta1, arrays: FisherArrays):
        def log_density(theta):
            base = unwrap(observation.distribution(coordinates.to_values(theta), None))
            return safe_log_prob(base, arrays.nodes)

        log_p0, log_p1 = log_density(theta0), log_density(theta1)
        p0 = jnp.exp(log_p0)
        integrand = jnp.where(p0 > 0, p0 * (log_p0 - log_p1), 0.0)
        return jnp.sum(arrays.node_weights * integrand)

    return kl


def kl_divergence(
    model: ModelSpec | Problem,
    w0: Mapping[str, Any],
    w1: Mapping[str, Any],
    *,
    x: Any = None,
    x_weights: Any = None,
) -> float:
    """KL(p_w0 || p_w1) of `model`, exact: closed forms (Gaussian noise, exponential families)
    or quadrature (mixtures).

    Args:
      model: a `Problem` (from a NumPyro model or `from_predict`), a NumPyro model function
        with its inputs `x=`, or a `ModelSpec`, with Gaussian, Bernoulli, Binomial, Poisson
        or Categorical observations or a scalar mixture of normals.
      w0, w1: {site: constrained value} for both points (as in `fisher_information`).
      x, x_weights: the inputs of a regression model and optional weights (the KL is
        averaged over them; a Problem's own inputs by default); None for density models.

    Returns:
      The divergence in nats (>= 0), as a float.

    Raises:
      ValueError: no exact KL for the model, the points differ in sites or shapes, and what
        `fisher_information` rejects in a point or in x (non-finite, outside the support).

    Example:
      >>> spec = slt.models.fixed_component_mixture()
      >>> kl = kl_divergence(spec, {"pi": 0.5, "mu": 1.0, "sigma": 1.0},
      ...                          {"pi": 0.5, "mu": 1.1, "sigma": 1.0})
      >>> round(kl, 6)       # about (1/2) 0.1^2 I_mu,mu for a small step in mu
      0.001415
    """
    model = resolve_model(model, w0, x=x)
    with jax.enable_x64(True):
        observation, _ = observation_model(model, w0)
        if not exact_kl_available(observation):
            raise ValueError(
                f"{as_model_spec(model).name}: no exact KL for "
                f"{observation.distribution_name} observations (it needs Gaussian noise, an "
                "exponential family or a scalar mixture of normals)"
            )
        request = FisherRequest(x=x, x_weights=x_weights)
        first = prepare(model, w0, request=request)
        second = prepare(model, w1, request=request)
        if first.observation != second.observation:
            raise ValueError("w0 and w1 must have the same sites and shapes")
        arrays = first.with_nodes(np.stack([first.theta, second.theta]))
        kl = first.compiled("kl", lambda: kl_function(first.observation, first.coordinates))
        return float(kl(jnp.asarray(first.theta), jnp.asarray(second.theta), arrays))
