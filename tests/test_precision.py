"""Models are traced with full-precision float32 matrix products (slt.precision).

On GPUs XLA's default for float32 products is TensorFloat-32, whose 1e-3 relative errors broke
llc's MALA acceptance and calibration on an H200 (benchmarks/RESULTS.md). A CPU cannot show
the numerical effect, so these tests read the precision off the traced programs: every
matrix product of the model carries HIGHEST, unless the user chose a precision.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

from slt import models
from slt.geometry.observation import observation_model
from slt.precision import at_full_precision
from slt.problem import Problem

HIGHEST = (lax.Precision.HIGHEST, lax.Precision.HIGHEST)


def _dot_precisions(jaxpr) -> list:
    """The `precision` of every dot_general in `jaxpr` and the jaxprs nested in it."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "dot_general":
            found.append(eqn.params["precision"])
        for value in eqn.params.values():
            for inner in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(inner, jax.extend.core.ClosedJaxpr):
                    found += _dot_precisions(inner.jaxpr)
                elif isinstance(inner, jax.extend.core.Jaxpr):
                    found += _dot_precisions(inner)
    return found


def _precisions(function, *args) -> list:
    return _dot_precisions(jax.make_jaxpr(function)(*args).jaxpr)


@pytest.fixture(scope="module")
def regression():
    spec = models.reduced_rank_regression(3, 2, 3)
    values = models.random_low_rank(jax.random.key(0), [3, 2, 3], 1)
    data = spec.simulate(jax.random.key(1), values, 20)
    problem = spec.problem(data)
    return problem, problem.unconstrain(values), data


def test_numpyro_model_products_are_full_precision(regression):
    problem, params, data = regression
    for function in (lambda p: problem.loglik(p, data), problem.log_prior,
                     lambda p: jax.grad(lambda q: problem.loss(q))(p)):
        precisions = _precisions(function, params)
        assert precisions and all(p == HIGHEST for p in precisions), precisions


def test_loss_function_products_are_full_precision():
    x = np.random.default_rng(0).normal(size=(30, 4)).astype(np.float32)
    data = {"x": x, "y": x @ np.ones((4, 2), np.float32)}

    def nll(params, batch):
        return 0.5 * jnp.sum((batch["y"] - batch["x"] @ params["W"]) ** 2, axis=1)

    def log_prior(params):
        return -0.5 * jnp.sum(params["W"].T @ params["W"])

    problem = Problem.from_loss(nll, {"W": jnp.ones((4, 2), jnp.float32)}, data,
                                log_prior=log_prior)
    params = problem.reference_params
    for function in (lambda p: problem.loglik(p, data), problem.log_prior):
        precisions = _precisions(function, params)
        assert precisions and all(p == HIGHEST for p in precisions), precisions


def test_the_users_own_precision_is_kept(regression):
    problem, params, data = regression
    default = (lax.Precision.DEFAULT, lax.Precision.DEFAULT)
    with jax.default_matmul_precision("bfloat16"):
        precisions = _precisions(lambda p: problem.loglik(p, data), params)
    assert precisions and all(p == default for p in precisions), precisions
    # outside the user's context the problem's own evaluation is full precision again
    assert all(p == HIGHEST for p in _precisions(lambda p: problem.loglik(p, data), params))


def test_unwrapped_products_keep_jax_default():
    def product(a):
        return a @ a

    assert _precisions(product, jnp.ones((2, 2))) == [None]
    assert _precisions(at_full_precision(product), jnp.ones((2, 2))) == [HIGHEST]


def test_geometry_evaluates_the_model_at_full_precision(regression):
    problem, params, data = regression
    observation, values = observation_model(problem, problem.constrain(params))
    precisions = _precisions(
        lambda v: observation.log_density(v, jnp.asarray(data["x"]), jnp.asarray(data["y"])),
        values)
    assert precisions and all(p == HIGHEST for p in precisions), precisions


def test_observed_readouts_are_full_precision(regression):
    """run_chains' observations: the losses and the readouts R l (subset means, loss shifts)
    that susceptibilities take differences of."""
    from slt.samplers import moments
    from slt.samplers.local_chains import Observables, _observation, _observation_arguments

    problem, params, data = regression
    readout = np.full((2, 20), 1 / 20)
    watch = _observation_arguments(Observables(data, x_readout=readout, y_readout=readout),
                                   jnp.float64, 0)
    observe = _observation(problem, watch)
    flat = problem.ravel(params)[None]
    precisions = _precisions(lambda w: observe(moments.zeros((1,), 2, 2, jnp.float64), w,
                                               jnp.array([True]), jnp.asarray(0)), flat)
    assert len(precisions) >= 2 and all(p == HIGHEST for p in precisions), precisions


@pytest.mark.parametrize("setting, expected", [
    ("off", [None]),                                      # JAX's default: TF32 on a GPU
    ("bfloat16", [(lax.Precision.DEFAULT, lax.Precision.DEFAULT)]),
    ("", [HIGHEST]),                                      # unset: slt's default
])
def test_the_environment_variable_sets_slts_precision(monkeypatch, setting, expected):
    monkeypatch.setenv("SLT_MATMUL_PRECISION", setting)

    def product(a):
        return a @ a

    assert _precisions(at_full_precision(product), jnp.ones((2, 2))) == expected
    x = jnp.ones((4, 3), jnp.float32)
    problem = Problem.from_loss(lambda params, batch: (batch["x"] @ params) ** 2,
                                jnp.ones(3, jnp.float32), {"x": x})
    assert _precisions(lambda p: problem.loglik(p, {"x": x}), jnp.ones(3)) == expected


def test_an_unknown_precision_is_refused(monkeypatch):
    monkeypatch.setenv("SLT_MATMUL_PRECISION", "fastest")
    with pytest.raises(ValueError, match="fastest"):
        at_full_precision(lambda a: a @ a)(jnp.ones((2, 2)))
