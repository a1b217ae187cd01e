"""compare(): the table, the choices, the plot; and the issue's two model-selection experiments."""

import jax
import matplotlib
import numpy as np
import pytest

from slt import models, truth
from slt.estimators import compare

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
    result = compare(problems, jax.random.key(0), methods=methods,
                     rlct_options={"multipliers": (0.5, 1, 2, 4), "num_chains": 1},
                     sampler="nuts", progress=False)
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
    # WBIC is the rlct run at beta = 1 / log n, not a second sampler run
    assert result.results["d=2"]["wbic"] is result.results["d=2"]["rlct"].wbic()
    assert "ComparisonResult" in repr(result) and result.summary() is table
    assert result.plot() is not None


def test_bad_input():
    problem = conjugate_regression().problem
    with pytest.raises(ValueError, match="available"):
        compare({"a": problem}, jax.random.key(0), methods=("bic", "aic"))
    with pytest.raises(ValueError, match="empty"):
        compare({}, jax.random.key(0))


@pytest.mark.heavy
def test_compare_on_one_tempered_path():
    """The default SMC path: F, WBIC, lambda and LOO from one run per model, against the
    exact answers of both regressions; the table says where the numbers came from."""
    case = conjugate_regression()
    data = case.problem.data
    smaller = models.linear_regression(2, noise_scale=0.5, prior_precision=2.0)
    x2 = data["x"][:, :2]
    problems = {"d=2": smaller.problem({"x": x2, "y": data["y"]}), "d=3": case.problem}
    result = compare(problems, jax.random.key(5), progress=False,
                     methods=("bic", "laplace", "wbic", "free_energy", "rlct", "loo"))
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
    for criterion, choice in result.choices.items():
        if criterion != "free_energy":
            line = next(s for s in statements if s.startswith(f"{criterion} picks {choice}"))
            assert ("the same as the reference F" in line) == ("d=2" in choice)
