"""Bad input to every public function: a clear InputError (or ValueError) naming the argument.

Every case fails in argument checking, before any sampling, so the module runs in seconds: the
only computation is one tiny problem and one short fit, shared by all cases.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt
from slt import Problem, models
from slt.validation import (
    InputError,
    require_in_interval,
    require_int,
    require_key,
    require_positive,
    require_step_size,
)

SPEC = models.linear_regression(2)
MIXTURE = models.fixed_component_mixture()
MIXTURE_POINT = {"pi": 0.5, "mu": 1.0, "sigma": 1.0}
KEY = jax.random.key(0)


@pytest.fixture(scope="module")
def case():
    data = SPEC.simulate(jax.random.key(0), {"w": jnp.array([1.0, -1.0])}, 20)
    problem = SPEC.problem(data)
    fit = slt.fit_map(problem, jax.random.key(1),
                      slt.MAPFit(num_restarts=1, adam_steps=20, lbfgs_steps=10))
    return {"problem": problem, "fit": fit, "params": fit.params, "data": data}


def _nan_params(case):
    return {"w": jnp.array([jnp.nan, 0.0])}


# (function, arguments built from the case, overrides, fragment of the message)
CASES = [
    # Problem
    ("Problem", lambda c: (SPEC.model, {"x": c["data"]["x"], "y": np.where(
        np.arange(20) == 3, np.inf, c["data"]["y"])}), {}, r"data\['y'\] has 1 non-finite"),
    ("Problem", lambda c: (SPEC.model, {"x": c["data"]["x"][:, 0], "y": c["data"]["y"]}), {},
     "failed on data of shapes"),
    ("Problem", lambda c: (SPEC.model, {"x": c["data"]["x"], "y": c["data"]["y"][:5]}), {},
     "share their first"),
    ("Problem", lambda c: (SPEC.model, {"x": c["data"]["x"][:0], "y": c["data"]["y"][:0]}), {},
     "is empty"),
    ("Problem", lambda c: (SPEC.model, {"x": c["data"]["x"], "y": np.array(["a"] * 20)}), {},
     "dtype <U1"),
    ("Problem", lambda c: (SPEC.model, c["data"]), {"x64": "yes"}, "x64 must be None, True"),
    ("Problem", lambda c: (SPEC.model, [1.0, 2.0]), {}, "data must be a dict"),
    ("Problem.from_loss", lambda c: (3, {"w": jnp.zeros(2)}, c["data"]), {},
     "nll_fn must be a function"),
    ("Problem.from_loss", lambda c: (lambda p, b: b["y"] * 0, {"w": jnp.zeros(2)}, c["data"]),
     {"log_prior": 1.0}, "log_prior must be a function"),
    ("Problem.from_loss", lambda c: (lambda p, b: b["y"] * 0, {"w": jnp.full(2, jnp.inf)},
                                     c["data"]), {}, r"params\['w'\] is not finite"),
    # fit_map (its settings are a MAPFit value, which checks its fields when built)
    ("fit_map", lambda c: ("problem", KEY), {}, "problem must be an slt.Problem"),
    ("fit_map", lambda c: (c["problem"], 0), {}, "key must be one JAX PRNG key"),
    ("MAPFit", lambda c: (), {"num_restarts": 0}, "num_restarts"),
    ("MAPFit", lambda c: (), {"num_restarts": 1.5}, "num_restarts"),
    ("MAPFit", lambda c: (), {"learning_rate": np.inf}, "learning_rate"),
    ("fit_map", lambda c: (c["problem"], KEY), {"optimizer": {"num_restarts": 2}}, "MAPFit"),
    ("fit_map", lambda c: (c["problem"], KEY), {"init": {"w": jnp.zeros(3)}}, "has shape"),
    ("fit_map", lambda c: (c["problem"], KEY), {"init": {"v": jnp.zeros(2)}}, "structure"),
    # bic, laplace
    ("bic", lambda c: (c["problem"], "fit"), {}, "fit must be a FitResult"),
    ("bic", lambda c: (c["problem"], c["fit"]), {"dim": 1.5}, "dim"),
    ("laplace", lambda c: (c["problem"], c["fit"]), {"num_modes": 0}, "num_modes"),
    ("laplace", lambda c: (c["problem"], c["fit"]), {"num_modes": np.nan}, "num_modes"),
    # llc, llc_calibrate: what they check when called; their settings are values that check
    # their fields when built (LocalPosterior, SGLD, RunPlan, Calibration)
    ("llc", lambda c: (c["problem"], _nan_params(c), KEY), {}, "is not finite"),
    ("llc", lambda c: (c["problem"], c["params"], 7), {}, "key"),
    ("RunPlan", lambda c: (), {"num_chains": 0}, "num_chains"),
    ("SGLD", lambda c: (), {"step_size": 0.0}, "step_size"),
    ("SGLD", lambda c: (), {"step_size": np.inf}, "step_size"),
    ("SGLD", lambda c: (), {"step_size": np.nan}, "step_size"),
    ("LocalPosterior", lambda c: (), {"nbeta": -1.0}, "nbeta"),
    ("LocalPosterior", lambda c: (), {"nbeta": np.inf}, "nbeta"),
    ("LocalPosterior", lambda c: (), {"gamma": np.nan}, "gamma"),
    ("SGLD", lambda c: (), {"mala_every": -1}, "mala_every"),
    ("RunPlan", lambda c: (), {"chunk_size": 0}, "chunk_size"),
    ("llc_calibrate", lambda c: (c["problem"], c["params"], KEY),
     {"sampler": slt.samplers.SGLD(step_size=1e-4)},
     "llc_calibrate chooses SGLD's or SGHMC's step size"),
    ("SGHMC", lambda c: (), {"friction": 2.0}, "friction"),
    ("Calibration", lambda c: (), {"step_sizes": [1e-4, -1]}, "step_sizes"),
    ("Calibration", lambda c: (), {"min_acceptance": 2.0}, "min_acceptance"),
    ("Calibration", lambda c: (), {"chains_per_candidate": 0}, "chains_per_candidate"),
    # wbic, rlct, free_energy, compare: what they check when called; their samplers are
    # values that check their fields when built (Tempering, NUTS, TemperedSGLD, ...)
    ("wbic", lambda c: (c["problem"], KEY), {"beta": 0.0}, "beta"),
    ("wbic", lambda c: (c["problem"], KEY), {"beta": -1.0}, "beta"),
    ("wbic", lambda c: (c["problem"], KEY), {"sampler": "nuts"}, "sampler must be a sampler"),
    ("NUTS", lambda c: (), {"num_chains": 0}, "num_chains"),
    ("NUTS", lambda c: (), {"num_samples": 0}, "num_samples"),
    ("NUTS", lambda c: (), {"target_acceptance": 1.5}, "target_acceptance"),
    ("wbic", lambda c: (c["problem"], KEY),
     {"sampler": slt.NUTS(), "init": {"w": jnp.zeros(5)}}, "has shape"),
    ("TemperedSGLD", lambda c: (), {"sgld": slt.samplers.MALA()}, "sgld must be"),
    ("TemperedSGLD", lambda c: (), {"plan": {"num_chains": 2}}, "plan must be"),
    ("rlct", lambda c: (c["problem"], KEY), {"sampler": {"num_chains": 0}}, "sampler must be"),
    ("rlct", lambda c: (c["problem"], KEY), {"betas": [np.nan, 1.0, 2.0]}, "entry of betas"),
    ("rlct", lambda c: (c["problem"], KEY), {"multipliers": [-1.0, 1.0, 2.0]}, "multiplier"),
    ("Tempering", lambda c: (), {"num_particles": 1}, "num_particles"),
    ("Tempering", lambda c: (), {"num_copies": 2.5}, "num_copies"),
    ("free_energy", lambda c: (c["problem"], KEY), {"sampler": slt.Tempering(num_copies=1)},
     "num_copies"),
    ("Tempering", lambda c: (), {"target_ess": 1.0}, "target_ess"),
    ("Tempering", lambda c: (), {"prior_sampler": 3}, "prior_sampler"),
    ("free_energy", lambda c: (c["problem"], KEY),
     {"sampler": slt.Tempering(prior_sampler=lambda key, num: jnp.zeros((num, 5)))},
     "must return shape"),
    ("NestedSampling", lambda c: (), {"num_live": 1}, "num_live"),
    ("compare", lambda c: ({"a": c["problem"]}, KEY), {"plan": {"fit": None}},
     "plan must be a ComparisonPlan"),
    ("ComparisonPlan", lambda c: (), {"fit": {"num_restarts": 2}}, "fit must be a MAPFit"),
    ("compare", lambda c: ([c["problem"]], KEY), {}, "problems must be a dict"),
    ("compare", lambda c: ({"a": 1}, KEY), {}, r"problems\['a'\] must be an slt.Problem"),
    ("compare", lambda c: ({"a": c["problem"], "b": SPEC.problem(
        {k: v[:10] for k, v in c["data"].items()})}, KEY), {}, "numbers of examples differ"),
    # geometry
    ("fisher_information", lambda c: (MIXTURE, {**MIXTURE_POINT, "mu": np.nan}), {},
     "not finite"),
    ("fisher_information", lambda c: (MIXTURE, {**MIXTURE_POINT, "sigma": -1.0}), {},
     "outside its support"),
    ("fisher_information", lambda c: (MIXTURE, MIXTURE_POINT),
     {"request": slt.FisherRequest(kind="monte_carlo", num_draws=4), "key": 0},
     "key must be one JAX PRNG key"),
    ("fisher_information", lambda c: (SPEC, {"w": np.zeros(2)}),
     {"request": slt.FisherRequest(x=np.ones((4, 2))), "chunk_size": 0}, "chunk_size"),
    ("fisher_scan", lambda c: (MIXTURE, MIXTURE_POINT, {"mu": [0.0, np.inf]}),
     {"progress": False}, "finite"),
    ("kl_divergence", lambda c: (MIXTURE, MIXTURE_POINT, {**MIXTURE_POINT, "sigma": 0.0}), {},
     "outside its support"),
]

FUNCTIONS = {
    "Problem": Problem, "Problem.from_loss": Problem.from_loss, "fit_map": slt.fit_map,
    "bic": slt.bic, "laplace": slt.laplace, "llc": slt.llc, "llc_calibrate": slt.llc_calibrate,
    "LocalPosterior": slt.LocalPosterior, "SGLD": slt.samplers.SGLD, "RunPlan": slt.RunPlan,
    "Calibration": slt.samplers.Calibration, "SGHMC": slt.samplers.SGHMC,
    "MAPFit": slt.MAPFit, "NUTS": slt.NUTS, "Tempering": slt.Tempering,
    "TemperedSGLD": slt.TemperedSGLD, "NestedSampling": slt.NestedSampling,
    "ComparisonPlan": slt.ComparisonPlan,
    "wbic": slt.wbic, "rlct": slt.rlct, "free_energy": slt.free_energy, "compare": slt.compare,
    "fisher_information": slt.fisher_information, "fisher_scan": slt.fisher_scan,
    "kl_divergence": slt.kl_divergence,
}
QUIET = {"llc_calibrate", "wbic", "rlct", "free_energy", "compare"}


@pytest.mark.parametrize(
    "name, arguments, overrides, message",
    CASES,
    ids=[f"{name}-{message[:24]}" for name, _, _, message in CASES],
)
def test_bad_input_is_a_clear_value_error(case, name, arguments, overrides, message):
    options = {"progress": False} if name in QUIET else {}
    with pytest.raises(ValueError, match=message):
        FUNCTIONS[name](*arguments(case), **(options | overrides))


def test_the_shared_checks_raise_input_error_naming_argument_and_value():
    with pytest.raises(InputError, match=r"num_chains must be an integer >= 1, got 0"):
        require_int("num_chains", 0, minimum=1)
    for bad in (True, 1.5, np.nan, "2", None):
        with pytest.raises(InputError, match="must be an integer"):
            require_int("n", bad)
    assert require_int("n", 3.0) == 3 and require_int("n", np.int64(2), minimum=2) == 2
    for bad in (0.0, -1.0, np.inf, np.nan, "1", [1.0], False):
        with pytest.raises(InputError, match="step_size must be a finite number > 0"):
            require_positive("step_size", bad)
    assert require_positive("gamma", 0.0, allow_zero=True) == 0.0
    assert require_step_size("step_size", "auto") == "auto"
    with pytest.raises(InputError, match='or "auto"'):
        require_step_size("step_size", "fast")
    with pytest.raises(InputError, match=r"in \(0.0, 1.0\)"):
        require_in_interval("target_ess", 1.0, 0.0, 1.0)
    assert require_in_interval("p", 1.0, 0.0, 1.0, closed=True) == 1.0
    assert require_key(jax.random.PRNGKey(0)).shape == (2,)
    with pytest.raises(InputError, match=r"got array \(2,\)"):
        require_key(jax.random.split(KEY))
    # InputError is both: either handler catches it
    assert issubclass(InputError, ValueError) and issubclass(InputError, TypeError)


def test_methods_too_demanding_for_tiny_n_say_so(case):
    tiny = SPEC.problem({k: v[:2] for k, v in case["data"].items()})
    one = SPEC.problem({k: v[:1] for k, v in case["data"].items()})
    with pytest.raises(ValueError, match="n >= 2"):
        slt.llc(one, case["params"], KEY, sampler=slt.samplers.SGLD(step_size=1e-4),
                plan=slt.RunPlan(progress=False))
    with pytest.raises(ValueError, match="n >= 2"):
        slt.wbic(one, KEY, progress=False)
    with pytest.raises(ValueError, match="n >= 3"):
        slt.rlct(tiny, KEY, progress=False)
    # the default temperatures fit every n >= 4 (tests/estimators/test_rlct.py); betas given
    # too small for the data are refused
    with pytest.raises(ValueError, match="give larger betas"):
        slt.rlct(SPEC.problem({k: v[:4] for k, v in case["data"].items()}), KEY,
                 betas=(0.2, 0.5, 1.0), progress=False)
