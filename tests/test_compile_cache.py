"""Compiled programs are kept with their Problem and released with it."""

import gc
import os
import weakref

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from slt import (
    MAPFit,
    Problem,
    RunPlan,
    compile_cache,
    fisher_information,
    fisher_scan,
    fit_map,
    kl_divergence,
    llc,
    models,
)
from slt.samplers import SGLD
from slt.samplers.empty_component import component_structure
from slt.samplers.nuts import NUTS, sample_nuts
from slt.samplers.tempering import Tempering, tempered_smc


def _regression_problem():
    spec = models.linear_regression(2, noise_scale=0.5, prior_precision=2.0)
    data = spec.simulate(jax.random.key(1), {"w": jnp.array([1.0, -0.5])}, 100)
    return spec.problem(data)


@pytest.mark.slow  # 13 s of make test's 10 minutes: a fit, an LLC run, SMC and NUTS
@pytest.mark.filterwarnings("ignore")
def test_nothing_of_slt_holds_a_dropped_problem():
    """After a fit, an LLC run, tempered SMC and NUTS on a problem, `del problem` and a
    garbage collection leave no reference to it (its compiled programs, the data arguments
    rather than constants of each, go with it)."""
    problem = _regression_problem()
    key = jax.random.key(0)
    fit = fit_map(problem, key, MAPFit(num_restarts=2, adam_steps=20, lbfgs_steps=0))  # no L-BFGS
    llc(problem, fit.params, key, sampler=SGLD(step_size=1e-4, batch_size=50),
        plan=RunPlan(num_chains=2, num_samples=20, num_warmup=10, progress=False))
    tempered_smc(problem, key, Tempering(num_particles=40, num_copies=2, max_mcmc_steps=2,
                                         kernel="hmc"), progress=False)
    sample_nuts(problem, key, 1.0, NUTS(num_chains=2, num_warmup=10, num_samples=10),
                progress=False)
    kinds = [signature[0] for signature in compile_cache._PROGRAMS[problem]]
    # the fit's starting points in a program of their own (`Problem.random_starts`); n L_n of
    # SMC's prior draws in one, NUTS's recorded by its chunk program
    assert sorted(kinds) == ["centre measurements", "chain chunk", "fit restarts", "map draws",
                             "nuts", "random starts", "tempering stage"]
    reference = weakref.ref(problem)
    del problem, fit
    gc.collect()
    assert reference() is None


def _geometry_programs(model, point, other_point, axis, **inputs) -> set[str]:
    """Run fisher_information, fisher_scan and kl_divergence on `model`; the kinds of the
    programs kept with it."""
    fisher_information(model, point, **inputs)
    fisher_scan(model, point, {axis: [-0.5, 0.0, 0.5]}, progress=False, **inputs)
    kl_divergence(model, point, other_point, **inputs)
    return {signature[0] for signature in compile_cache._PROGRAMS[model]}


def test_geometry_keeps_its_programs_with_the_model_and_releases_them_with_it():
    """Fisher, scan and KL programs are kept with the Problem or ModelSpec they were given:
    dropping it releases the model, the arrays its model_kwargs hold, and the programs."""

    def logistic(x, shift, y=None):  # a local function, so that nothing else holds it
        w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([2]).to_event(1))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Bernoulli(logits=x @ w + shift), obs=y)

    x = np.random.default_rng(0).normal(size=(20, 2))
    shift = np.array(0.3)
    problem = Problem(logistic, {"x": x, "y": (x[:, 0] > 0) * 1.0}, model_kwargs={"shift": shift})
    w = np.array([0.5, -1.0])
    kinds = _geometry_programs(problem, {"w": w}, {"w": w + 0.1}, "w[0]")
    assert kinds == {"fisher", "fisher_scan", "kl"}
    spec = models.fixed_component_mixture()  # quadrature over y: its extent program too
    point = {"pi": 0.5, "mu": 1.0, "sigma": 1.0}
    kinds = _geometry_programs(spec, point, dict(point, mu=1.1), "mu")
    assert kinds == {"fisher", "fisher_scan", "kl", "mixture_extent"}
    references = [weakref.ref(held) for held in (problem, logistic, shift, spec, spec.model)]
    del problem, logistic, shift, spec
    gc.collect()
    assert [reference() for reference in references] == [None] * len(references)


def test_a_mixtures_component_structure_is_read_once_and_released_with_it():
    """`component_structure` is kept with the problem (the reduced coordinates' programs are
    keyed by it, so a fresh one per call would compile them again) and holds no reference to
    the problem."""
    problem = models.gaussian_mixture(3).problem({"y": jnp.array([-1.5, 0.0, 2.5])})
    structure = component_structure(problem)
    assert structure.size == 3 and component_structure(problem) is structure
    reference = weakref.ref(problem)
    del problem
    gc.collect()
    assert reference() is None


def test_programs_are_kept_per_problem_up_to_the_limit():
    problem = _regression_problem()
    builds = []
    for index in range(compile_cache.MAX_PER_PROBLEM + 2):
        program, cached = compile_cache.compiled_for(problem, ("test", index),
                                                     lambda: builds.append(1) or object())
        assert not cached
    again, cached = compile_cache.compiled_for(problem, ("test", 0), object)
    assert not cached  # the oldest was dropped
    last, cached = compile_cache.compiled_for(problem, ("test", compile_cache.MAX_PER_PROBLEM + 1),
                                              object)
    assert cached and last is program
    assert len(compile_cache._PROGRAMS[problem]) == compile_cache.MAX_PER_PROBLEM
    assert compile_cache.compile_count("test") >= compile_cache.MAX_PER_PROBLEM + 3


def test_the_persistent_cache_keeps_a_users_setting_and_can_be_turned_off(monkeypatch, tmp_path):
    before = jax.config.jax_compilation_cache_dir
    try:
        jax.config.update("jax_compilation_cache_dir", str(tmp_path / "mine"))
        assert compile_cache.enable_persistent_cache() == str(tmp_path / "mine")  # kept
        jax.config.update("jax_compilation_cache_dir", None)
        monkeypatch.setenv("SLT_COMPILATION_CACHE", "off")
        assert compile_cache.enable_persistent_cache() is None
        assert not jax.config.jax_compilation_cache_dir
        monkeypatch.setenv("SLT_COMPILATION_CACHE", str(tmp_path / "slt"))
        assert compile_cache.enable_persistent_cache() == str(tmp_path / "slt")
        assert (tmp_path / "slt").is_dir()
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_a_brief_program_compiles_with_the_older_emitters_or_falls_back(monkeypatch):
    """`compile_quickly(brief=True)` gives the program's values; an XLA that refuses the brief
    options (here a made-up one) is asked once, then every brief program compiles quickly."""
    lowered = jax.jit(lambda x: jnp.sin(x) @ x.T).lower(jnp.ones((3, 3)))
    expected = np.sin(np.ones((3, 3))) @ np.ones((3, 3))
    np.testing.assert_allclose(compile_cache.compile_quickly(lowered, brief=True)(
        jnp.ones((3, 3))), expected, rtol=1e-6)
    if jax.default_backend() != "cpu":
        return
    monkeypatch.setattr(compile_cache, "_BRIEF_ACCEPTED", [True])
    monkeypatch.setattr(compile_cache, "BRIEF_COMPILE",
                        compile_cache.QUICK_COMPILE | {"xla_no_such_option_anywhere": True})
    program = compile_cache.compile_quickly(lowered, brief=True)
    np.testing.assert_allclose(program(jnp.ones((3, 3))), expected, rtol=1e-6)
    assert compile_cache._BRIEF_ACCEPTED == [False]


_TRACED_STORE_SCRIPT = """
import json, sys, warnings
import jax, numpy as np
jax.config.update("jax_enable_x64", True)
import slt
from slt import compile_cache
from slt.samplers.nuts import NUTS, sample_nuts

warnings.simplefilter("ignore")
spec = slt.models.gaussian_mixture(2, mean_prior_scale=float(sys.argv[1]))
y = np.concatenate([np.linspace(-3.0, -1.0, 30), np.linspace(1.0, 3.0, 30)])
problem = spec.problem({"y": y})
fit = slt.fit_map(problem, jax.random.key(0), slt.MAPFit(num_restarts=4))
laplace = slt.laplace(problem, fit)
draws = sample_nuts(problem, jax.random.key(1), [1.0],
                    NUTS(num_chains=2, num_warmup=20, num_samples=20), progress=False)
print(json.dumps({
    "values": [float(np.sum(fit.restart_objectives)), float(laplace.free_energy),
               float(np.sum(draws.nll))],
    "store": {what: compile_cache.stored_program_count(what)
              for what in ("loaded", "stored", "unkeyed")}}))
"""


@pytest.mark.heavy  # three fresh processes: about 30 s
def test_a_program_traced_in_one_process_is_loaded_by_the_next(tmp_path):
    """`program_for`'s store: the MAP fit, Laplace's derivatives and NUTS traced and stored by
    one process are loaded by the next (nothing traced again), which computes the same
    numbers; a problem whose prior differs stores programs of its own."""
    import json
    import subprocess
    import sys

    environment = os.environ | {"JAX_COMPILATION_CACHE_DIR": str(tmp_path)}

    def run(scale):
        out = subprocess.run([sys.executable, "-c", _TRACED_STORE_SCRIPT, str(scale)],
                             env=environment, capture_output=True, text=True, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])

    first, second, other = run(10.0), run(10.0), run(5.0)
    assert first["store"]["stored"] >= 5 and first["store"]["unkeyed"] == 0
    assert first["store"]["loaded"] == 0
    assert second["store"] == {"loaded": first["store"]["stored"], "stored": 0, "unkeyed": 0}
    assert second["values"] == first["values"]  # the same programs: bit for bit
    assert other["store"]["stored"] >= 3  # the fit, Laplace, NUTS of another prior
    assert other["values"] != first["values"]
    assert len(list((tmp_path / compile_cache.TRACED_FOLDER).iterdir())) == (
        first["store"]["stored"] + other["store"]["stored"])


def test_a_stored_program_is_loaded_and_a_damaged_one_traced_again(tmp_path):
    """In one process: a program stored for one problem is loaded for an equal problem (the
    same model and data: the same fingerprint), not for a problem of other data; a damaged
    file is traced and stored again. The values are the program's either way."""
    before = jax.config.jax_compilation_cache_dir
    jax.config.update("jax_compilation_cache_dir", str(tmp_path))
    try:
        def value(problem):
            def total(flat, data):
                return jnp.sum(problem.loglik(problem.unravel(flat), data))

            flat = jnp.full(problem.dim, 0.3)
            program = compile_cache.program_for(problem, ("test total",), total, flat,
                                                problem.data, keep=False)
            return float(program(flat, problem.data))

        base = _regression_problem()
        equal, again = _regression_problem(), _regression_problem()
        other = Problem(base.model, {"x": base.data["x"], "y": base.data["y"] + 1.0})
        counts = {what: compile_cache.stored_program_count(what)
                  for what in ("loaded", "stored", "unkeyed")}

        def added(what):
            return compile_cache.stored_program_count(what) - counts[what]

        first = value(base)
        assert added("stored") == 1 and added("loaded") == 0
        assert value(equal) == first and added("loaded") == 1
        assert value(other) != first and added("stored") == 2  # other data: its own program
        for stored in (tmp_path / compile_cache.TRACED_FOLDER).iterdir():
            stored.write_bytes(b"not a program")
        assert value(again) == first and added("stored") == 3
        assert added("loaded") == 1 and added("unkeyed") == 0
    finally:
        jax.config.update("jax_compilation_cache_dir", before)


def test_the_traced_store_is_trimmed_to_its_limit_least_recently_used_first(tmp_path,
                                                                              monkeypatch):
    """Past `MAX_TRACED_BYTES` the store keeps the programs stored or loaded most recently."""
    folder = tmp_path / compile_cache.TRACED_FOLDER
    folder.mkdir()
    for age, name in enumerate(["old", "used", "newer", "newest"]):
        (folder / name).write_bytes(b"x" * 100)
        os.utime(folder / name, (1000.0 + age, 1000.0 + age))
    os.utime(folder / "used", (2000.0, 2000.0))  # loaded since: most recent
    monkeypatch.setattr(compile_cache, "MAX_TRACED_BYTES", 350)
    compile_cache._trim(str(folder))  # 400 bytes: down to 0.75 x 350 = 262, two files
    assert sorted(path.name for path in folder.iterdir()) == ["newest", "used"]
    compile_cache._trim(str(folder))  # within the limit: nothing goes
    assert len(list(folder.iterdir())) == 2
