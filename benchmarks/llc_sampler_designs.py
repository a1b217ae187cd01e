"""Sampler designs that slt does not ship, measured on the nonlinear points: do they mix faster?

A bare JAX loop (no slt sampler code) on one point of benchmarks/llc_nonlinear.py: the local
posterior pi(w) ~ exp(-n beta L_n(w) - (gamma / 2) |w - w*|^2) (n beta = n / log n, gamma = 1),
4 chains from w*, `steps` steps, L_n evaluated on the full data every 20 steps; lambda_hat =
n beta (mean L_n - L_n(w*)) over the second half of the run. Designs:

- "sgld": w' = w + (eps / 2) g + sqrt(eps) xi, g the minibatch estimate of grad log pi;
- "sghmc": stochastic-gradient HMC in its momentum form (Chen et al. 2014, unit mass, no noise
  estimate): v' = (1 - a) v + eps g + sqrt(2 a eps) xi, w' = w + v;
- "psgld": SGLD preconditioned by the fixed Laplace metric at w*, P = (n beta H_+ + gamma I)^-1
  (H_+ the Hessian of L_n at w* with its negative eigenvalues set to 0):
  w' = w + (eps / 2) P g + sqrt(eps) P^(1/2) xi, eps in whitened units;
- cv=1: the control-variate gradient (Baker et al. 2019) about w*,
  g = -n beta (grad L_b(w) - grad L_b(w*) + grad L_n(w*)) - gamma (w - w*), unbiased, two
  minibatch gradients a step.

Printed per design: lambda_hat (second half), per chain, per quarter of the run (a rising
value has not settled), the configurational temperature T = E|grad U|^2 / E[Laplacian U] over
the second half (U = -log pi on the full data, the Laplacian by a Rademacher probe; 1 at
equilibrium of the exact law, above 1 for a hot chain), the virial temperature
T_v = E[(w - w*) . grad U] / d over the second half (1 at equilibrium, below 1 for chains that
have not spread; slt's `NotSpread`), the error against the point's
reference (NUTS or linearised), and the point's curvature range K = eigenvalues of
n beta Hess L_n(w*) + gamma.

    python -m benchmarks.llc_sampler_designs POINT k=sgld,eps=3e-7[,cv=1][,b=256][,steps=10000] \
        k=sghmc,eps=1e-6,a=0.01 k=psgld,eps=3e-3 ...
"""

from __future__ import annotations

import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree

from benchmarks import llc_nonlinear as nonlinear
from slt.samplers.exact import temperature_terms

EVERY = 20  # steps between full-data evaluations of L_n
CHAINS = 4


def setup(name: str):
    built = nonlinear.BY_NAME[name].built()
    problem = built.problem
    center = ravel_pytree(built.params)[0]
    nbeta = nonlinear._nbeta(problem.n)

    def batch_loss(flat, batch):
        return -jnp.mean(problem.loglik(problem.unravel(flat), batch))

    full_loss = jax.jit(lambda flat: batch_loss(flat, problem.data))
    hessian = jax.jit(jax.hessian(full_loss))(center)
    curvature = np.linalg.eigvalsh(np.asarray(hessian)) * nbeta + nonlinear.GAMMA
    reference, kind = nonlinear._reference(
        nonlinear._load(nonlinear.REFERENCE_FILE).get(name))
    print(f"{name}: d {center.size}, n {problem.n}, |grad L_n(w*)| "
          f"{float(jnp.linalg.norm(jax.grad(full_loss)(center))):.3g}, K in "
          f"[{curvature.min():.3g}, {curvature.max():.3g}], reference {reference} ({kind})")
    return problem, center, nbeta, batch_loss, full_loss, reference


def run(setting, design: str, eps: float, b: int = 256, steps: int = 10_000, a: float = 0.1,
        cv: bool = False, key: int = 0) -> float:
    problem, center, nbeta, batch_loss, full_loss, reference = setting
    gamma, n = nonlinear.GAMMA, problem.n
    center_gradient = jax.grad(full_loss)(center)

    def grad_log_density(w, batch):
        g = jax.grad(batch_loss)(w, batch)
        if cv:
            g = g - jax.grad(batch_loss)(center, batch) + center_gradient
        return -nbeta * g - gamma * (w - center)

    if design == "psgld":
        eigenvalues, vectors = np.linalg.eigh(np.asarray(jax.hessian(full_loss)(center)))
        scales = 1 / np.sqrt(nbeta * np.maximum(eigenvalues, 0) + gamma)
        root = jnp.asarray((vectors * scales) @ vectors.T)  # P^(1/2), symmetric
        metric = root @ root

    def step(carry, _):
        w, v, k = carry
        k, batch_key, noise_key = jax.random.split(k, 3)
        batch = problem.take(jax.random.randint(batch_key, (b,), 0, n), problem.data)
        g = grad_log_density(w, batch)
        xi = jax.random.normal(noise_key, w.shape, w.dtype)
        if design == "sgld":
            w = w + 0.5 * eps * g + jnp.sqrt(eps) * xi
        elif design == "psgld":
            w = w + 0.5 * eps * (metric @ g) + jnp.sqrt(eps) * (root @ xi)
        else:
            v = (1 - a) * v + eps * g + jnp.sqrt(2 * a * eps) * xi
            w = w + v
        return (w, v, k), None

    def log_density(w):
        return -nbeta * full_loss(w) - 0.5 * gamma * jnp.sum((w - center) ** 2)

    every_weight = jnp.ones(center.shape, bool)

    def chunk(carry, _):
        carry, _ = jax.lax.scan(step, carry, None, length=EVERY)
        w, _, k = carry
        gradient = jax.grad(log_density)(w)
        return carry, (full_loss(w), *temperature_terms(
            log_density, w, gradient, every_weight, jax.random.fold_in(k, 7)),
            -jnp.dot(w - center, gradient))

    @jax.jit
    def chain(k):
        carry = (center, jnp.zeros_like(center), k)
        return jax.lax.scan(chunk, carry, None, length=steps // EVERY)[1]

    losses, squared, laplacian, virial = (np.asarray(a) for a in jax.vmap(chain)(
        jax.random.split(jax.random.key(key), CHAINS)))
    lam = nbeta * (losses - float(full_loss(center)))
    half = lam.shape[1] // 2
    temperature = squared[:, half:].mean() / laplacian[:, half:].mean()
    virial_temperature = virial[:, half:].mean() / center.size
    per_chain = lam[:, lam.shape[1] // 2:].mean(axis=1)
    quarters = [q.mean() for q in np.array_split(lam, 4, axis=1)]
    error = f"{per_chain.mean() / reference - 1:+.1%}" if reference else "n/a"
    print(f"{design} cv={int(cv)} eps={eps:.2g} b={b} a={a} steps={steps}: lambda_hat "
          f"{per_chain.mean():.3f}, chains {np.round(per_chain, 2)}, quarters "
          f"{np.round(quarters, 2)}, error {error}, T {temperature:.2f}, T_v "
          f"{virial_temperature:.2f}, minibatch gradients per chain "
          f"{steps * b * (2 if cv else 1):,}", flush=True)
    return float(per_chain.mean())


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)
    setting = setup(sys.argv[1])
    for spec in sys.argv[2:]:
        fields = dict(item.split("=") for item in spec.split(","))
        run(setting, fields.pop("k"), float(fields.pop("eps")), int(fields.pop("b", 256)),
            int(fields.pop("steps", 10_000)), float(fields.pop("a", 0.1)),
            fields.pop("cv", "0") == "1")
