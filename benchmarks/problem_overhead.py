"""What the `Problem` abstraction costs: its jitted loss gradient against a hand-written one.

Both compute grad_w L_n(w) = -(1/n) sum_i grad log p(y_i | x_i, w) over the full data; the
hand-written version is the same math in bare JAX, no NumPyro. Ratio = Problem / bare.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from benchmarks.timing import interleaved_medians
from slt import models

HALF_LOG_2PI = 0.5 * jnp.log(2 * jnp.pi)


def _gaussian_nll(mean, y, noise):
    return jnp.sum(0.5 * ((y - mean) / noise) ** 2 + jnp.log(noise) + HALF_LOG_2PI, axis=-1)


def _cases(key):
    dln = models.deep_linear_network([10, 10, 10, 10])
    dln_truth = models.random_low_rank(key, [10, 10, 10, 10], 5)

    def dln_bare(values, data):
        mean = data["x"] @ values["W1"].T @ values["W2"].T @ values["W3"].T
        return jnp.mean(_gaussian_nll(mean, data["y"], 1.0))

    tanh = models.two_layer_network(4, 16, 2)
    tanh_truth = {
        "V": jnp.ones((16, 4)) / 4,
        "b": jnp.zeros(16),
        "U": jnp.ones((2, 16)) / 16,
        "c": jnp.zeros(2),
    }

    def tanh_bare(values, data):
        hidden = jnp.tanh(data["x"] @ values["V"].T + values["b"])
        return jnp.mean(_gaussian_nll(hidden @ values["U"].T + values["c"], data["y"], 1.0))

    mixture = models.gaussian_mixture(3)
    mixture_truth = {
        "weights": jnp.array([0.3, 0.3, 0.4]),
        "means": jnp.array([[-3.0], [0.0], [3.0]]),
        "scales": jnp.ones((3, 1)),
    }

    def mixture_bare(unconstrained, data):
        # the same unconstrained parametrisation: stick-breaking weights, log scales
        values = mixture_problem.constrain(unconstrained)
        y = data["y"][:, None]
        log_components = (
            jnp.log(values["weights"])
            - 0.5 * ((y - values["means"][:, 0]) / values["scales"][:, 0]) ** 2
            - jnp.log(values["scales"][:, 0])
            - HALF_LOG_2PI
        )
        return -jnp.mean(jax.scipy.special.logsumexp(log_components, axis=1))

    mixture_problem = mixture.problem(mixture.simulate(key, mixture_truth, 10_000))
    return [
        (
            "deep linear network 10-10-10-10",
            dln.problem(dln.simulate(key, dln_truth, 10_000)),
            dln_bare,
            False,
        ),
        (
            "two-layer tanh 4-16-2",
            tanh.problem(tanh.simulate(key, tanh_truth, 10_000)),
            tanh_bare,
            False,
        ),
        ("Gaussian mixture K=3", mixture_problem, mixture_bare, True),
    ]


def _time_gradients(key, problem, bare, bare_takes_unconstrained):
    params = problem.init(key)
    values = params if bare_takes_unconstrained else problem.constrain(params)
    slt_grad = jax.jit(jax.grad(lambda p: problem.loss(p, problem.data)))
    bare_grad = jax.jit(jax.grad(lambda v: bare(v, problem.data)))
    return interleaved_medians({"slt": lambda: slt_grad(params), "bare": lambda: bare_grad(values)})


def run(key=None) -> str:
    key = jax.random.key(0) if key is None else key
    rows = [
        "| model (n = 10 000) | d | Problem grad L_n (ms) | bare JAX (ms) | ratio |",
        "|---|---|---|---|---|",
    ]
    for name, problem, bare, bare_takes_unconstrained in _cases(key):
        medians = _time_gradients(key, problem, bare, bare_takes_unconstrained)
        rows.append(
            f"| {name} | {problem.dim} | {1e3 * medians['slt']:.3f} | "
            f"{1e3 * medians['bare']:.3f} | {medians['slt'] / medians['bare']:.2f} |"
        )
    return (
        "## Problem overhead\n\n"
        "Jitted gradient of L_n through `Problem` (NumPyro model, unconstrained parameters) "
        "against the same function hand-written in bare JAX, median of 15 interleaved runs. "
        "Ratio 1.0 means the abstraction is free once compiled.\n\n" + "\n".join(rows) + "\n"
    )
