"""Same key, same numbers (bitwise, on CPU); other keys and other chains, other random streams.

Each sampling estimator runs with key 0, then with key 1, then with key 0 again: the two key-0
results agree in every number (timings excepted), so nothing but the key carries state from
call to call; the key-1 result differs; and independent chains (copies, restarts, replicates)
within one run differ from each other. `fit_map` and Monte Carlo Fisher compile on every call,
so they run twice only. Bitwise agreement across processes is checked by test_checkpoint.py,
which resumes in this process runs begun in another.
"""

import jax
import numpy as np
import pytest
from run_cases import RUNS, assert_bitwise_equal, minimum, problem

import slt
from slt import models

KEY, OTHER_KEY = jax.random.key(0), jax.random.key(1)


def _three_runs(run):
    first, other, second = run(KEY), run(OTHER_KEY), run(KEY)
    assert_bitwise_equal(first, second)
    return first, other


@pytest.fixture(scope="module")
def fit():
    """A MAP fit stopped after a few steps, so that every restart still shows its start."""
    return slt.fit_map(problem(), KEY, slt.MAPFit(num_restarts=3, adam_steps=3, lbfgs_steps=1))


def _all_differ(rows: np.ndarray) -> bool:
    """No two rows (chains) of a (chain, ...) array are equal."""
    return all(
        not np.array_equal(rows[i], rows[j]) for i in range(len(rows)) for j in range(i)
    )


@pytest.mark.parametrize(
    "name, trace",
    [
        ("llc", lambda result: result.loss_trace),
        ("wbic", lambda result: result.nll),
        ("free_energy", lambda result: result.run.betas),  # each copy its own ladder
    ],
)
def test_sampling_estimators_repeat_with_their_key(name, trace):
    first, other = _three_runs(RUNS[name])
    assert _all_differ(trace(first)) and not np.array_equal(trace(first), trace(other))


def test_llc_calibrate_repeats_with_its_key():
    """Runs this short are cold (the temperature criterion rejects them, rightly); it is
    switched off because this test is about reproducibility, not the criterion."""
    sweep = slt.samplers.Calibration(step_sizes=[1e-3, 3e-3], num_samples=60, num_warmup=20,
                                     max_temperature_deviation=10.0)
    first, other = _three_runs(lambda key: slt.llc_calibrate(
        problem(), minimum(), key, sampler=slt.samplers.SGLD(step_size=sweep, batch_size=10),
        progress=False,
    ))
    assert not np.array_equal(first.table["llc"], other.table["llc"])


def test_rlct_repeats_with_its_key():
    """One chain per beta, so that it shares the compiled NUTS program of the wbic run."""
    first, other = _three_runs(lambda key: slt.rlct(
        problem(), key, betas=[0.2, 0.4, 0.8], max_multiplicity=1, progress=False,
        sampler=slt.NUTS(num_chains=1, num_warmup=40, num_samples=60, chunk_size=10),
    ))
    nll = np.concatenate([result.nll for result in first.wbic_results])
    assert _all_differ(nll) and first.rlct != other.rlct


def test_fit_map_repeats_with_its_key_and_restarts_start_apart(fit):
    assert_bitwise_equal(fit, slt.fit_map(problem(), KEY, slt.MAPFit(
        num_restarts=3, adam_steps=3, lbfgs_steps=1)))
    assert _all_differ(fit.restart_objectives[:, None])


def test_monte_carlo_fisher_repeats_with_its_key():
    first, second = (
        slt.fisher_information(
            models.fixed_component_mixture(), {"pi": 0.4, "mu": 1.5, "sigma": 0.8}, key=KEY,
            request=slt.FisherRequest(kind="monte_carlo", num_draws=50),
        )
        for _ in range(2)
    )
    assert_bitwise_equal(first, second)
    assert np.all(first.std_error > 0)  # the replicates draw different observations


@pytest.mark.filterwarnings("ignore:the fit is .* short of the maximum")
def test_laplace_and_bic_are_deterministic_functions_of_the_fit(fit):
    for estimator in (slt.laplace, slt.bic):
        assert_bitwise_equal(estimator(problem(), fit), estimator(problem(), fit))
