"""The evidence estimators configured by values: the same numbers as the keyword-argument API
they replace, and values that check their fields and read well.

Bitwise reference. tests/data/evidence_reference.npz holds results recorded with the
keyword-argument API at commit 20e1526 (before the redesign), in float64, by this script:

    spec = slt.models.linear_regression(2)
    problem = spec.problem(spec.simulate(jax.random.key(1), {"w": jnp.array([1.0, -0.5])}, 60))
    key = jax.random.key(3)
    fit = slt.fit_map(problem, key, num_restarts=3, adam_steps=50, lbfgs_steps=10)
    smc = tempered_smc(problem, key, num_particles=40, num_copies=2, max_mcmc_steps=3,
                       waypoints=(0.3,), progress=False)
    nuts = sample_nuts(problem, key, np.repeat([0.5, 1.0], 2), num_warmup=30, num_samples=20,
                       chunk_size=7, target_accept_prob=0.9, progress=False)
    nested = nested_sampling(problem, key, num_live=50, num_runs=2, num_delete=5,
                             progress=False)
    sgld = slt.wbic(problem, key, sampler="sgld", num_chains=2, num_warmup=20,
                    num_samples=40, step_size=1e-3, batch_size=10, chunk_size=15,
                    progress=False)
    rlct = slt.rlct(problem, key, sampler="nuts", num_chains=1, num_warmup=30, num_samples=20,
                    betas=(0.1, 0.2, 0.4), max_multiplicity=2, progress=False)

Each test below makes the same call through the values and must give the same numbers to the
last bit.
"""

import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt
from slt import NUTS, MAPFit, NestedSampling, TemperedSGLD, Tempering
from slt.estimators.evidence.compare import ComparisonPlan
from slt.samplers.nested import nested_sampling
from slt.samplers.nuts import sample_nuts
from slt.samplers.tempering import tempered_smc

REFERENCE = Path(__file__).parent.parent / "data" / "evidence_reference.npz"
KEY = jax.random.key(3)


@pytest.fixture(scope="module")
def recorded():
    spec = slt.models.linear_regression(2)
    problem = spec.problem(spec.simulate(jax.random.key(1), {"w": jnp.array([1.0, -0.5])}, 60))
    with np.load(REFERENCE) as archive:
        return problem, dict(archive)


def test_fit_and_tempered_smc_are_bitwise_those_of_the_keyword_api(recorded):
    problem, reference = recorded
    fit = slt.fit_map(problem, KEY, MAPFit(num_restarts=3, adam_steps=50, lbfgs_steps=10))
    np.testing.assert_array_equal(fit.restart_objectives, reference["fit/restart_objectives"])
    smc = tempered_smc(problem, KEY, Tempering(num_particles=40, num_copies=2, max_mcmc_steps=3),
                       waypoints=(0.3,), progress=False)
    for name in ("log_evidence", "waypoint_nll", "betas"):
        np.testing.assert_array_equal(getattr(smc, name), reference[f"smc/{name}"])


@pytest.mark.slow  # 19 s of the 10-minute budget of `make test`: run with make test-slow
def test_nuts_and_nested_sampling_are_bitwise_those_of_the_keyword_api(recorded):
    problem, reference = recorded
    nuts = sample_nuts(problem, KEY, [0.5, 1.0],
                       NUTS(num_chains=2, num_warmup=30, num_samples=20, chunk_size=7,
                            target_acceptance=0.9), progress=False)
    # the same chains from the same keys, but on a CPU each chain now runs in a call of its
    # own (`NUTS.chain_method`, "auto") where the recording vmapped all four: programs of
    # another batch width, which XLA may round differently (7e-13 relative), as in the NUTS
    # check of rlct below
    np.testing.assert_allclose(nuts.positions, reference["nuts/positions"], rtol=1e-10,
                               atol=1e-12)
    np.testing.assert_allclose(nuts.step_size, reference["nuts/step_size"], rtol=1e-10)
    nested = nested_sampling(problem, KEY, NestedSampling(num_live=50, num_runs=2, num_delete=5),
                             progress=False)
    np.testing.assert_array_equal(nested.log_evidence, reference["nested/log_evidence"])
    np.testing.assert_array_equal(nested.samples, reference["nested/samples"])


@pytest.mark.slow  # 20 s of make test's 10 minutes, as the NUTS and nested case above
def test_wbic_by_sgld_and_rlct_by_nuts_are_bitwise_those_of_the_keyword_api(recorded):
    problem, reference = recorded
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: R-hat warnings
        sgld = slt.wbic(problem, KEY, sampler=TemperedSGLD(
            slt.samplers.SGLD(step_size=1e-3, batch_size=10, extrapolate=True),
            slt.RunPlan(num_chains=2, num_warmup=20, num_samples=40, chunk_size=15)),
            progress=False)
        rlct = slt.rlct(problem, KEY, betas=(0.1, 0.2, 0.4), max_multiplicity=2,
                        sampler=NUTS(num_chains=1, num_warmup=30, num_samples=20),
                        progress=False)
    np.testing.assert_array_equal(sgld.nll, reference["sgld/nll"])
    # the NUTS chains of each temperature now run as their own vmapped group (one program for
    # num_chains chains, slt.samplers.nuts): the same chains from the same keys, summed by
    # programs of another batch width, which XLA may round differently (5e-12 relative)
    np.testing.assert_allclose(rlct.expected_nll, reference["rlct/expected_nll"], rtol=1e-10)
    assert rlct.rlct == pytest.approx(float(reference["rlct/rlct"]), rel=1e-10)


@pytest.mark.parametrize("build, message", [
    (lambda: Tempering(num_particles=1), "num_particles must be an integer >= 2"),
    (lambda: Tempering(num_copies=2.5), "num_copies must be an integer"),
    (lambda: Tempering(target_ess=1.0), r"target_ess must be a number in \(0.0, 1.0\)"),
    (lambda: Tempering(kernel="mala"), "kernel must be one of"),
    (lambda: Tempering(num_mcmc_steps=0), "num_mcmc_steps must be an integer >= 1"),
    (lambda: Tempering(interim_correlation_threshold=1.5), "interim_correlation_threshold"),
    (lambda: Tempering(initial_step_size=-0.1), "initial_step_size must be a finite number"),
    (lambda: Tempering(kernel="hmc_imh", num_particles=10), "num_particles must be at least 16"),
    (lambda: Tempering(prior_sampler="normal"), "prior_sampler must be a function"),
    (lambda: NUTS(num_chains=0), "num_chains must be an integer >= 1"),
    (lambda: NUTS(num_warmup=-1), "num_warmup must be an integer >= 0"),
    (lambda: NUTS(target_acceptance=1.0), "target_acceptance must be a number in"),
    (lambda: NUTS(max_tree_depth=0), "max_tree_depth must be an integer >= 1"),
    (lambda: NUTS(dense_mass="yes"), "dense_mass must be True or False"),
    (lambda: NUTS(init_radius=np.inf), "init_radius must be a finite number"),
    (lambda: NestedSampling(num_live=1), "num_live must be an integer >= 2"),
    (lambda: NestedSampling(num_live=10, num_delete=10), "num_delete must be smaller"),
    (lambda: NestedSampling(termination=0.0), "termination must be a number in"),
    (lambda: NestedSampling(jump_probability=1.5), "jump_probability must be a number in"),
    (lambda: NestedSampling(num_inner_steps=0), "num_inner_steps must be an integer >= 1"),
    (lambda: MAPFit(num_restarts=0), "num_restarts must be an integer >= 1"),
    (lambda: MAPFit(learning_rate=0.0), "learning_rate must be a finite number > 0"),
    (lambda: MAPFit(grad_tol=-1.0), "grad_tol must be a finite number >= 0"),
    (lambda: TemperedSGLD(sgld=slt.samplers.MALA()), "sgld must be a slt.samplers.SGLD"),
    (lambda: TemperedSGLD(plan={"num_chains": 2}), "plan must be a slt.RunPlan"),
    (lambda: ComparisonPlan(fit={"num_restarts": 4}), "fit must be a MAPFit value"),
    (lambda: ComparisonPlan(num_modes=0), "num_modes must be an integer >= 1"),
    (lambda: ComparisonPlan(free_energy=NUTS()), "free_energy must be a Tempering value"),
    (lambda: ComparisonPlan(multipliers=(0.5, -1.0)), "every entry of multipliers"),
    (lambda: ComparisonPlan(rlct="nuts"), "rlct must be a sampler value"),
    (lambda: ComparisonPlan(loo=Tempering()), "loo must be None .* or a NUTS value"),
    (lambda: ComparisonPlan(nested=Tempering()), "nested must be a NestedSampling value"),
])
def test_values_refuse_bad_fields_by_name(build, message):
    with pytest.raises(slt.InputError, match=message):
        build()


def test_values_normalise_their_fields_and_read_well():
    nuts = NUTS(num_chains=2.0, num_warmup=np.int64(30), dense_mass=np.bool_(True))
    assert type(nuts.num_chains) is int and type(nuts.num_warmup) is int
    assert nuts.dense_mass is True
    assert repr(NUTS()) == (
        "NUTS(num_chains=4, num_warmup=1000, num_samples=1000, target_acceptance=0.8, "
        "max_tree_depth=10, dense_mass=False, init_radius=2.0, chunk_size=250, "
        "chain_method='auto')")
    assert repr(MAPFit(num_restarts=4.0)).startswith("MAPFit(num_restarts=4, init_radius=2.0")
    assert repr(Tempering(num_particles=200)).startswith(
        "Tempering(num_particles=200, num_copies=4, target_ess=0.95, kernel='auto'")
    assert repr(NestedSampling()).startswith("NestedSampling(num_live=500, num_runs=4")
    assert repr(TemperedSGLD()).startswith(
        "TemperedSGLD(sgld=SGLD(step_size='auto', batch_size=256, preconditioner=None, "
        "mala_every=10, extrapolate=True), plan=RunPlan(num_chains=4")
    # a plan shows what differs from the defaults, in its values too
    plan = ComparisonPlan(fit=MAPFit(num_restarts=8), multipliers=[0.5, 1, 2],
                          rlct=NUTS(num_chains=1))
    assert repr(plan) == ("ComparisonPlan(fit=MAPFit(num_restarts=8), "
                          "multipliers=(0.5, 1.0, 2.0), rlct=NUTS(num_chains=1))")
    assert repr(ComparisonPlan()) == "ComparisonPlan()"
    # values are frozen: a changed copy is a new value
    with pytest.raises(AttributeError):
        nuts.num_chains = 8


def test_where_the_tempered_columns_come_from():
    path = ComparisonPlan()
    assert [path.reads_path(m) for m in ("wbic", "rlct", "loo")] == [True, True, True]
    assert path.source() == "smc"
    nuts = ComparisonPlan(rlct=NUTS(num_chains=1), loo=NUTS())
    # WBIC then comes from lambda_hat's NUTS draws at 1 / log n
    assert not any(nuts.reads_path(m) for m in ("wbic", "rlct", "loo"))
    assert nuts.source() == "nuts"
    mixed = ComparisonPlan(loo=NUTS())
    assert mixed.reads_path("rlct") and not mixed.reads_path("loo")
    assert mixed.source() == "nuts+smc" and mixed.source(("bic", "wbic")) == "smc"


def test_the_estimators_refuse_what_is_not_a_value(recorded):
    problem, _ = recorded
    with pytest.raises(slt.InputError, match="sampler must be a sampler value; available"):
        slt.wbic(problem, KEY, sampler="nuts")
    with pytest.raises(slt.InputError, match="sampler must be a sampler value"):
        slt.rlct(problem, KEY, sampler={"num_chains": 2})
    with pytest.raises(slt.InputError, match="sampler must be a Tempering value"):
        slt.free_energy(problem, KEY, NestedSampling(), method="smc")
    with pytest.raises(slt.InputError, match="sampler must be a NestedSampling value"):
        slt.free_energy(problem, KEY, Tempering(), method="nested")
    with pytest.raises(slt.InputError, match="optimizer must be a MAPFit value"):
        slt.fit_map(problem, KEY, {"num_restarts": 2})
    with pytest.raises(slt.InputError, match="plan must be a ComparisonPlan value"):
        slt.compare({"a": problem}, KEY, plan={"fit": None})
    with pytest.raises(TypeError, match="num_chains"):
        slt.wbic(problem, KEY, num_chains=2)  # the old keywords are gone
    with pytest.raises(TypeError, match="fit_options"):
        slt.compare({"a": problem}, KEY, fit_options={"num_restarts": 2})
