"""Property sweep: a public function or value either gives a finite result or raises
`slt.InputError` naming the argument; no raw JAX / NumPy / NumPyro exception escapes.

Hypothesis draws each numeric or shape argument from a pool of the inputs users get wrong
(NaN, infinities, 1e300, 10**20, 10**400, fractions, bools, strings, None, lists, dicts,
NumPy and JAX scalars, arrays of the wrong shape or dtype) while the other arguments stay
valid, for: every numeric field of the configuration values; the model builders; `sbic`; the
Gaussian scale of `Problem.from_predict`; the parameters, key and example sets of `llc`,
`loss_kernel` and `bif`; the Fisher information of a NumPyro model function; rlct's
temperatures; fisher_scan's grids; and, with inputs that no call accepts, wbic's beta,
Fisher's chunk_size, llc_trajectory's settings, kl_divergence's point and sbic_reduced_rank.
A few examples per function, derandomized: the sweep is part of `make test` (about 13 s of
CPU); the local estimators' draws that pass every check run one short compiled program.
"""

import dataclasses
import math
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bad_input_cases import PARAMS, N, X, Y, predict, regression
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import slt
from slt import InputError, models

SWEEP = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.function_scoped_fixture,
                                        HealthCheck.too_slow])
FEW = settings(SWEEP, max_examples=6)

odd_numbers = st.one_of(
    st.sampled_from([math.nan, math.inf, -math.inf, 1e300, -1e300, 0.0, 1e-300, 10**20,
                     10**400, -1, 0, 2.5, 2.0, True, False, "auto", "2", None, [1.0], (1.0, 2.0),
                     np.float32(0.5), np.int64(3), np.array([1, 2]), jnp.array(2.0)]),
    st.integers(-3, 300), st.floats(-3.0, 3.0),
)

# Optional numeric fields (their default is None) that the sweep perturbs too.
OPTIONAL_NUMBERS = {"nbeta", "num_inner_steps", "num_mcmc_steps", "interim_correlation_threshold",
                    "num_draws", "step_sizes", "gammas", "betas"}
VALUES = [slt.RunPlan, slt.samplers.SGLD, slt.samplers.MALA, slt.samplers.HMC,
          slt.samplers.Calibration, slt.LocalPosterior, slt.NestedSampling, slt.Tempering,
          slt.MAPFit, slt.NUTS, slt.ComparisonPlan, slt.FisherRequest]


def _numeric_fields(cls):
    return [field.name for field in dataclasses.fields(cls) if field.init and (
        type(field.default) in (int, float, bool, tuple) or field.name in OPTIONAL_NUMBERS
        or field.name == "step_size")]


def _finite(value) -> bool:
    """A stored field as the values promise: None, a string choice, a Python bool, int or
    finite float, or a tuple of finite floats."""
    if value is None or isinstance(value, str | bool | slt.samplers.Calibration):
        return True
    if isinstance(value, tuple):
        return all(type(item) is float and math.isfinite(item) for item in value)
    return type(value) in (int, float) and math.isfinite(value)


def _refused_by_name(call, *names):
    """Run `call`; return its result, or None when it raised an InputError naming one of
    `names`. Any other exception fails the test."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return call()
        except InputError as error:
            assert any(name in str(error) for name in names), (names, str(error))
            return None


@pytest.mark.parametrize("cls", VALUES, ids=lambda cls: cls.__name__)
@SWEEP
@given(data=st.data())
def test_configuration_values_validate_their_numeric_fields(cls, data):
    name = data.draw(st.sampled_from(_numeric_fields(cls)), label="field")
    value = data.draw(odd_numbers, label="value")
    built = _refused_by_name(lambda: cls(**{name: value}), name)
    if built is not None:
        assert _finite(getattr(built, name)), (name, value, getattr(built, name))


BUILDERS = {
    "gaussian_mixture": (lambda v: models.gaussian_mixture(v), "num_components"),
    "gaussian_mixture dim": (lambda v: models.gaussian_mixture(2, v), "dim"),
    "two_layer_network": (lambda v: models.two_layer_network(1, v, 1), "num_hidden"),
    "linear_regression": (lambda v: models.linear_regression(v), "num_features"),
    "deep_linear_network": (lambda v: models.deep_linear_network([2, v, 2]), "width"),
    "normal_crossing": (lambda v: models.normal_crossing([1, v]), "power"),
}


@pytest.mark.parametrize("builder", BUILDERS)
@SWEEP
@given(value=odd_numbers)
def test_model_builders_take_integers_only(builder, value):
    build, name = BUILDERS[builder]
    spec = _refused_by_name(lambda: build(value), name)
    if spec is not None:
        assert type(spec.dim) is int and spec.dim >= 1


@SWEEP
@given(n=odd_numbers, shift=st.sampled_from([0.0, math.nan, 1e300]))
def test_sbic_names_its_sample_size_and_likelihoods(n, shift):
    call = lambda: slt.sbic([-50.0 + shift, -40.0], n, [[0.5, 0.5], [0.5, 1.0]])  # noqa: E731
    result = _refused_by_name(call, "n ", "log_likelihoods")
    if result is not None:
        assert np.all(np.isfinite(result.free_energy))


SHORT = {"sampler": slt.samplers.SGLD(step_size=1e-4, mala_every=0),
         "plan": slt.RunPlan(num_chains=2, num_samples=20, num_warmup=10, progress=False)}


@pytest.fixture(scope="module")
def problem():
    return slt.Problem.from_predict(predict, PARAMS, {"x": X, "y": Y}, "gaussian")


odd_arrays = st.sampled_from([
    np.ones(1), np.ones(3), np.ones((N, 1)), np.ones((1, 1)), np.full(1, np.nan), np.zeros(1),
    -np.ones(1), np.ones(1, np.int32), np.array(["a"]), np.ones((2, 1, 1)), np.ones(0)])


@FEW
@given(scale=st.one_of(odd_numbers, odd_arrays))
def test_from_predict_names_a_bad_gaussian_scale(scale):
    call = lambda: slt.Problem.from_predict(predict, PARAMS, {"x": X, "y": Y}, "gaussian",  # noqa: E731
                                            scale=scale)
    built = _refused_by_name(call, "scale")
    if built is not None:
        assert np.isfinite(float(built.loss(PARAMS)))


@st.composite
def odd_params(draw):
    """PARAMS with one leaf perturbed: shape, dtype (complex, integer: float16 and bfloat16
    are accepted), NaN, a list, a missing or extra site."""
    site = draw(st.sampled_from(["W", "b"]))
    leaf = PARAMS[site]
    changed = draw(st.sampled_from([
        leaf, leaf.astype(jnp.complex64), leaf.astype(jnp.int32), leaf.reshape(-1),
        jnp.full(leaf.shape, jnp.nan), np.asarray(leaf).tolist(), jnp.zeros((3, 3)), None]))
    params = dict(PARAMS)
    if changed is None:
        del params[site]
    else:
        params[site] = changed
    return params


odd_keys = st.sampled_from([jax.random.key(0), 0, None, jnp.array([1, 2]),
                            jax.random.split(jax.random.key(0), 2), np.float32(1.0)])
# Valid example sets come last: Hypothesis tries the first entries first, and a run that
# passes every check costs a compilation (llc compiles one; the loss kernel and the BIF two
# more, only when a draw happens to pass).
odd_indices = st.sampled_from([np.array([0.5, 1.0]), np.array([-1, 2]), np.arange(3),
                               np.array([0, N]), np.zeros((2, 2), int), np.array([], int),
                               [0, 1], "0"])


@pytest.mark.parametrize("estimator", ["llc", "loss_kernel", "bif"])
@FEW
@given(data=st.data())
def test_local_estimators_name_bad_params_keys_and_examples(problem, estimator, data):
    params = data.draw(odd_params(), label="params")
    key = data.draw(odd_keys, label="key")
    examples = data.draw(odd_indices, label="examples")
    calls = {
        "llc": lambda: slt.llc(problem, params, key, **SHORT),
        "loss_kernel": lambda: slt.loss_kernel(problem, params, key, examples, **SHORT),
        "bif": lambda: slt.bif(problem, params, key, examples, train=np.arange(4), **SHORT),
    }
    result = _refused_by_name(calls[estimator], "params", "key", "examples", "query")
    if result is not None:
        assert math.isfinite(result.llc_mean if estimator == "llc" else result.run.llc_mean)


@FEW
@given(w=st.sampled_from([[1.0, 0.5], [1.0], [1.0, 0.5, 0.2], [math.nan, 1.0], [1e300, 1.0],
                          ["a", "b"]]),
       x=st.sampled_from([X, X[:, :1], X[:0], X * np.nan, X.astype(int), X[:, :, None]]))
def test_fisher_of_a_model_function_names_bad_points_and_inputs(w, x):
    call = lambda: slt.fisher_information(regression, {"w": np.asarray(w)},  # noqa: E731
                                          request=slt.FisherRequest(x=x))
    try:
        result = _refused_by_name(call, "params", "x", "model")
    except FloatingPointError as error:  # documented: outputs overflow at the point
        assert "not finite" in str(error)
        return
    if result is not None:
        assert np.all(np.isfinite(result.matrix))


@pytest.fixture(scope="module")
def regression_problem():
    spec = models.linear_regression(2)
    return spec.problem(spec.simulate(jax.random.key(0), {"w": jnp.array([1.0, -1.0])}, 16))


@pytest.mark.parametrize("name", ["multipliers", "betas"])
@SWEEP
@given(value=odd_numbers.filter(lambda value: value is not None))
def test_rlct_names_its_temperatures(regression_problem, name, value):
    # every pool entry but None (the defaults) gives fewer than 3 distinct temperatures: no
    # draw reaches the sampler
    assert _refused_by_name(lambda: slt.rlct(regression_problem, jax.random.key(0),
                                             **{name: value}, progress=False), name) is None


@FEW
@given(grid=st.one_of(odd_numbers, odd_arrays))
def test_fisher_scan_names_a_bad_grid(grid):
    spec = models.fixed_component_mixture()
    call = lambda: slt.fisher_scan(spec, {"pi": 0.5, "mu": 1.0, "sigma": 1.0},  # noqa: E731
                                   {"mu": grid}, progress=False)
    try:
        scan = _refused_by_name(call, "'mu'")
    except FloatingPointError as error:  # documented: a point where the matrix overflows
        assert "not finite" in str(error)
        return
    if scan is not None:
        assert np.all(np.isfinite(scan.dataset["trace"]))


# Inputs no numeric argument of these functions accepts: each call must be refused by name
# before anything is sampled or compiled.
never_valid = st.sampled_from([math.nan, math.inf, -math.inf, -1.5, -5, "2", True, {"a": 1.0},
                               np.array([1.0, 2.0, 3.0]), jnp.full(3, jnp.nan)])
REFUSING = {
    "wbic beta": (lambda p, v: slt.wbic(p, jax.random.key(0), beta=v, progress=False), "beta"),
    "fisher chunk_size": (lambda p, v: slt.fisher_information(p, {"w": np.ones(2)},
                                                              chunk_size=v), "chunk_size"),
    "llc_trajectory checkpoints_per_run": (
        lambda p, v: slt.llc_trajectory(p, [{"w": jnp.ones(2)}], jax.random.key(0),
                                        checkpoints_per_run=v, **SHORT), "checkpoints_per_run"),
    "llc_trajectory calibrate_at": (
        lambda p, v: slt.llc_trajectory(p, [{"w": jnp.ones(2)}], jax.random.key(0),
                                        calibrate_at=v, **SHORT), "calibrate_at"),
    "kl_divergence w1": (lambda p, v: slt.kl_divergence(p, {"w": np.ones(2)}, {"w": v},
                                                        x=p.data["x"]), "w"),
    "sbic_reduced_rank M": (lambda p, v: slt.estimators.sbic_reduced_rank([-5.0, -4.0], 50, v,
                                                                          3), "M"),
}


@pytest.mark.parametrize("case", REFUSING)
@FEW
@given(value=never_valid)
def test_numeric_arguments_refuse_what_no_call_accepts(regression_problem, case, value):
    call, name = REFUSING[case]
    assert _refused_by_name(lambda: call(regression_problem, value), name) is None
