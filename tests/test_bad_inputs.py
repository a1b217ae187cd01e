"""No silent number from a bad input: each input a demanding user tried (issue 39) is refused
by name, with what would be right, before anything is sampled or compiled.

Two cases of that sweep are diagnostics of finished runs, not argument checks (one observation
per chain, a step size that never moves the chains), and are tested with the local
diagnostics; damaged saved files are tested with the result format (tests/test_results.py).
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from bad_input_cases import PARAMS, N, X, Y, predict, regression

import slt
from slt import InputError
from slt.cli import main

RNG = np.random.default_rng(1)
LABELS = RNG.integers(0, 3, size=N)
CAT_PARAMS = {"W": jnp.zeros((2, 3), jnp.float32), "b": jnp.zeros(3, jnp.float32)}
KEY = jax.random.key(0)
SHORT = {"sampler": slt.samplers.SGLD(step_size=1e-3, mala_every=0),
         "plan": slt.RunPlan(num_chains=2, num_samples=60, num_warmup=30, progress=False)}


@pytest.fixture(scope="module")
def gaussian():
    return slt.Problem.from_predict(predict, PARAMS, {"x": X, "y": Y}, "gaussian")


@pytest.fixture(scope="module")
def categorical():
    return slt.Problem.from_predict(predict, CAT_PARAMS, {"x": X, "y": LABELS}, "categorical")


@pytest.mark.parametrize("scale", [np.ones(3), np.ones((N, 1))])
def test_a_gaussian_scale_that_enlarges_the_outputs_is_refused(scale):
    # (3,): was accepted and counted each example 3 times (lambda_hat = -62); (n, 1): was
    # accepted and failed in llc on a minibatch with a broadcasting error
    shape = re.escape(str(tuple(scale.shape)))
    with pytest.raises(InputError, match=rf"scale has shape {shape}.*one sd per output.*\(1,\)"):
        slt.Problem.from_predict(predict, PARAMS, {"x": X, "y": Y}, "gaussian", scale=scale)


def test_one_scale_per_output_is_accepted(gaussian):
    problem = slt.Problem.from_predict(predict, PARAMS, {"x": X, "y": Y}, "gaussian",
                                       scale=np.full(1, 2.0))
    assert np.isfinite(float(problem.loss(PARAMS)))


@pytest.mark.parametrize("query,message", [
    ({"x": X[:2], "y": np.array([1.7, 1.0])}, r"query\['y'\] holds 1.7.*dtype int"),
    ({"x": X[:2], "y": np.array([5, 1])}, r"query: class labels y must lie in \[0, 3\)"),
])
def test_query_sets_are_checked_against_the_training_labels(categorical, query, message):
    # float labels were cast to the training labels' dtype (1.7 -> 1) without a word
    with pytest.raises(InputError, match=message):
        slt.bif(categorical, CAT_PARAMS, KEY, query, train=np.arange(4), **SHORT)


def test_example_sets_of_loss_kernel_and_susceptibilities_share_that_check(categorical):
    floats = {"x": X[:2], "y": np.array([0.5, 1.0])}
    with pytest.raises(InputError, match=r"examples\['y'\] holds 0.5"):
        slt.loss_kernel(categorical, CAT_PARAMS, KEY, floats, **SHORT)
    with pytest.raises(InputError, match=r"holds 0.5"):
        slt.susceptibilities(categorical, CAT_PARAMS, KEY, {"S": floats}, **SHORT)


def test_a_run_plan_takes_integral_floats_as_ints_and_refuses_the_rest():
    # 2.0 used to reach JAX as a shape: "Shapes must be 1D sequences ... got (2.0,)"
    plan = slt.RunPlan(num_chains=2.0, num_warmup=30.0)
    assert (plan.num_chains, plan.num_warmup) == (2, 30)
    assert type(plan.num_chains) is int and type(plan.num_warmup) is int
    with pytest.raises(InputError, match="num_warmup must be an integer >= 0, got 30.5"):
        slt.RunPlan(num_warmup=30.5)


def test_a_list_for_gamma_is_named():
    # was: TypeError: float() argument must be ... not 'list'
    with pytest.raises(InputError, match=r"gamma must be a finite number >= 0, got \[1.0, 2.0\]"):
        slt.LocalPosterior(gamma=[1.0, 2.0])


def test_complex_parameters_are_refused_by_name(gaussian):
    # float16 and bfloat16 are accepted (a float32 master copy: tests/test_low_precision.py)
    complex_params = jax.tree.map(lambda leaf: leaf.astype(jnp.complex64), PARAMS)
    with pytest.raises(InputError, match=r"params\['W'\] has dtype complex64.*must be floats"):
        slt.llc(gaussian, complex_params, KEY, **SHORT)


def test_a_prediction_function_returning_nan_is_named():
    # was NumPyro's "Normal distribution got invalid loc parameter"
    def nan_predict(params, x):
        return predict(params, x) * jnp.nan

    with pytest.raises(InputError, match="predict_fn.*returned 40 non-finite output"):
        slt.Problem.from_predict(nan_predict, PARAMS, {"x": X, "y": Y}, "gaussian")


def test_parameters_given_as_lists_are_named(gaussian):
    # was: "params must have the structure of ... (sites ['W', 'b']), got ['W', 'b']"
    with pytest.raises(InputError, match=r"params\['W'\] is a list, not an array.*\(2, 1\)"):
        slt.llc(gaussian, {"W": [[1.0], [-0.5]], "b": [0.3]}, KEY, **SHORT)


@pytest.mark.parametrize("w,x,message", [
    ([1.0, 0.5, 0.2], X, r"regression\(x\) at params of shapes \{'w': \(3,\)\} failed on data "
                         r"of shapes \{'x': \(40, 2\)\}"),
    ([1.0, 0.5], np.ones((N, 3)), r"failed on data of shapes \{'x': \(40, 3\)\}"),
    ([np.nan, 0.5], X, r"params\['w'\] must hold finite numbers"),
    ([1.0, 0.5], X * np.nan, r"data\['x'\] has 80 non-finite value"),
    ([1.0, 0.5], X[:0], r"data\['x'\] is empty"),
])
def test_fisher_of_a_model_function_names_bad_inputs(w, x, message):
    # were raw dot_general errors and NumPyro's "invalid loc parameter"
    with pytest.raises(InputError, match=message):
        slt.fisher_information(regression, {"w": jnp.asarray(w)},
                               request=slt.FisherRequest(x=x))


def test_compare_names_methods_none(gaussian):
    # was: 'NoneType' object is not iterable
    with pytest.raises(InputError, match="methods must be one or a sequence of 'bic'"):
        slt.compare({"a": gaussian}, KEY, methods=None)
    with pytest.raises(InputError, match="methods: unknown 'bics'; available: 'bic'"):
        slt.compare({"a": gaussian}, KEY, methods=("bic", "bics"))


@pytest.mark.parametrize("n", [1e300, 10**20])
def test_sbic_names_a_sample_size_no_integer_type_holds(n):
    # 1e300: a raw ufunc TypeError; 10**20: "not an integer >= 2"
    with pytest.raises(InputError, match="n must be an integer >= 2 that fits a 64-bit integer"):
        slt.sbic([0.0, 1.0], n, [[0.5, 0.0], [0.5, 1.0]])


def test_nested_sampling_settings_are_named_where_they_are_given():
    # free_energy named num_live for num_particles=0; compare clashed on nested_options
    with pytest.raises(InputError, match="num_live must be an integer >= 2, got 0"):
        slt.NestedSampling(num_live=0)
    with pytest.raises(InputError, match="nested must be a NestedSampling value, got dict"):
        slt.ComparisonPlan(nested={"num_live": 40})


# --------------------------------------------------------------------------- the command line


@pytest.fixture(scope="module")
def csv_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("csv")
    values = np.r_[RNG.normal(-2.0, 1.0, 30), RNG.normal(2.0, 1.0, 30)]
    other = RNG.normal(size=values.size)
    np.savetxt(folder / "noheader.csv", np.c_[other, values], delimiter=",")
    np.savetxt(folder / "two.csv", np.c_[values, other], delimiter=",", header="a,b",
               comments="")
    return folder


def _refused(capsys, argv, *needles):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("slt: error:") and len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err


def test_cli_refuses_a_fractional_number_of_components(csv_files, capsys):
    # gaussian_mixture(2.5) built K = 2 and compare reported a choice for "2.5"
    _refused(capsys, ["compare", str(csv_files / "two.csv"), "--y", "a", "--methods", "bic",
                      "-m", "gaussian_mixture(2.5)", "-m", "gaussian_mixture(1)"],
             "num_components must be an integer >= 1, got 2.5")


def test_cli_refuses_a_csv_without_header(csv_files, capsys):
    # its first data row became the header and the run used n - 1 rows
    _refused(capsys, ["llc", str(csv_files / "noheader.csv"), "-m", "linear_regression(1)"],
             "no header row", "add a first line naming the columns")


def test_cli_says_to_name_y_when_it_defaulted_to_every_column(csv_files, capsys):
    # was: "Incompatible shapes for broadcasting"
    _refused(capsys, ["compare", str(csv_files / "two.csv"), "--methods", "bic",
                      "-m", "gaussian_mixture(2)", "-m", "gaussian_mixture(1)"],
             "y defaulted to every column (2 of them)", "name the column(s) of y with --y")


def test_cli_explains_that_sbic_needs_python(csv_files, capsys):
    # --help listed sbic, which always failed: the command line cannot give a family
    _refused(capsys, ["compare", str(csv_files / "two.csv"), "--y", "a", "--methods",
                      "bic,sbic", "-m", "gaussian_mixture(2)", "-m", "gaussian_mixture(1)"],
             "sbic needs the models' nested family", "sbic_family=")
    assert main(["compare", "--help"]) == 0
    assert "sbic" not in capsys.readouterr().out


def test_free_energy_names_a_bad_method_or_waypoints():
    spec = slt.models.linear_regression(2)
    problem = spec.problem(spec.simulate(KEY, {"w": jnp.array([1.0, -1.0])}, 16))
    with pytest.raises(InputError, match="method must be one of 'auto'"):
        slt.free_energy(problem, KEY, method=np.array([1, 2]))   # was: truth value ambiguous
    with pytest.raises(InputError, match="waypoints must be a number or an array of numbers"):
        slt.free_energy(problem, KEY, waypoints="x", progress=False)  # was: could not convert
