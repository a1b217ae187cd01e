"""Every result type saves and loads (slt.results); writes are atomic and never overwrite."""

import dataclasses
import warnings

import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pandas as pd
import pytest
from estimators.evidence_cases import conjugate_regression

import slt
from slt import results
from slt.results import atomic_path, load, save

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def produced():
    """One small real instance of every result type."""
    case = conjugate_regression()
    problem, key = case.problem, jax.random.key(0)
    fit = slt.fit_map(problem, key, num_restarts=2, adam_steps=100)
    mixture = slt.models.fixed_component_mixture()
    point = {"pi": 0.5, "mu": 1.0, "sigma": 1.0}
    regression = slt.models.linear_regression(2, noise_scale=0.5)
    data = regression.simulate(key, {"w": jnp.array([1.0, -1.0])}, 50)
    few = {"num_warmup": 50, "num_samples": 50, "progress": False}
    with warnings.catch_warnings():  # runs this short draw R-hat warnings; they are kept in
        warnings.simplefilter("ignore")  # the results (and round-trip with them)
        return _produce(problem, key, fit, mixture, point, regression, data, few)


def _produce(problem, key, fit, mixture, point, regression, data, few):
    return {
        "fit": fit,
        "bic": slt.bic(problem, fit),
        "laplace": slt.laplace(problem, fit),
        "llc": slt.llc(problem, fit.params, key, step_size=1e-3, num_draws=60, num_burnin=20,
                       progress=False),
        "calibration": slt.llc_calibrate(problem, fit.params, key, step_sizes=[1e-4, 1e-3],
                                         num_draws=60, num_burnin=20, progress=False),
        "wbic": slt.wbic(problem, key, num_chains=2, **few),
        "free_energy": slt.free_energy(problem, key, num_particles=100, num_copies=2,
                                       progress=False),
        "rlct": slt.rlct(problem, key, fit=fit, num_chains=2, **few),
        "compare": slt.compare({"a": problem, "b": problem}, key, methods=("bic", "laplace"),
                               progress=False),
        "fisher": slt.fisher_information(mixture, point),
        "scan": slt.fisher_scan(mixture, point, axes={"mu": jnp.linspace(-1, 1, 5)},
                                progress=False),
        "natural_gradient": slt.natural_gradient_fit(regression, data, key, prior=False,
                                                     max_steps=3),
    }


def _assert_same(original, loaded):
    assert type(loaded) is type(original)
    assert repr(loaded) == repr(original)
    if hasattr(original, "summary"):
        pd.testing.assert_frame_equal(loaded.summary(), original.summary())
    for field in dataclasses.fields(original):
        value = getattr(original, field.name)
        if isinstance(value, np.ndarray | jax.Array):
            np.testing.assert_array_equal(np.asarray(getattr(loaded, field.name)),
                                          np.asarray(value))


@pytest.mark.parametrize("name", [
    "fit", "bic", "laplace", "llc", "calibration", "wbic", "free_energy", "rlct", "compare",
    "fisher", "scan", "natural_gradient",
])
def test_every_result_type_round_trips(produced, name, tmp_path):
    original = produced[name]
    path = original.save(tmp_path / f"{name}.nc")
    loaded = type(original).load(path)
    _assert_same(original, loaded)
    _assert_same(original, load(path))
    if hasattr(original, "plot"):
        assert original.plot() is not None and loaded.plot() is not None
        matplotlib.pyplot.close("all")


def test_loading_as_another_class_is_refused(produced, tmp_path):
    path = produced["bic"].save(tmp_path / "bic.nc")
    with pytest.raises((ValueError, TypeError), match="BICResult"):
        slt.LLCResult.load(path)


def test_existing_files_are_kept_unless_overwrite(produced, tmp_path):
    path = tmp_path / "fit.nc"
    path.write_text("keep me")
    with pytest.raises(FileExistsError, match="fit.nc"):
        produced["fit"].save(path)
    assert path.read_text() == "keep me"
    produced["fit"].save(path, overwrite=True)
    assert slt.FitResult.load(path).loglik == produced["fit"].loglik


@pytest.mark.parametrize("error", [ValueError, KeyboardInterrupt])
def test_an_interrupted_write_leaves_no_file_and_no_temporary(tmp_path, error):
    target = tmp_path / "out.txt"
    with pytest.raises(error), atomic_path(target) as temporary:
        temporary.write_text("half")
        raise error()
    assert list(tmp_path.iterdir()) == []
    target.write_text("old")
    with pytest.raises(error), atomic_path(target, overwrite=True) as temporary:
        temporary.write_text("half")
        raise error()
    assert target.read_text() == "old" and list(tmp_path.iterdir()) == [target]


def test_foreign_and_corrupt_files_are_refused_clearly(tmp_path):
    text = tmp_path / "notes.nc"
    text.write_text("not a netcdf file")
    with pytest.raises(ValueError, match="notes.nc"):
        load(text)
    import xarray as xr

    foreign = tmp_path / "foreign.nc"
    xr.Dataset({"a": ("x", np.arange(3))}).to_netcdf(foreign, engine="h5netcdf")
    with pytest.raises(ValueError, match="slt"):
        load(foreign)


def test_unsupported_objects_are_refused_before_writing(tmp_path):
    @dataclasses.dataclass(frozen=True)
    class Odd(results.Persistable):
        thing: object

    path = tmp_path / "odd.nc"
    with pytest.raises(TypeError):
        save(Odd(thing=object()), path)
    assert not path.exists()
