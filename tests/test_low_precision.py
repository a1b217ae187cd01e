"""Parameters in bfloat16 / float16: a float32 master copy, the model evaluated in its dtype
(Problem.from_loss, Problem.from_tokens, llc)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt
from slt.problem import Problem
from slt.validation import InputError

X = np.random.default_rng(0).normal(size=(40, 3)).astype(np.float32)
DATA = {"x": X, "y": X @ np.array([1.0, -0.5, 0.25], np.float32)}


def nll(params, batch):
    residual = batch["y"] - batch["x"] @ params["w"]
    return 0.5 * residual.astype(jnp.float32) ** 2


@pytest.fixture(scope="module")
def low():
    trained = {"w": jnp.array([1.0, -0.5, 0.25], jnp.float32) + 0.01}
    return jax.tree.map(lambda leaf: leaf.astype(jnp.bfloat16), trained)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16])
def test_the_problem_keeps_float32_and_the_model_its_dtype(dtype):
    seen = []

    def recording_nll(params, batch):
        seen.append(params["w"].dtype)
        return nll(params, batch)

    params = {"w": jnp.array([0.9, -0.4, 0.3], dtype)}
    problem = Problem.from_loss(recording_nll, params, DATA)
    assert problem.dtype == jnp.float32
    assert problem.reference_params["w"].dtype == jnp.float32
    assert set(seen) == {jnp.dtype(dtype)}
    # L_n at w* is the model's own forward pass in its dtype, averaged in float32
    expected = np.mean(np.asarray(nll(params, DATA), np.float64))
    assert float(problem.loss(problem.reference_params)) == pytest.approx(expected, rel=1e-6)
    assert problem.ravel(params).dtype == jnp.float32


@pytest.mark.filterwarnings("ignore::slt.LocalRunWarning")  # a 15-step run
def test_llc_on_bfloat16_parameters_runs_in_float32(low):
    problem = Problem.from_loss(nll, low, DATA)
    result = slt.llc(problem, low, jax.random.key(0),
                     sampler=slt.samplers.SGLD(step_size=1e-4, batch_size=20, mala_every=0),
                     plan=slt.RunPlan(num_chains=2, num_warmup=5, num_samples=10,
                                      progress=False))
    assert result.loss_trace.dtype == np.float32
    assert np.all(np.isfinite(result.loss_trace))
    assert result.init_loss == pytest.approx(float(problem.loss(problem.reference_params)))


def test_other_dtypes_are_still_refused():
    with pytest.raises(InputError, match="must be floats"):
        Problem.from_loss(nll, {"w": jnp.ones(3, jnp.int32)}, DATA)
    with pytest.raises(InputError, match="float32 or float64"):
        Problem.from_predict(lambda params, x: x @ params["w"], {"w": jnp.ones(3, jnp.bfloat16)},
                             DATA, "gaussian")


@pytest.mark.slow
def test_bfloat16_lambda_hat_agrees_with_float32():
    """The same run from a float32 w* and from its bfloat16 rounding: the λ̂ agree within
    four standard errors of their difference (different keys: independent runs)."""
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2000, 3)).astype(np.float32)
    data = {"x": x, "y": x @ np.array([1.0, -0.5, 0.25], np.float32)
            + rng.normal(size=2000).astype(np.float32)}
    exact = {"w": jnp.asarray(np.linalg.lstsq(x, data["y"], rcond=None)[0], jnp.float32)}
    results = []
    for index, dtype in enumerate((jnp.float32, jnp.bfloat16)):
        params = jax.tree.map(lambda leaf, d=dtype: leaf.astype(d), exact)
        results.append(slt.llc(Problem.from_loss(nll, params, data), params,
                               jax.random.key(index),
                               sampler=slt.samplers.SGLD(step_size=1e-4, batch_size=100),
                               plan=slt.RunPlan(num_chains=4, num_warmup=500,
                                                num_samples=2000, progress=False)))
    first, second = results
    assert abs(first.llc_mean - second.llc_mean) < 4 * np.hypot(first.std_error,
                                                                 second.std_error)
