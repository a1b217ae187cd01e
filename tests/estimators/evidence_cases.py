"""Problems with exact log evidences (TRUTH.md), built once per session.

Compiled samplers are cached per Problem object, so the test modules share these instances.
"""

import functools
from types import SimpleNamespace

import jax
import jax.numpy as jnp
import numpy as np

from slt import Problem, fit_map, models, truth


@functools.cache
def conjugate_regression():
    """y = x w + eps, d = 3, n = 200, noise sd 0.5, w ~ N(0, I/2): exact log Z and E_beta."""
    noise, precision = 0.5, 2.0
    spec = models.linear_regression(3, noise_scale=noise, prior_precision=precision)
    data = spec.simulate(jax.random.key(1), {"w": jnp.array([1.0, -0.5, 0.0])}, 200)
    X, y = np.asarray(data["x"]), np.asarray(data["y"])
    return SimpleNamespace(
        problem=spec.problem(data),
        log_evidence=truth.linear_regression_log_evidence(X, y, noise, precision),
        expected_nll=lambda beta: truth.linear_regression_tempered_expected_nll(
            X, y, noise, precision, beta
        ),
    )


@functools.cache
def product_model():
    """y = a b x + eps, a, b ~ N(0, 1), n = 1000, truth ab = 0: log Z by quadrature."""
    spec = models.product_model()
    data = spec.simulate(jax.random.key(2), {"w": jnp.zeros(2)}, 1000)
    x, y = np.asarray(data["x"]), np.asarray(data["y"])
    return SimpleNamespace(
        problem=spec.problem(data), log_evidence=truth.product_model_log_evidence(x, y)
    )


@functools.cache
def two_component_mixture():
    """(1 - a) N(0, 1) + a N(b, 1), a ~ U(0, 1), b ~ N(0, 1), n = 300, truth N(0, 1)."""
    spec = models.two_component_mixture()
    data = spec.simulate(jax.random.key(3), {"a": 0.0, "b": 0.0}, 300)
    return SimpleNamespace(
        problem=spec.problem(data),
        log_evidence=truth.two_component_mixture_log_evidence(np.asarray(data["y"])),
    )


@functools.cache
def regression_fit(prior: bool):
    """The MAP (prior=True) or the MLE of `conjugate_regression()`."""
    return fit_map(conjugate_regression().problem, jax.random.key(0), prior=prior)


@functools.cache
def spike_and_slab(dim=6, slab=0.1, spike=0.005, weight=6e8):
    """Skilling's spike and slab (`truth.spike_and_slab_log_evidence`), w ~ N(0, I_dim): a
    first-order phase transition at beta ≈ 0.9, where the spike (90% of the posterior at
    beta = 1, a fraction (spike/slab)^dim ≈ 1.6e-8 of the slab) takes over. The likelihood is
    spread evenly over n = 10 dummy examples."""
    n = 10

    def nll(params, batch):
        r2 = jnp.sum(params["w"] ** 2)
        loglik = jnp.logaddexp(-r2 / (2 * slab**2), np.log(weight) - r2 / (2 * spike**2))
        return jnp.full(batch["y"].shape[0], -loglik / n)

    def log_prior(params):
        return jnp.sum(jax.scipy.stats.norm.logpdf(params["w"]))

    problem = Problem.from_loss(nll, {"w": jnp.zeros(dim)}, {"y": jnp.zeros(n)},
                                log_prior=log_prior, x64=True)
    return SimpleNamespace(
        problem=problem,
        prior_sampler=lambda key, num: jax.random.normal(key, (num, dim)),
        log_evidence=truth.spike_and_slab_log_evidence(dim, slab, spike, weight),
    )


@functools.cache
def poisson_intercept():
    """y_i ~ Poisson(exp(b)), b ~ N(0, 10^2), n = 400, rate 3: log Z by 1-D quadrature. The
    diffuse prior makes n L_n heavy-tailed near beta = 0 (E_prior[n L_n] ~ e^50)."""
    import numpyro
    import numpyro.distributions as dist
    from scipy import special, stats

    def model(y):
        b = numpyro.sample("b", dist.Normal(0.0, 10.0))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Poisson(jnp.exp(b)), obs=y)

    y = np.random.default_rng(0).poisson(3.0, 400).astype(np.float64)
    grid = np.linspace(np.log(3.0) - 1.0, np.log(3.0) + 1.0, 200_001)
    log_joint = (y.sum() * grid - y.size * np.exp(grid) - special.gammaln(y + 1).sum()
                 + stats.norm.logpdf(grid, 0.0, 10.0))
    peak = log_joint.max()
    return SimpleNamespace(
        problem=Problem(model, {"y": jnp.asarray(y)}, x64=True),
        log_evidence=peak + np.log(np.trapezoid(np.exp(log_joint - peak), grid)),
    )


@functools.cache
def normal_gamma_regression():
    """y = X b + eps with the noise unknown, as a user writes it: precision t ~ Gamma(2, 2),
    b | t ~ N(0, (4 / t) I_3), y ~ N(X b, 1 / t); n = 150, true noise sd 0.7. The posterior
    couples b's scale to t (not Gaussian in b alone); log Z exact (normal-inverse-gamma)."""
    import numpyro
    import numpyro.distributions as dist

    a0, b0, g = 2.0, 2.0, 4.0

    def model(x, y=None):
        t = numpyro.sample("t", dist.Gamma(a0, b0))
        b = numpyro.sample("b", dist.Normal(0.0, jnp.sqrt(g / t)).expand([x.shape[1]]).to_event(1))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(x @ b, 1.0 / jnp.sqrt(t)), obs=y)

    rng = np.random.default_rng(4)
    X = rng.normal(size=(150, 3))
    y = X @ np.array([0.8, -0.3, 0.0]) + 0.7 * rng.normal(size=150)
    return SimpleNamespace(
        problem=Problem(model, {"x": jnp.asarray(X), "y": jnp.asarray(y)}),
        log_evidence=truth.nig_linear_regression_log_evidence(X, y, np.zeros(3), np.eye(3) / g,
                                                               a0, b0),
    )
