"""compare(): the table, the choices, the plot; and the issue's two model-selection experiments."""

import dataclasses
import functools

import jax
import matplotlib
import numpy as np
import pytest

from slt import NUTS, ComparisonPlan, models, truth
from slt.estimators import compare
from slt.estimators.evidence.compare import CAVEATS
from slt.estimators.evidence.sbic import sbic_gaussian_mixtures
from slt.results import load
from slt.validation import InputError

from .evidence_cases import conjugate_regression

matplotlib.use("Agg")


@pytest.mark.heavy
def test_compare_nested_regressions_picks_the_true_dimension():
    """y depends on two of three inputs; both classes' log Z are exact, so is the right choice.

    The d = 3 problem and the sampler settings are those of the other tests (compiled once)."""
    case = conjugate_regression()
    data = case.problem.data
    smaller = models.linear_regression(2, noise_scale=0.5, prior_precision=2.0)
    problems = {"d=2": smaller.problem({"x": data["x"][:, :2], "y": data["y"]}),
                "d=3": case.problem}
    exact = {"d=2": truth.linear_regression_log_evidence(data["x"][:, :2], data["y"], 0.5, 2.0),
             "d=3": case.log_evidence}
    methods = ("bic", "laplace", "wbic", "rlct", "loo")  # free_energy: tested on its own
    short = {"num_warmup": 500, "num_samples": 500}  # rlct's 4 chains and LOO's: one program
    plan = ComparisonPlan(multipliers=(0.5, 1, 2, 4), rlct=NUTS(num_chains=1, **short),
                          loo=NUTS(**short))
    result = compare(problems, jax.random.key(0), methods=methods, plan=plan, progress=False)
    table = result.table
    assert list(table.index) == ["d=2", "d=3"] and list(table["d"]) == [2, 3]
    for column in ("nll_hat", "bic", "laplace", "wbic", "wbic_se", "rlct", "rlct_se",
                   "singular_bic", "elpd_loo"):
        assert np.all(np.isfinite(table[column].astype(float))), column
    assert set(result.choices) == set(methods)
    best = max(exact, key=exact.get)
    assert best == "d=2"
    for criterion in ("bic", "laplace", "wbic", "rlct"):
        assert result.choices[criterion] == best, criterion
    np.testing.assert_allclose(-table["laplace"], [exact["d=2"], exact["d=3"]], rtol=1e-6)
    assert set(result.results["d=2"]) == {"fit", *methods}
    # where the time went: every step of every model, in the order the steps ran
    assert list(result.timings.index) == ["d=2", "d=3"]
    assert set(result.timings.columns) == {"fit", *methods} and result.timings.columns[0] == "fit"
    assert np.all(result.timings.to_numpy() > 0)
    # WBIC is the rlct run at beta = 1 / log n, not a second sampler run; both are NUTS's
    assert result.results["d=2"]["wbic"] is result.results["d=2"]["rlct"].wbic()
    assert {result.results[name]["rlct"].sampler for name in problems} == {"nuts"}
    assert "ComparisonResult" in repr(result) and result.summary() is table
    assert result.plot() is not None


def test_bad_input():
    problem = conjugate_regression().problem
    with pytest.raises(ValueError, match="available"):
        compare({"a": problem}, jax.random.key(0), methods=("bic", "aic"))
    with pytest.raises(ValueError, match="empty"):
        compare({}, jax.random.key(0))
    # a column's configuration is a value: anything else is refused, not ignored
    with pytest.raises(InputError, match="rlct must be a sampler value; available: Tempering"):
        ComparisonPlan(rlct="nuts")
    with pytest.raises(InputError, match="loo must be None .* or a NUTS value, got dict"):
        ComparisonPlan(loo={"num_chains": 2})
    with pytest.raises(InputError, match="plan must be a ComparisonPlan value, got dict"):
        compare({"a": problem}, jax.random.key(0), plan={"multipliers": (1, 2)})


@pytest.mark.slow  # make test's 10 minutes: run with -m slow
def test_compare_on_one_tempered_path():
    """The default SMC path: F, WBIC, lambda and LOO from one run per model, against the
    exact answers of both regressions; the table says where the numbers came from."""
    case = conjugate_regression()
    data = case.problem.data
    smaller = models.linear_regression(2, noise_scale=0.5, prior_precision=2.0)
    x2 = data["x"][:, :2]
    problems = {"d=2": smaller.problem({"x": x2, "y": data["y"]}), "d=3": case.problem}
    result = compare(problems, jax.random.key(5), progress=False,
                     methods=("bic", "laplace", "wbic", "free_energy", "rlct", "loo"),
                     plan=ComparisonPlan(draws=None))  # the tempered path for every model
    table = result.table
    assert list(table["source"]) == ["smc", "smc"]
    exact = {"d=2": -truth.linear_regression_log_evidence(x2, data["y"], 0.5, 2.0),
             "d=3": -case.log_evidence}
    beta = 1 / np.log(case.problem.n)
    exact_wbic = {"d=2": truth.linear_regression_tempered_expected_nll(
        np.asarray(x2), np.asarray(data["y"]), 0.5, 2.0, beta), "d=3": case.expected_nll(beta)}
    for name in problems:
        row = table.loc[name]
        assert abs(row["free_energy"] - exact[name]) < 4 * row["free_energy_se"] + 0.05
        assert abs(row["wbic"] - exact_wbic[name]) < 3 * row["wbic_se"]
        assert abs(row["rlct"] - row["d"] / 2) < 0.15 * row["d"] / 2 and row["m"] == 1
    assert result.choices["free_energy"] == "d=2"
    assert set(result.results["d=2"]) == {"fit", "bic", "laplace", "wbic", "free_energy",
                                          "rlct", "loo"}
    assert "±" in repr(result)
    # one statement on the reference, one per other criterion, each from the numbers above
    statements = result.assessment()
    assert len(statements) == 1 + len(result.choices) - 1
    assert statements[0].startswith("Reference F (tempered SMC) picks d=2")
    assert set(table["free_energy_method"]) == {"smc"}  # regressions declare no label symmetry
    for criterion, choice in result.choices.items():
        if criterion != "free_energy":
            line = next(s for s in statements if s.startswith(f"{criterion} picks {choice}"))
            assert ("the same as the reference F" in line) == ("d=2" in choice)


@pytest.mark.slow  # make test's 10 minutes: run with -m slow
def test_sbic_column_from_the_fits_of_a_nested_mixture_family(tmp_path):
    """methods=(..., "sbic") with the family's table: the column is exactly
    `sbic_gaussian_mixtures` of the MAP log-likelihoods, its choice the lowest -sBIC, and the
    result saves and loads."""
    spec = models.gaussian_mixture(2)
    truth_values = {"weights": np.array([0.4, 0.6]), "means": np.array([[-2.0], [2.0]]),
                    "scales": np.array([[0.7], [0.7]])}
    data = spec.simulate(jax.random.key(3), truth_values, 200)
    problems = {f"K={k}": models.gaussian_mixture(k).problem(data) for k in (1, 2, 3)}
    family = functools.partial(sbic_gaussian_mixtures, dim=1)
    result = compare(problems, jax.random.key(0), methods=("bic", "sbic"), sbic_family=family,
                     progress=False)
    fits = [result.results[name]["fit"].loglik for name in problems]
    expected = sbic_gaussian_mixtures(fits, 200, dim=1)
    np.testing.assert_allclose(result.table["sbic"], expected.free_energy, rtol=1e-12)
    np.testing.assert_allclose(result.table["sbic_posterior"], expected.posterior, rtol=1e-12)
    assert result.choices["sbic"] == expected.selected == "K=2"
    # beside a reference F, the assessment says whether sBIC agrees and, if not, why
    table = result.table.assign(free_energy=result.table["sbic"] + [0.0, 5.0, -5.0],
                                free_energy_se=0.1)
    with_reference = dataclasses.replace(
        result, table=table, choices={"free_energy": "K=3", **result.choices})
    sbic_line = [line for line in with_reference.assessment() if line.startswith("sbic")]
    assert sbic_line == [f"sbic picks K=2: not what the reference F picks; its values are "
                         f"-5 to +5 nats from F — {CAVEATS['sbic']}."]
    again = load(result.save(tmp_path / "sbic.nc"))
    np.testing.assert_allclose(again.table["sbic"], result.table["sbic"])
    with pytest.raises(ValueError, match="sbic_family"):
        compare(problems, jax.random.key(0), methods=("bic", "sbic"), progress=False)
    with pytest.raises(ValueError, match="SBICResult for the 3 models"):
        compare(problems, jax.random.key(0), methods=("sbic",), progress=False,
                sbic_family=lambda ll, n: sbic_gaussian_mixtures(ll[:2], n))
