import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt import MAPFit, fit_map, models


def test_mle_is_least_squares_and_map_is_ridge(key):
    spec = models.linear_regression(4, noise_scale=0.5, prior_precision=3.0)
    data = spec.simulate(key, {"w": jnp.array([1.0, -2.0, 0.5, 0.0])}, 200)
    problem = spec.problem(data)
    X, y = np.asarray(data["x"]), np.asarray(data["y"])

    mle = fit_map(problem, key, prior=False)
    np.testing.assert_allclose(
        mle.values["w"], np.linalg.lstsq(X, y, rcond=None)[0], rtol=1e-8, atol=1e-10
    )
    assert mle.objective == "mle" and mle.num_agree == mle.num_restarts

    fit = fit_map(problem, key)
    ridge = np.linalg.solve(3.0 * np.eye(4) + X.T @ X / 0.25, X.T @ y / 0.25)
    np.testing.assert_allclose(fit.values["w"], ridge, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(fit.loglik, float(jnp.sum(problem.loglik(fit.params, data))))
    assert fit.log_joint == pytest.approx(fit.loglik + fit.log_prior)
    assert fit.grad_norm < 1e-6
    assert "restarts agree" in repr(fit) and len(fit.summary()) == 1


def _truths(key):
    relu_truth = {
        "V": jnp.array([[1.0, 0.0], [0.0, 1.0]]),
        "b": jnp.array([0.5, -0.5]),
        "U": jnp.array([[1.0, -1.0]]),
        "c": jnp.zeros(1),
    }
    return [
        (
            models.linear_regression(3, noise_scale=None),
            {"w": jnp.array([1.0, -1.0, 0.5]), "noise_variance": 0.3},
        ),
        (
            models.gaussian_mixture(3),
            {
                "weights": jnp.array([0.3, 0.3, 0.4]),
                "means": jnp.array([[-4.0], [0.0], [4.0]]),
                "scales": jnp.ones((3, 1)),
            },
        ),
        (
            models.gaussian_mixture(2, 2, shared_scale=True),
            {
                "weights": jnp.array([0.5, 0.5]),
                "means": jnp.array([[-3.0, 0.0], [3.0, 1.0]]),
                "scales": jnp.ones(2),
            },
        ),
        (models.fixed_component_mixture(), {"pi": 0.5, "mu": 2.0, "sigma": 1.0}),
        (models.two_component_mixture(), {"a": 0.5, "b": 1.0}),
        (models.reduced_rank_regression(5, 3, 5), models.random_low_rank(key, [5, 3, 5], 1)),
        (models.deep_linear_network([4, 6, 2, 4]), models.random_low_rank(key, [4, 6, 2, 4], 2)),
        (
            models.two_layer_network(1, 2, 1, bias=False, noise_scale=None),
            {"V": jnp.array([[1.0], [-2.0]]), "U": jnp.array([[1.0, 0.5]]), "noise_scale": 0.5},
        ),
        (models.two_layer_network(2, 2, 1, activation="relu"), relu_truth),
        (
            models.two_layer_network(2, 2, 2, activation="sigmoid"),
            {"V": jnp.eye(2) * 2, "b": jnp.zeros(2), "U": jnp.eye(2), "c": jnp.zeros(2)},
        ),
        (models.normal_crossing((1, 2)), {"w": jnp.zeros(2)}),
        (models.product_model(), {"w": jnp.array([1.0, 0.5])}),
    ]


# Models whose optimum the fast suite reaches another way (least squares in
# test_mle_is_least_squares_and_map_is_ridge; the linear networks and the normal crossing in
# the LLC tests' fits) run with the slow suite, and so do the 2-D mixture with a shared scale,
# the ReLU network and two of the three 1-D mixtures (7-10 s of CPU each): the fast suite
# keeps one case of each kind of multimodal fit (the 1-D mixture with K = 3, the tanh and
# sigmoid networks, the product model).
SLOW_FITS = {"linear_regression(d=3)", "reduced_rank_regression(M=5, H=3, N=5)",
             "deep_linear_network(4-6-2-4)", "normal_crossing(1,2)",
             "gaussian_mixture(K=2, D=2, shared scale)", "two_layer_relu(2-2-1)",
             "fixed_component_mixture(pi, mu, sigma)", "two_component_mixture"}


def _fit_case(index: int):
    name = _truths(jax.random.key(0))[index][0].name
    return pytest.param(index, id=name, marks=[pytest.mark.slow] if name in SLOW_FITS else [])


@pytest.mark.heavy
@pytest.mark.parametrize("index", [_fit_case(index) for index in range(12)])
def test_random_restarts_find_the_best_known_optimum(index):
    """The best of the random restarts is at least as good as a local fit started at the truth
    (the best optimum known without a global search), on every model of the library.

    Restart 0 starts at the truth (`init=`), restarts 1..31 at random points, in one call."""
    key = jax.random.key(10)
    spec, truth = _truths(key)[index]
    problem = spec.problem(spec.simulate(key, truth, 300))
    fit = fit_map(problem, jax.random.key(11), init=problem.unconstrain(truth))
    from_truth, random_best = fit.restart_objectives[0], np.nanmax(fit.restart_objectives[1:])
    assert np.isfinite(from_truth)
    assert random_best >= from_truth - 1e-6 * abs(from_truth)
    assert fit.num_agree >= 2


def test_fit_map_rejects_bad_arguments(key):
    spec = models.linear_regression(1)
    problem = spec.problem(spec.simulate(key, {"w": jnp.ones(1)}, 10))
    with pytest.raises(ValueError, match="num_restarts"):
        fit_map(problem, key, MAPFit(num_restarts=0))
    with pytest.raises(ValueError, match="learning_rate"):
        fit_map(problem, key, MAPFit(learning_rate=-1.0))
    with pytest.raises(ValueError, match="optimizer must be a MAPFit value"):
        fit_map(problem, key, {"num_restarts": 4})


def test_repeated_fits_of_one_problem_compile_once():
    from slt import compile_cache

    spec = models.linear_regression(2)
    problem = spec.problem(spec.simulate(jax.random.key(0), {"w": jnp.ones(2)}, 50))
    before = compile_cache.compile_count("fit restarts")
    first = fit_map(problem, jax.random.key(1), MAPFit(num_restarts=4, adam_steps=10))
    second = fit_map(problem, jax.random.key(2), MAPFit(num_restarts=4, adam_steps=10))
    assert compile_cache.compile_count("fit restarts") == before + 1
    assert first.log_joint == pytest.approx(second.log_joint, abs=1e-8)


def test_the_fit_package_holds_both_ways_of_fitting():
    """slt.fit re-exports the public names of slt.fit.map (MAP / MLE with restarts) and of
    slt.fit.natural_gradient and slt.fit.training; the natural gradient module keeps its name."""
    import slt
    import slt.fit.map
    import slt.fit.natural_gradient as natural
    import slt.fit.training

    assert isinstance(slt.fit.natural_gradient, types.ModuleType)
    assert slt.fit.natural_gradient is natural and callable(natural.natural_gradient)
    assert slt.fit.fit_map is slt.fit.map.fit_map is fit_map and slt.fit.MAPFit is MAPFit
    assert slt.fit.FitResult is slt.FitResult
    exported = {*slt.fit.map.__all__, *natural.__all__, *slt.fit.training.__all__} - {
        "natural_gradient"}
    assert set(slt.fit.__all__) == exported
    assert all(any(getattr(slt.fit, name) is getattr(module, name, None)
                   for module in (natural, slt.fit.map, slt.fit.training)) for name in exported)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_lbfgs_stops_where_the_objective_stops_falling(dtype):
    """With grad_tol = 0 nothing but the step limit or the stall rule ends L-BFGS: on a smooth
    objective whose rounding keeps its gradient from vanishing (a mean of log-cosh terms) it
    stops long before 200 steps, at an objective no run of all 200 steps improves on by more
    than its rounding."""
    from slt.fit import map as fit_module

    centres = jnp.linspace(-3.0, 5.0, 1001, dtype=dtype)

    def objective(x):
        return jnp.mean(jnp.log(jnp.cosh(x[0] - centres)) + 0.5 * (x[1] - x[0] ** 2) ** 2)

    def run(stall_steps):
        fit_module.STALL_STEPS = stall_steps
        x, _, steps = jax.jit(lambda x0: fit_module._adam_then_lbfgs(
            objective, x0, 0, 0.1, 200, 0.0))(jnp.array([2.0, -1.0], dtype))
        return float(objective(x)), int(steps)

    default = fit_module.STALL_STEPS
    try:
        stalled, stall_count = run(default)
        full, full_count = run(10**9)
    finally:
        fit_module.STALL_STEPS = default
    assert full_count == 200 and stall_count < 100
    floor = fit_module.STALL_ULPS * np.finfo(dtype).eps * max(abs(full), 1.0)
    assert stalled <= full + floor

