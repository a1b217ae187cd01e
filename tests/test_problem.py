import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest
from numpyro.infer.util import potential_energy
from scipy.stats import norm

from slt import Problem, models
from slt.validation import InputError


def _regression_data(key, n=30):
    x = jax.random.normal(key, (n, 2))
    return {"x": x, "y": x @ jnp.array([1.0, -1.0]) + 0.1}


def two_site_model(x, y1, y2):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
    log_scale = numpyro.sample("log_scale", dist.Normal(0.0, 1.0))
    rate = numpyro.sample("rate", dist.Gamma(2.0, 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y1", dist.Normal(x @ w, jnp.exp(log_scale)), obs=y1)
        with numpyro.plate("outputs", 3, dim=-2):  # a non-data plate: summed per example
            numpyro.sample("y2", dist.Exponential(rate), obs=y2.T)


def test_several_observed_sites_and_plates_against_numpyro(key):
    x = jax.random.normal(key, (25, 2))
    data = {"x": x, "y1": x[:, 0], "y2": jnp.abs(jax.random.normal(key, (25, 3)))}
    problem = Problem(two_site_model, data)
    assert problem.observed_site_names == ("y1", "y2")
    assert problem.dim == 4
    for k in jax.random.split(key, 3):
        params = problem.init(k)
        values = problem.constrain(params)
        expected = norm.logpdf(
            np.asarray(data["y1"]), np.asarray(x @ values["w"]), np.exp(float(values["log_scale"]))
        )
        rate = float(values["rate"])
        expected += (np.log(rate) - rate * np.asarray(data["y2"])).sum(axis=1)
        np.testing.assert_allclose(problem.loglik(params, problem.data), expected, rtol=1e-12)
        # the log joint (prior with Jacobian + likelihood) is NumPyro's own potential energy
        np.testing.assert_allclose(
            problem.log_joint(params),
            -potential_energy(two_site_model, (), data, params),
            rtol=1e-12,
        )


def test_mixture_same_family_likelihood_is_marginal(key):
    def model(y):
        weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(2)))
        locs = numpyro.sample("locs", dist.Normal(0.0, 5.0).expand([2]).to_event(1))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample(
                "y",
                dist.MixtureSameFamily(dist.Categorical(weights), dist.Normal(locs, 1.0)),
                obs=y,
            )

    y = jax.random.normal(key, (40,))
    problem = Problem(model, {"y": y})
    params = problem.init(key)
    v = problem.constrain(params)
    expected = np.log(
        (
            np.asarray(v["weights"])[None, :]
            * norm.pdf(np.asarray(y)[:, None], np.asarray(v["locs"])[None, :], 1.0)
        ).sum(axis=1)
    )
    np.testing.assert_allclose(problem.loglik(params, problem.data), expected, rtol=1e-12)


def test_batches_minibatches_and_jit(key):
    spec = models.linear_regression(2)
    problem = spec.problem(_regression_data(key))
    params = problem.init(key)
    full = problem.loglik(params, problem.data)
    batch = problem.minibatch(jax.random.key(7), 10)
    assert batch["x"].shape == (10, 2)
    rows = [
        int(np.flatnonzero(np.all(np.asarray(problem.data["x"]) == r, axis=1))[0])
        for r in np.asarray(batch["x"])
    ]
    assert len(set(rows)) == 10  # without replacement
    np.testing.assert_allclose(problem.loglik(params, batch), np.asarray(full)[rows], rtol=1e-12)
    np.testing.assert_allclose(jax.jit(problem.loglik)(params, problem.data), full, rtol=1e-12)
    np.testing.assert_allclose(problem.loss(params), -np.mean(full), rtol=1e-12)
    np.testing.assert_allclose(
        problem.log_joint(params), problem.log_prior(params) + np.sum(full), rtol=1e-12
    )
    with pytest.raises(ValueError, match="minibatch size"):
        problem.minibatch(key, 0)


def test_log_prior_includes_the_jacobian(key):
    def model(y):
        scale = numpyro.sample("scale", dist.LogNormal(0.3, 0.7))
        weight = numpyro.sample("weight", dist.Beta(2.0, 3.0))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Normal(weight, scale), obs=y)

    problem = Problem(model, {"y": jnp.ones(3)})
    params = {"scale": jnp.array(0.4), "weight": jnp.array(-0.8)}
    values = problem.constrain(params)
    # constrained density times |d constrain / d u|, the derivative by autodiff
    expected = (
        dist.LogNormal(0.3, 0.7).log_prob(values["scale"])
        + jnp.log(jax.grad(lambda u: problem.constrain({**params, "scale": u})["scale"])(0.4))
        + dist.Beta(2.0, 3.0).log_prob(values["weight"])
        + jnp.log(jax.grad(lambda u: problem.constrain({**params, "weight": u})["weight"])(-0.8))
    )
    np.testing.assert_allclose(problem.log_prior(params), expected, rtol=1e-12)


@pytest.mark.parametrize(
    "spec,values",
    [
        (
            models.gaussian_mixture(3, 2),
            {
                "weights": jnp.array([0.001, 0.499, 0.5]),
                "means": jnp.arange(6.0).reshape(3, 2),
                "scales": jnp.full((3, 2), 1e-3),
            },
        ),
        (
            models.linear_regression(2, noise_scale=None),
            {"w": jnp.array([3.0, -4.0]), "noise_variance": jnp.array(100.0)},
        ),
        (
            models.fixed_component_mixture(),
            {"pi": jnp.array(0.999), "mu": jnp.array(-2.0), "sigma": jnp.array(20.0)},
        ),
    ],
    ids=lambda s: getattr(s, "name", ""),
)
def test_transforms_round_trip_from_the_support(spec, values, key):
    problem = spec.problem(spec.simulate(key, values, 20))
    again = problem.constrain(problem.unconstrain(values))
    for name in values:
        np.testing.assert_allclose(again[name], values[name], rtol=1e-9)


def mlp_nll(params, batch):
    hidden = jnp.tanh(batch["x"] @ params["layer1"]["w"] + params["layer1"]["b"])
    prediction = hidden @ params["layer2"]["w"]
    return 0.5 * (batch["y"] - prediction[:, 0]) ** 2 + 0.5 * jnp.log(2 * jnp.pi)


def test_from_loss_plain_jax_network(key):
    keys = jax.random.split(key, 3)
    params = {
        "layer1": {"w": jax.random.normal(keys[0], (2, 4)), "b": jnp.zeros(4)},
        "layer2": {"w": jax.random.normal(keys[1], (4, 1))},
    }
    data = {"x": jax.random.normal(keys[2], (50, 2)), "y": jnp.zeros(50)}
    problem = Problem.from_loss(mlp_nll, params, data)
    assert problem.dim == 2 * 4 + 4 + 4 and problem.n == 50
    assert not problem.has_prior and problem.log_prior(params) == 0.0
    np.testing.assert_allclose(problem.loglik(params, data), -mlp_nll(params, data))
    assert problem.constrain(params) is params and problem.unconstrain(params) is params
    flat = problem.ravel(problem.init(key))
    assert flat.shape == (16,) and np.all(np.abs(flat) < 2.0)
    gaussian = Problem.from_loss(
        mlp_nll,
        params,
        data,
        log_prior=lambda p: sum(jnp.sum(norm_logpdf(leaf)) for leaf in jax.tree.leaves(p)),
    )
    assert gaussian.has_prior
    np.testing.assert_allclose(
        gaussian.log_prior(params),
        sum(norm.logpdf(np.asarray(leaf)).sum() for leaf in jax.tree.leaves(params)),
    )


def norm_logpdf(x):
    return -0.5 * x**2 - 0.5 * jnp.log(2 * jnp.pi)


# ----------------------------------------------------------------------------- bad input


def simple_model(x, y):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Normal(w * x, 1.0), obs=y)


@pytest.mark.parametrize(
    "data,message",
    [
        ({"x": jnp.array([1.0, jnp.nan]), "y": jnp.ones(2)}, r"data\['x'\] has 1 non-finite"),
        ({"x": jnp.ones(2), "y": jnp.array([1.0, jnp.inf])}, r"data\['y'\] has 1 non-finite"),
        ({"x": jnp.ones(3), "y": jnp.ones(2)}, "share their first"),
        ({}, "data is empty"),
        ({"x": jnp.ones(0), "y": jnp.ones(0)}, r"data\['x'\] is empty"),
        ({"x": jnp.array(1.0), "y": jnp.ones(1)}, r"data\['x'\] is a scalar"),
        ({"x": np.array(["a", "b"]), "y": jnp.ones(2)}, "expected numbers"),
        ({"x": jnp.ones(2), "y": jnp.ones(2), "z": jnp.ones(2)}, "cannot be called"),
    ],
)
def test_bad_data_is_named(data, message):
    with pytest.raises(ValueError, match=message):
        Problem(simple_model, data)


def test_bad_models_are_named():
    def no_observation(x, y):
        numpyro.sample("w", dist.Normal(0.0, 1.0))

    with pytest.raises(ValueError, match="no observed site"):
        Problem(no_observation, {"x": jnp.ones(2), "y": jnp.ones(2)})

    def discrete(y):
        z = numpyro.sample("z", dist.Bernoulli(0.5))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Normal(z, 1.0), obs=y)

    with pytest.raises(ValueError, match="latent site 'z' is discrete"):
        Problem(discrete, {"y": jnp.ones(2)})

    def not_per_example(y):
        w = numpyro.sample("w", dist.Normal(0.0, 1.0))
        numpyro.sample("y", dist.Normal(w, 1.0).expand([y.shape[0]]).to_event(1), obs=y)

    with pytest.raises(ValueError, match="observed site 'y' has log-density shape"):
        Problem(not_per_example, {"y": jnp.ones(4)})

    def outside_support(y):
        rate = numpyro.sample("rate", dist.Gamma(1.0, 1.0))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Exponential(rate), obs=y)

    with pytest.raises(ValueError, match="observed site 'y' has a non-finite log-density"):
        Problem(outside_support, {"y": -jnp.ones(3)})

    def learned_parameter(y):
        loc = numpyro.param("loc", 0.0)
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Normal(loc, 1.0), obs=y)

    with pytest.raises(ValueError, match="numpyro.param"):
        Problem(learned_parameter, {"y": jnp.ones(2)})


def test_non_finite_parameter_at_init_is_named(key):
    def bad_prior(y):
        scale = numpyro.sample("scale", dist.HalfNormal(jnp.nan))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Normal(0.0, 1.0 + scale), obs=y)

    with pytest.raises(ValueError, match="site 'scale' is not finite at the initial point"):
        Problem(bad_prior, {"y": jnp.ones(2)})

    def exploding_scale(y):  # exp overflows or underflows unless |log_scale| < 0.07
        log_scale = numpyro.sample("log_scale", dist.Normal(0.0, 1.0))
        w = numpyro.sample("w", dist.Normal(0.0, jnp.exp(1e4 * log_scale)))
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.Normal(w, 1.0), obs=y)

    with pytest.raises(ValueError, match="site 'w' is not finite"):
        Problem(exploding_scale, {"y": jnp.ones(2)})

    params = {"layer1": {"w": jnp.array([[1.0, jnp.nan]])}}
    with pytest.raises(ValueError, match=r"params\['layer1'\]\['w'\] is not finite"):
        Problem.from_loss(lambda p, b: b["y"], params, {"y": jnp.ones(2)})
    with pytest.raises(ValueError, match="one value per example"):
        Problem.from_loss(lambda p, b: jnp.sum(b["y"]), {"w": jnp.ones(1)}, {"y": jnp.ones(2)})
    with pytest.raises(ValueError, match="not finite at params for 1 example"):
        Problem.from_loss(
            lambda p, b: jnp.log(b["y"]), {"w": jnp.ones(1)}, {"y": jnp.array([1.0, -1.0])}
        )


def test_x64_option():
    data = {"x": np.ones(3), "y": np.ones(3)}
    assert Problem(simple_model, data, x64=True).data["x"].dtype == jnp.float64
    assert Problem(simple_model, data, x64=False).data["x"].dtype == jnp.float32


def test_a_misshapen_parameter_is_refused_not_broadcast():
    """w of shape (2, 1) for a site of shape (2,) would broadcast the n per-example terms to
    n x n (L_n = 300 log 2 instead of log 2); it gets an error naming the site and shapes."""
    spec = models.linear_regression(2)
    data = spec.simulate(jax.random.key(0), {"w": jnp.array([0.5, -0.3])}, 300)
    problem = Problem(spec.model, data)
    good = {"w": jnp.zeros(2)}
    assert np.isfinite(float(problem.loss(good)))
    for method in (problem.loss, problem.log_joint, problem.log_prior):
        with pytest.raises(InputError, match=r"'w' has shape \(2, 1\); .* shape \(2,\)"):
            method({"w": jnp.zeros((2, 1))})
    # under vmap each draw has the site's own shape
    batch = jax.vmap(problem.loss)({"w": jnp.zeros((5, 2))})
    assert batch.shape == (5,)

    def nll(params, batch):
        return 0.5 * (batch["y"] - batch["x"] @ params["w"] - params["b"]) ** 2

    from_loss = Problem.from_loss(nll, {"w": jnp.zeros(2), "b": jnp.zeros(())}, data)
    message = r"'b' has shape \(1,\); the model's site has shape \(\)"
    with pytest.raises(InputError, match=message):
        from_loss.loss({"w": jnp.zeros(2), "b": jnp.zeros(1)})
    with pytest.raises(InputError, match="structure of the trained parameters"):
        from_loss.loss({"w": jnp.zeros(2)})


def test_exchangeable_sites_are_validated_and_carried_by_the_mixture_builders():
    data = {"y": jnp.linspace(-1.0, 1.0, 20)}
    assert models.gaussian_mixture(3).problem(data).exchangeable == ("means", "scales", "weights")
    assert models.gaussian_mixture(2, shared_scale=True).exchangeable == ("means", "weights")
    assert models.gaussian_mixture(1).exchangeable == ()
    model = models.gaussian_mixture(3).model
    assert Problem(model, data, exchangeable="means").exchangeable == ("means",)
    with pytest.raises(InputError, match="latent sites"):
        Problem(model, data, exchangeable=("means", "locs"))
    with pytest.raises(InputError, match="latent sites"):
        Problem(model, data, exchangeable=("means", "means"))
    spec = models.gaussian_mixture(2, shared_scale=True)
    with pytest.raises(InputError, match="leading"):
        Problem(spec.model, data, exchangeable=("means", "scales"))  # scales: shape (1,)
