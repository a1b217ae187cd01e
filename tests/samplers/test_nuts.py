"""NUTS at several inverse temperatures: correctness against closed forms, one compile.

The problem and the configuration (4 chains, 1000 warm-up steps, 1000 draws) are those of
tests/estimators/test_wbic.py, so the compiled program is shared.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from estimators.evidence_cases import conjugate_regression

from slt import compile_cache
from slt.samplers.nuts import NUTS, nll_of_draws, pointwise_loglik_of_draws, sample_nuts


@pytest.mark.heavy
def test_chains_at_different_temperatures_hit_their_own_expectations():
    case = conjugate_regression()
    betas = np.array([0.0, 0.05, 0.2, 1.0])  # beta = 0 samples the prior
    draws = sample_nuts(case.problem, jax.random.key(1), betas, NUTS(num_chains=1),
                        progress=False)
    assert draws.positions.shape == (4, 1000, 3) and draws.nll.shape == (4, 1000)
    for chain, beta in enumerate(betas):
        nll = draws.nll[chain]
        # one chain: standard error from its spread with a conservative ESS of a quarter
        se = nll.std() / np.sqrt(nll.size / 4)
        assert abs(nll.mean() - case.expected_nll(beta)) < 4 * se, beta
    assert not draws.diverging.any()


def test_the_program_compiles_once_per_configuration():
    problem = conjugate_regression().problem
    betas = 0.5  # four chains (`NUTS()`) at one temperature
    before = compile_cache.compile_count("nuts")
    first = sample_nuts(problem, jax.random.key(2), betas, progress=False)
    second = sample_nuts(problem, jax.random.key(3), betas, progress=False)
    assert compile_cache.compile_count("nuts") - before <= 1
    assert second.compile_time == 0.0
    assert not np.array_equal(first.nll, second.nll)
    again = sample_nuts(problem, jax.random.key(2), betas, progress=False)
    np.testing.assert_array_equal(first.nll, again.nll)  # same key, same draws


def test_more_temperatures_reuse_the_one_program():
    """The chains of each temperature are one group run by the program compiled for
    `num_chains` chains: three temperatures after one compile nothing new, and each group
    of chains is at its own temperature (a hotter one has the larger E_beta[n L_n])."""
    problem = conjugate_regression().problem
    one = NUTS(num_chains=1)  # the program of the test above and of test_rlct
    sample_nuts(problem, jax.random.key(5), 0.5, one, progress=False)
    before = compile_cache.compile_count("nuts")
    draws = sample_nuts(problem, jax.random.key(6), [0.05, 0.5, 1.0], one, progress=False)
    assert compile_cache.compile_count("nuts") == before and draws.compile_time == 0.0
    assert draws.nll.shape == (3, 1000)
    np.testing.assert_array_equal(draws.betas, [0.05, 0.5, 1.0])
    means = draws.nll.mean(axis=1)
    assert means[0] > means[1] > means[2]


def test_draw_evaluations_match_the_problem():
    problem = conjugate_regression().problem
    draws = jax.random.normal(jax.random.key(4), (3, 5, problem.dim))
    nll = nll_of_draws(problem, draws, batch_size=4)
    pointwise = pointwise_loglik_of_draws(problem, draws, batch_size=4)
    assert nll.shape == (3, 5) and pointwise.shape == (3, 5, problem.n)
    direct = -jnp.sum(problem.loglik(problem.unravel(draws[1, 2]), problem.data))
    np.testing.assert_allclose(nll[1, 2], direct, rtol=1e-12)
    np.testing.assert_allclose(-pointwise.sum(-1), nll, rtol=1e-12)


def test_bad_input():
    problem = conjugate_regression().problem
    with pytest.raises(ValueError, match="betas is empty"):
        sample_nuts(problem, jax.random.key(0), [])
    with pytest.raises(ValueError, match=">= 0"):
        sample_nuts(problem, jax.random.key(0), [-1.0])
    with pytest.raises(ValueError, match="num_samples"):
        sample_nuts(problem, jax.random.key(0), [1.0], NUTS(num_samples=0))
    with pytest.raises(ValueError, match=r"init\['w'\] is not finite"):
        sample_nuts(problem, jax.random.key(0), [1.0], init={"w": jnp.full(3, jnp.nan)})
    with pytest.raises(ValueError, match="sampler must be a NUTS value"):
        sample_nuts(problem, jax.random.key(0), [1.0], {"num_samples": 10})


def test_sequential_and_vectorized_chains_both_reach_the_closed_form():
    """`chain_method` changes how the chains are run (one chain a program call, or one
    vmapped program), not their target: both reach E_1[n L_n] of the conjugate regression.
    Their draws from one key agree only to rounding at first and then part (chaotic
    dynamics), so they are compared by their expectations. "auto" runs chain by chain on a
    CPU."""
    case = conjugate_regression()
    # the sequential run reuses the one-chain program of the tests above
    for sampler in (NUTS(num_chains=2, chain_method="sequential"),
                    NUTS(num_chains=2, chain_method="vectorized")):
        run = sample_nuts(case.problem, jax.random.key(7), 1.0, sampler, progress=False)
        nll = run.nll.ravel()
        assert abs(nll.mean() - case.expected_nll(1.0)) < 4 * nll.std() / np.sqrt(nll.size / 4)
    assert jax.default_backend() != "cpu" or not NUTS().vectorized
    assert NUTS(chain_method="vectorized").vectorized
    with pytest.raises(ValueError, match="chain_method must be one of"):
        NUTS(chain_method="parallel")
