"""lambda_hat against TRUTH.md on every case of the LLC accuracy targets (slow: 12-14 minutes on
2 cores with `pytest -m slow -n 2 --dist loadscope tests/estimators/test_llc_accuracy.py`).

Cases, keys and protocol are those of benchmarks/llc_accuracy.py (its docstring gives the
reasons): lambda_hat at a true parameter w0, averaged over independent data sets, 4 chains x
10 000 draws after 5000 warmup, step size by `llc_calibrate`, sampled in float32 as users
sample. These tests recompute the rows of the accuracy table in benchmarks/RESULTS.md. Each
case is sampled once per process: `-n 2 --dist loadscope` gives each class its own worker.

Tolerances. Each target is a relative error of the mean over data sets (regular 10%, normal
crossing 20%, reduced-rank regression and deep linear networks 25% per case and 10% median,
tanh 25%), on the point estimate, as the targets are stated. A verdict counts only if the mean
is precise enough to give one: its standard error, from the spread over data sets, must be at
most half the target's width (mean +- 2 se no wider than the band lambda +- target). The spread
is mostly the data sets' own: one data set's lambda_hat fluctuates by about
sqrt(lambda / (2 log n)) around the mean (Watanabe 2013), so se falls only with more data sets.

Normal crossings (2, 2) and (1, 1) miss their target, and the tests say so (strict xfails: they
fail the day the estimate comes within 20%). The estimand itself is the reason: at n = 5000,
gamma = 1 the exact expectation of lambda_hat (`slt.truth.normal_crossing_expected_llc`) is
37-41% below lambda = 1/4 for (2, 2) and 25% below 1/2 for (1, 1) (multiplicity 2;
benchmarks/RESULTS.md, "Finite-n values"; (1, 1) passed its 20% while its estimates ran
above that value, at -18.8%). What the sampler can be held to is that exact value, data set
by data set: every crossing is checked against it (`slt.truth.crossing_expected_llc` for the
powers (1, p): 14% and 13% below lambda for (1, 2) and (1, 3)), within 4 Monte Carlo standard
errors plus the upward bias that the measured configurational temperature T allows (a chain
at temperature T samples the local posterior at t / T, inflating lambda_hat by up to the
factor T).
"""

import statistics

import jax
import numpy as np
import pytest

from benchmarks import llc_accuracy
from slt import truth

pytestmark = pytest.mark.slow

KEY = jax.random.key(0)  # the benchmark's key: the same data sets, w0 and chains
GROUPS = {case.name: case.group for case in llc_accuracy.cases()}
MISSED = {"normal crossing (2, 2)": "the estimand at n = 5000 is 37-41% below lambda",
          "normal crossing (1, 1)": "the estimand at n = 5000 is 25% below lambda"}


@pytest.fixture(scope="module")
def estimates():
    """(case, lambda_hat per data set) for a case name, in float32 (`estimate` computes each
    case once per process)."""
    x64 = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", False)
    cases = {case.name: case for case in llc_accuracy.cases()}

    def get(name):
        case = cases[name]
        result = llc_accuracy.estimate(case, KEY)
        print(f"{name}: lambda_hat {result.mean:.4g} +- {result.se:.2g} (exact "
              f"{case.exact:.4g}), per data set {result.llc.round(4)}, T "
              f"{result.temperature.round(3)}")  # shown by -rP
        return case, result

    yield get
    jax.config.update("jax_enable_x64", x64)


def _relative_error(case, result) -> float:
    assert result.failures == 0, f"{case.name}: no step size passed on {result.failures} sets"
    assert 2 * result.se <= case.target * case.exact, f"{case.name}: too imprecise to decide"
    return result.mean / case.exact - 1


def _cases(*groups):
    """Case names of these groups, the missed one marked as a strict xfail."""
    return [
        pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=MISSED[name]))
        if name in MISSED else name
        for name, group in GROUPS.items() if group in groups
    ]


def _check_target(estimates, name):
    case, result = estimates(name)
    error = _relative_error(case, result)
    assert abs(error) <= case.target, f"{name}: {result.mean:.4g} vs {case.exact:.4g}"


class TestRegressionModels:
    """Linear regression, reduced-rank regression, deep linear networks (one xdist worker)."""

    @pytest.mark.parametrize("name", _cases("regular", "linear network"))
    def test_within_target(self, estimates, name):
        _check_target(estimates, name)

    def test_linear_networks_median_error(self, estimates):
        errors = [abs(_relative_error(*estimates(name)))
                  for name, group in GROUPS.items() if group == "linear network"]
        assert len(errors) == 10 and statistics.median(errors) <= 0.10


class TestSingularToys:
    """Normal crossings and tanh networks at f = 0 (the other xdist worker)."""

    @pytest.mark.parametrize("name", _cases("normal crossing", "tanh"))
    def test_within_target(self, estimates, name):
        _check_target(estimates, name)

    @pytest.mark.parametrize("powers", [(1, 1), (2, 2), (1, 2), (1, 3)])
    def test_normal_crossing_follows_its_exact_finite_n_value(self, estimates, powers):
        case, result = estimates(f"normal crossing {powers}")
        exact, built = [], case.build(KEY)
        for seed in result.seeds:
            data = llc_accuracy.simulate(case, KEY, seed, built)
            x, y = (np.asarray(data[k], np.float64).ravel() for k in ("x", "y"))
            moments = {"second_moment": x @ x / case.n, "cross_moment": x @ y / case.n}
            nbeta = case.n / np.log(case.n)
            exact.append(truth.crossing_expected_llc(nbeta, powers, **moments)
                         if min(powers) == 1 else
                         truth.normal_crossing_expected_llc(nbeta, powers[0], **moments))
        exact = np.array(exact)
        difference = float(np.mean(result.llc - exact))
        se = float(np.sqrt(np.sum(result.std_error**2)) / len(exact))
        allowed_bias = max(float(np.mean(result.temperature)) - 1, 0.0) * float(np.mean(exact))
        assert -4 * se <= difference <= allowed_bias + 4 * se, (
            f"lambda_hat {result.llc} vs exact {exact} (se {se:.3g}, T {result.temperature})"
        )
