"""The result protocol (slt.results): every result type has summary, plot, to_xarray, save and
load (and to_inference_data where it holds draws) and round-trips exactly; writes are atomic,
refuse to overwrite unless asked, and leave nothing behind when interrupted."""

import dataclasses
import importlib
import json
import math
import re
import warnings
from pathlib import Path

import arviz as az
import h5py
import jax
import jax.numpy as jnp
import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import xarray as xr
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from slt import NUTS, ComparisonPlan, FromDraws, MAPFit, Tempering, models, truth
from slt.estimators.evidence.bic import BICResult
from slt.estimators.evidence.compare import compare
from slt.estimators.evidence.sbic import sbic_gaussian_mixtures
from slt.estimators.local.bif import bif
from slt.estimators.local.calibration import llc_calibrate
from slt.estimators.local.llc import llc
from slt.estimators.local.loss_kernel import loss_kernel
from slt.estimators.local.parts import llc_table
from slt.estimators.local.susceptibilities import DataShifts, susceptibilities
from slt.estimators.local.trajectory import llc_trajectory
from slt.fit import FitResult
from slt.fit.natural_gradient import NaturalGradientOptions, natural_gradient_fit
from slt.geometry.fisher import FisherRequest, fisher_information
from slt.geometry.matrix_free import fisher_spectrum
from slt.geometry.scan import fisher_scan
from slt.geometry.slices import MatrixFree, fisher_slice
from slt.geometry.stochastic_trace import fisher_summary
from slt.results import (
    FORMAT_VERSION,
    MANIFEST_CHECKSUM,
    MOVED_MODULES,
    RENAMED_FIELDS,
    Persistable,
    _checksum,
    atomic_path,
    atomic_write,
    load,
    save,
)
from slt.samplers.config import SGLD, Calibration, RunPlan
from slt.samplers.importance import ImportanceRun

matplotlib.use("Agg")
DEMO = Path(__file__).resolve().parents[1] / "docs" / "demo"  # `slt demo`'s saved outputs

@pytest.fixture(scope="module")
def results():
    """One small, real instance of every result type, keyed by class name.

    One `compare` run (d = 2 regression, n = 50, every method, a short tempered path through
    three temperatures) yields the fit, BIC, Laplace, WBIC, free energy, RLCT and comparison
    results. The loss kernel, BIF and susceptibilities observe a few examples along two short
    chains each, without the MALA diagnostics (mala_every=0: a smaller program to compile).
    The Lanczos spectrum (two steps), the matrix-free Fisher slice ("FisherScan.exact"), the
    stochastic Fisher summary (two probes of two steps) and the natural-gradient fit (three
    steps) reuse the regression and its fit.
    """
    spec = models.linear_regression(2, noise_scale=0.5, prior_precision=2.0)
    problem = spec.problem(spec.simulate(jax.random.key(1), {"w": jnp.array([1.0, -0.5])}, 50))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: R-hat and Pareto-k warnings
        comparison = compare(
            {"d=2": problem}, jax.random.key(0),
            methods=("bic", "laplace", "rlct", "wbic", "loo", "free_energy"),
            plan=ComparisonPlan(
                fit=MAPFit(num_restarts=2, adam_steps=100, lbfgs_steps=50),
                multipliers=(0.5, 1, 2), free_energy=Tempering(num_particles=32, num_copies=2),
                # the fast path's F (its DrawsRun saved and loaded like every result's run),
                # short chains beside lambda_hat's temperatures; its se check fails (no more
                # draws, more_draws=1) and falls back to the short tempered path above, whose
                # one run F, WBIC and lambda_hat share
                draws=FromDraws(nuts=NUTS(num_chains=2, num_warmup=100, num_samples=200),
                                num_samples=1000, more_draws=1),
            ),
            progress=False,
        )
        fit = comparison.results["d=2"]["fit"]
        plan = RunPlan(num_chains=2, num_samples=20, num_warmup=10, progress=False)
        short = {"sampler": SGLD(step_size=1e-4), "plan": plan}
        local = llc(problem, fit.params, jax.random.key(2), **short)
        sweep = Calibration(num_samples=20, num_warmup=10, chains_per_candidate=1)
        calibration = llc_calibrate(problem, fit.params, jax.random.key(3),
                                    sampler=SGLD(step_size=sweep), progress=False)
        # one part, one checkpoint a run: the chunk program `local` compiled serves both
        table = llc_table(problem, fit.params, jax.random.key(9),
                          parts={"w1": {"w": np.array([True, False])}}, **short)
        trajectory = llc_trajectory(problem, {0: problem.init(jax.random.key(10)),
                                              100: fit.params},
                                    jax.random.key(11), sampler=short["sampler"],
                                    plan=dataclasses.replace(plan, max_chains=plan.num_chains))
        by_part = llc_trajectory(problem, [fit.params], jax.random.key(15),
                                 {"w1": {"w": np.array([True, False])},
                                  "w2": {"w": np.array([False, True])}}, **short)
        observing = {"sampler": SGLD(step_size=1e-4, mala_every=0), "plan": plan}
        kernel = loss_kernel(problem, fit.params, jax.random.key(12), np.arange(3), **observing)
        influence = bif(problem, fit.params, jax.random.key(13), np.array([0, 1]),
                        train=np.arange(4), **observing)
        response = susceptibilities(problem, fit.params, jax.random.key(14),
                                    DataShifts({"S": np.arange(5)}, reference=np.arange(10)),
                                    components={"w1": {"w": np.array([True, False])}},
                                    **observing)
    mixture = models.fixed_component_mixture()
    base = {"pi": 0.5, "mu": 1.0, "sigma": 1.0}
    found = [
        *comparison.results["d=2"].values(), comparison, local, calibration, table, trajectory,
        by_part, kernel, influence, response,
        fisher_information(mixture, base),
        fisher_information(mixture, base, key=jax.random.key(4),
                           request=FisherRequest(kind="monte_carlo", num_draws=64)),
        fisher_scan(mixture, base, {"pi": [0.25, 0.75], "mu": [-1.0, 0.0, 1.0]},
                    progress=False),
        sbic_gaussian_mixtures(np.array([-500.0, -480.0, -478.0]), 300),
        fisher_spectrum(problem, fit.values, key=jax.random.key(5), num_steps=2),
        fisher_slice(problem, fit.values, {"s": (np.array([1.0, -1.0]), [-0.5, 0.0, 0.5])},
                     key=jax.random.key(7), method=MatrixFree(num_steps=2), progress=False),
        fisher_summary(problem, fit.values, key=jax.random.key(8), num_probes=2, num_steps=2),
        natural_gradient_fit(problem, key=jax.random.key(6), init=fit.params, max_steps=3,
                             options=NaturalGradientOptions(prior=False)),
    ]
    by_name = {}
    for result in found:
        if dataclasses.is_dataclass(result):
            name = type(result).__name__
            by_name[name if name not in by_name else f"{name}.{result.kind}"] = result
    return by_name


EXPECTED = [
    "FitResult", "BICResult", "LaplaceResult", "RLCTResult", "WBICResult", "FreeEnergyResult",
    "ComparisonResult", "LLCResult", "CalibrationResult", "LLCTable", "LLCTrajectory",
    "PartsTrajectory", "LossKernelResult", "BIFResult", "SusceptibilityResult",
    "FisherResult",
    "FisherResult.monte_carlo", "FisherScan", "FisherScan.exact", "SBICResult",
    "LanczosSpectrum", "FisherSummary",
    "NaturalGradientResult",
]
# The result types that hold posterior draws; they alone convert to ArviZ InferenceData.
# FreeEnergyResult keeps its SMC particles as flat unconstrained vectors without site names
# (nested runs: weighted points), and the other types hold no draws at all.
HOLD_DRAWS = {"LLCResult", "WBICResult", "RLCTResult"}


def assert_same(a, b, path="result"):
    """a and b are equal in type and content, recursively; arrays exactly, NaN equal to NaN."""
    assert type(a) is type(b), f"{path}: {type(a)} != {type(b)}"
    if dataclasses.is_dataclass(a):
        for field in dataclasses.fields(a):
            assert_same(getattr(a, field.name), getattr(b, field.name), f"{path}.{field.name}")
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert list(a) == list(b), path
        for key in a:
            assert_same(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, pd.DataFrame):
        pd.testing.assert_frame_equal(a, b, check_exact=True)
    elif isinstance(a, az.ELPDData):
        assert list(a.index) == list(b.index) and a.dtype == b.dtype, path
        for key in a.index:
            assert_same(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, (xr.Dataset, xr.DataArray)):
        xr.testing.assert_identical(a, b)
    elif isinstance(a, az.InferenceData):
        assert a.groups() == b.groups(), path
        for group in a.groups():
            xr.testing.assert_identical(a[group], b[group])
    elif isinstance(a, (np.ndarray, jax.Array)):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=path)
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


@pytest.mark.heavy
def test_every_result_type_is_covered(results):
    assert sorted(results) == sorted(EXPECTED)
    defined = {cls.__name__ for cls in Persistable.__subclasses__()
               if cls.__module__.startswith("slt.")}
    assert defined == {name.split(".")[0] for name in EXPECTED}


@pytest.mark.parametrize("name", EXPECTED)
def test_round_trip_is_exact(results, name, tmp_path):
    """Every result type follows the whole protocol, and its views survive save / load."""
    result = results[name]
    for method in ("summary", "plot", "to_xarray", "save", "load"):
        assert callable(getattr(result, method, None)), f"{name} has no {method}()"
    summary = result.summary()
    assert isinstance(summary, pd.DataFrame) and not summary.empty
    dataset = result.to_xarray()
    assert isinstance(dataset, xr.Dataset) and dataset.data_vars
    converts = callable(getattr(result, "to_inference_data", None))
    assert converts == (name in HOLD_DRAWS), f"{name}: to_inference_data is {converts}"

    path = result.save(tmp_path / "result.nc")
    again = type(result).load(path)
    assert_same(result, again)
    assert repr(again) == repr(result)
    pd.testing.assert_frame_equal(again.summary(), summary, check_exact=True)
    xr.testing.assert_identical(again.to_xarray(), dataset)
    if converts:
        draws, draws_again = result.to_inference_data(), again.to_inference_data()
        assert isinstance(draws, az.InferenceData) and "sample_stats" in draws.groups()
        assert draws_again.groups() == draws.groups()
        for group in draws.groups():  # values and coordinates (ArviZ stamps created_at)
            xr.testing.assert_equal(draws_again[group], draws[group])
    figure = again.plot()
    assert isinstance(figure, (Figure, Axes))
    plt.close("all")
    assert_same(load(path), result)  # the generic reader finds the class itself
    assert_same(load(again.save(tmp_path / "again.nc")), result)  # a loaded result saves again
    (tmp_path / "again.nc").unlink()
    assert [p.name for p in tmp_path.iterdir()] == ["result.nc"]  # no temporary left


def test_views_hold_the_results_numbers(results):
    """Spot checks that each view reads the result it comes from, along the documented dims."""
    fit = results["FitResult"]
    view = fit.to_xarray()
    assert float(view["restart_objective"].max()) == pytest.approx(fit.best, abs=1e-9)
    np.testing.assert_array_equal(view["w"].values, fit.values["w"])
    assert view["w"].dims == ("w_dim_0",) and view.attrs["num_agree"] == fit.num_agree

    rlct = results["RLCTResult"]
    view = rlct.to_xarray()
    np.testing.assert_array_equal(view["beta"].values, rlct.betas)
    np.testing.assert_array_equal(view["expected_nll"].values, rlct.expected_nll)
    assert view.attrs["rlct"] == rlct.rlct and view.attrs["multiplicity"] == rlct.multiplicity
    nll = rlct.to_inference_data().sample_stats["nll"]
    assert nll.dims == ("chain", "draw", "beta")
    for index, wbic in enumerate(rlct.wbic_results):
        np.testing.assert_array_equal(nll.isel(beta=index).values, wbic.nll)
    np.testing.assert_allclose(nll.mean(("chain", "draw")).values, rlct.expected_nll,
                               rtol=1e-12)

    comparison = results["ComparisonResult"]
    view = comparison.to_xarray()
    assert list(view["model"].values) == ["d=2"]
    assert float(view["bic"].sel(model="d=2")) == comparison.table.loc["d=2", "bic"]
    assert {str(c): str(view["choice"].sel(criterion=c).values) for c in view["criterion"].values
            } == comparison.choices
    assert set(view["step"].values) == set(comparison.timings.columns)

    calibration = results["CalibrationResult"]
    summary = calibration.summary()
    assert len(summary) == len(calibration.table) and summary["chosen"].sum() == 1
    # the fitted step lies between candidates: "chosen" marks the nearest one
    distance = np.abs(np.log(calibration.table["step_size"] / calibration.step_size))
    assert summary.loc[summary["chosen"], "step_size"].item() == calibration.table.loc[
        distance.idxmin(), "step_size"]
    view = calibration.to_xarray()
    assert view.sizes["candidate"] == len(calibration.table)
    assert view.attrs["step_size"] == calibration.step_size
    assert view.attrs["interval"] == list(calibration.interval)

    spectrum = results["LanczosSpectrum"]
    np.testing.assert_array_equal(spectrum.to_xarray()["ritz_value"].values,
                                  spectrum.ritz_values)
    natural = results["NaturalGradientResult"]
    view = natural.to_xarray()
    assert view.sizes["step"] == len(natural.history) and view.attrs["solver"] == natural.solver


def test_shared_results_stay_shared(results, tmp_path):
    """compare reads WBIC and lambda from the path run that gives F: the run is stored once
    and shared again."""
    again = load(results["ComparisonResult"].save(tmp_path / "c.nc"))
    assert again.results["d=2"]["free_energy"].run is not None
    assert again.results["d=2"]["rlct"].sampler == "smc"


def test_named_tuples_fractions_and_jax_arrays_round_trip(results, tmp_path):
    fit = dataclasses.replace(
        results["FitResult"],
        values={"rlct": truth.regular_rlct(3), "flags": np.array([True, False]),
                "labels": np.array(["a", "bc"]), "n": np.int32(7), "empty": np.zeros((0, 2))},
    )
    again = FitResult.load(save(fit, tmp_path / "fit.nc"))
    assert_same(fit, again)
    assert isinstance(again.params["w"], jax.Array)


def test_existing_file_is_refused_unless_overwrite(results, tmp_path):
    path = tmp_path / "bic.nc"
    results["BICResult"].save(path)
    before = path.read_bytes()
    with pytest.raises(FileExistsError, match=r"bic\.nc.*overwrite=True.*--force"):
        results["LaplaceResult"].save(path)
    assert path.read_bytes() == before
    results["LaplaceResult"].save(path, overwrite=True)
    assert type(load(path)).__name__ == "LaplaceResult"
    assert [p.name for p in tmp_path.iterdir()] == ["bic.nc"]


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("overwrite", [False, True])
def test_failed_write_leaves_no_file_and_no_temporary(tmp_path, error, overwrite):
    def write_half_then_fail(tmp):
        tmp.write_text("half")
        raise error("interrupted")

    with pytest.raises(error, match="interrupted"):
        atomic_write(tmp_path / "out.txt", write_half_then_fail, overwrite=overwrite)
    assert list(tmp_path.iterdir()) == []


def test_failed_overwrite_keeps_the_old_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("old")
    with pytest.raises(KeyboardInterrupt), atomic_path(path, overwrite=True) as tmp:
        tmp.mkdir()  # a writer that made a directory, and a file in it, before failing
        (tmp / "partial").write_text("half")
        raise KeyboardInterrupt
    assert path.read_text() == "old" and list(tmp_path.iterdir()) == [path]


def test_atomic_path_moves_into_place_keeping_the_suffix(tmp_path):
    with atomic_path(tmp_path / "table.csv") as tmp:
        assert tmp.parent == tmp_path and tmp.suffix == ".csv" and not tmp.exists()
        pd.DataFrame({"a": [1]}).to_csv(tmp)
    assert pd.read_csv(tmp_path / "table.csv")["a"].tolist() == [1]
    with pytest.raises(RuntimeError, match="nothing was written"), atomic_path(tmp_path / "x"):
        pass
    with pytest.raises(FileNotFoundError, match="does not exist"):
        atomic_write(tmp_path / "missing" / "x", lambda tmp: None)
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_interrupted_save_leaves_nothing(results, tmp_path, monkeypatch):
    """KeyboardInterrupt after the root group is written, while the subgroups are."""
    to_netcdf = xr.Dataset.to_netcdf

    def interrupt_on_groups(self, *args, **kwargs):
        if kwargs.get("group"):
            raise KeyboardInterrupt
        return to_netcdf(self, *args, **kwargs)

    monkeypatch.setattr(xr.Dataset, "to_netcdf", interrupt_on_groups)
    with pytest.raises(KeyboardInterrupt):
        results["WBICResult"].save(tmp_path / "wbic.nc")
    assert list(tmp_path.iterdir()) == []


def test_unsupported_field_is_refused_before_writing(results, tmp_path):
    bad = dataclasses.replace(results["BICResult"], objective=object())
    with pytest.raises(TypeError, match="cannot save objective: objects of type builtins.object"):
        bad.save(tmp_path / "bad.nc")
    with pytest.raises(TypeError, match="dict keys must be str"):
        dataclasses.replace(results["FitResult"], values={1: 2.0}).save(tmp_path / "bad.nc")
    with pytest.raises(TypeError, match="result dataclass instance"):
        save({"a": 1}, tmp_path / "bad.nc")
    assert list(tmp_path.iterdir()) == []


def _rewrite_root(source, target, **changes):
    """Copy the root group of a saved file, with attributes or the manifest changed."""
    with xr.open_dataset(source, engine="h5netcdf") as root:
        root = root.load()
    manifest = changes.pop("manifest", None)
    if manifest is not None:  # as slt would have written it: with the manifest's checksum
        root["slt_manifest"] = xr.Variable((), manifest)
        root.attrs[MANIFEST_CHECKSUM] = _checksum(manifest)
    root.attrs.update(changes)
    root.to_netcdf(target, engine="h5netcdf")
    return target


def test_foreign_corrupt_and_newer_files_are_refused_clearly(results, tmp_path):
    with pytest.raises(FileNotFoundError, match="no result file"):
        load(tmp_path / "absent.nc")
    garbage = tmp_path / "garbage.nc"
    garbage.write_bytes(b"\x89HDF\r\n not really")
    with pytest.raises(ValueError, match="not an slt result file: it cannot be read as NetCDF"):
        load(garbage)
    xr.Dataset({"x": ("i", [1.0])}).to_netcdf(tmp_path / "foreign.nc", engine="h5netcdf")
    with pytest.raises(ValueError, match="NetCDF file but not an slt result file"):
        load(tmp_path / "foreign.nc")

    saved = results["BICResult"].save(tmp_path / "bic.nc")
    newer = _rewrite_root(saved, tmp_path / "newer.nc", slt_format_version=FORMAT_VERSION + 1)
    with pytest.raises(ValueError, match=f"format version {FORMAT_VERSION + 1}.*upgrade slt"):
        load(newer)
    with pytest.raises(TypeError, match="holds a BICResult, not a FitResult"):
        FitResult.load(saved)
    manifest = str(xr.open_dataset(saved, engine="h5netcdf")["slt_manifest"].values.item())
    outside = _rewrite_root(saved, tmp_path / "outside.nc", manifest=manifest.replace(
        "slt.estimators.evidence.bic:BICResult", "subprocess:Popen"))
    with pytest.raises(ValueError, match="'subprocess:Popen', which is not part of slt"):
        load(outside)
    renamed = _rewrite_root(saved, tmp_path / "renamed.nc", manifest=manifest.replace(
        '"penalty"', '"penalty_term"'))
    with pytest.raises(ValueError, match="cannot rebuild slt.estimators.evidence.bic:BICResult"):
        BICResult.load(renamed)
    truncated = _rewrite_root(saved, tmp_path / "truncated.nc", manifest=manifest[:40])
    with pytest.raises(ValueError, match="damaged"):
        load(truncated)


def test_arrays_are_packed_into_one_variable_per_dtype(results, tmp_path):
    """A (checkpoint x part) trajectory holds six arrays per (checkpoint, part), hundreds in
    a real one; the file holds one variable per dtype (NetCDF's cost grows with its
    variables: slt.results), and each array comes back from its slice with its dtype and
    shape."""
    result = results["PartsTrajectory"]
    saved = result.save(tmp_path / "parts.nc")
    with xr.open_dataset(saved, engine="h5netcdf") as root:
        names = set(root.variables)
        arrays = str(root["slt_manifest"].values.item()).count('"type": "array"')
    assert arrays >= 12 and len(names) <= 4, (arrays, names)
    assert {"slt_manifest", "slt_buffer.float64"} <= names
    assert_same(load(saved), result, "PartsTrajectory")


def _overwrite_bytes(path, variable):
    """Flip 8 bytes of `variable`'s stored values ("group/name" in a subgroup), leaving
    HDF5's headers intact: damage that HDF5 itself does not detect."""
    with h5py.File(path, "r") as file:
        offset = file[variable].id.get_offset()
    with open(path, "r+b") as handle:
        handle.seek(offset)
        damaged = bytes(byte ^ 0xFF for byte in handle.read(8))
        handle.seek(offset)
        handle.write(damaged)


@pytest.mark.parametrize("name,variable", [("LLCResult", "slt_buffer.float64"),
                                           ("FisherScan", "dataset/loss")])
def test_overwritten_array_bytes_are_refused_on_load(results, tmp_path, name, variable):
    saved = results[name].save(tmp_path / "result.nc")
    _overwrite_bytes(saved, variable)
    with pytest.raises(ValueError, match="damaged.*does not match the checksum"):
        load(saved)


def _with_old_field_names(source, target, version=FORMAT_VERSION - 1, *, old_modules=False):
    """Rewrite a saved file as format version `version` wrote it: that version number and, in
    the manifest, the field names from before the renames of every later version
    (RENAMED_FIELDS, undone newest first). Returns the classes whose fields were renamed.

    With `old_modules`, the classes are also named by their modules before the moves of
    MOVED_MODULES, as a file written before the moves names them."""
    later = [RENAMED_FIELDS[v] for v in sorted(RENAMED_FIELDS, reverse=True) if v > version]
    renamed = set()
    old_module = {new: old for old, new in MOVED_MODULES.items()} if old_modules else {}

    def old_name(name):
        module, colon, qualname = name.partition(":")
        return f"{old_module.get(module, module)}{colon}{qualname}"

    def walk(node):
        if isinstance(node, list):
            return [walk(item) for item in node]
        if not isinstance(node, dict):
            return node
        node = {key: walk(value) for key, value in node.items()}
        for renames in later:
            old_names = {new: old for old, new in renames.get(node.get("class"), {}).items()}
            if node.get("type") in ("dataclass", "namedtuple") and old_names:
                renamed.add(node["class"])
                node["fields"] = {old_names.get(key, key): value
                                  for key, value in node["fields"].items()}
        if isinstance(node.get("class"), str):
            node["class"] = old_name(node["class"])
        node.pop("crc32", None)  # files of earlier versions carry no checksums
        return node

    def groups(node):
        if isinstance(node, list):
            return [name for item in node for name in groups(item)]
        if not isinstance(node, dict):
            return []
        own = [node["group"]] if isinstance(node.get("group"), str) else []
        return own + [name for value in node.values() for name in groups(value)]

    with xr.open_dataset(source, engine="h5netcdf") as root:
        root = root.load()
    manifest = json.loads(str(root["slt_manifest"].values.item()))
    root["slt_manifest"] = xr.Variable((), json.dumps(walk(manifest)))
    root.attrs["slt_format_version"] = version
    root.attrs["slt_class"] = old_name(root.attrs["slt_class"])
    del root.attrs[MANIFEST_CHECKSUM]
    root.to_netcdf(target, engine="h5netcdf")
    for group in groups(manifest):
        with xr.open_dataset(source, engine="h5netcdf", group=group) as dataset:
            dataset.load().to_netcdf(target, engine="h5netcdf", mode="a", group=group)
    return renamed


@pytest.mark.parametrize("version", sorted(v - 1 for v in RENAMED_FIELDS))
def test_files_of_earlier_versions_load_with_their_old_field_names(results, tmp_path, version):
    """A file written before the vocabulary renames (format version 1: llc_std_error,
    num_burnin, num_params, compile_seconds, ...; version 2: FisherResult's standard_error
    and num_samples) loads as the result saved, under the new names; every renamed class is
    exercised."""
    importance = ImportanceRun(log_evidence=-10.0, std_error=0.1, pareto_k=0.3, ess=500.0,
                               num_samples=1000, num_permutations=1, num_components=3,
                               run_time=0.5)
    found = {**results, "importance": dataclasses.replace(results["FreeEnergyResult"],
                                                          importance_run=importance)}
    renamed = set()
    for name, result in found.items():
        saved = result.save(tmp_path / f"{name}.nc")
        renamed |= _with_old_field_names(saved, tmp_path / f"{name}.old.nc", version)
        assert_same(load(tmp_path / f"{name}.old.nc"), result, name)
    assert renamed == {name for v in RENAMED_FIELDS if v > version for name in RENAMED_FIELDS[v]}
    if version == 1:
        manifest = str(xr.open_dataset(tmp_path / "LLCResult.old.nc",
                                       engine="h5netcdf")["slt_manifest"].values.item())
        assert '"llc_std_error"' in manifest and '"num_burnin"' in manifest


# the current version with the old modules: with the slow suite (make test's 10 minutes)
@pytest.mark.parametrize("version", [1, pytest.param(FORMAT_VERSION, marks=pytest.mark.slow)])
def test_files_naming_the_modules_before_a_move_load(results, tmp_path, version):
    """slt/fit.py and slt/natural_gradient.py became the package slt.fit (slt.fit.map,
    slt.fit.natural_gradient), and slt/truth.py the package slt.truth (issue 34): a file
    written before names its classes by the old modules (slt.natural_gradient:..., whose
    module is gone) and loads as the result saved, with the field names of its version."""
    old_names = set()
    for name, result in results.items():
        saved = result.save(tmp_path / f"{name}.nc")
        _with_old_field_names(saved, tmp_path / f"{name}.old.nc", version, old_modules=True)
        with xr.open_dataset(tmp_path / f"{name}.old.nc", engine="h5netcdf") as root:
            recorded = str(root.attrs["slt_class"])
            manifest = str(root["slt_manifest"].values.item())
        old_names |= {recorded, *re.findall(r'"class": "([^"]+)"', manifest)}
        assert_same(load(tmp_path / f"{name}.old.nc"), result, name)
    assert {"slt.natural_gradient:NaturalGradientResult", "slt.fit:FitResult"} <= old_names
    assert not any(name.startswith(("slt.fit.", "slt.truth.")) for name in old_names)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("slt.natural_gradient")
    assert load(DEMO / "evidence_comparison.nc").results  # slt/cli/demo.py's, names slt.fit


def test_a_fisher_result_saved_with_standard_error_loads_as_std_error(results, tmp_path):
    """FisherResult.standard_error and num_samples became std_error and num_draws (format
    version 3): a file of version 2 with the old names loads under the new ones, and the
    old names still read the new fields, with a DeprecationWarning."""
    fisher = results["FisherResult.monte_carlo"]
    saved = fisher.save(tmp_path / "fisher.nc")
    _with_old_field_names(saved, tmp_path / "fisher.old.nc", 2)
    manifest = str(xr.open_dataset(tmp_path / "fisher.old.nc",
                                   engine="h5netcdf")["slt_manifest"].values.item())
    assert '"standard_error": ' in manifest and '"num_samples": ' in manifest
    assert '"std_error": ' not in manifest and '"num_draws": ' not in manifest  # field names
    loaded = load(tmp_path / "fisher.old.nc")
    np.testing.assert_array_equal(loaded.std_error, fisher.std_error)
    assert loaded.num_draws == fisher.num_draws == 64
    with pytest.warns(DeprecationWarning, match="use std_error"):
        np.testing.assert_array_equal(loaded.standard_error, fisher.std_error)
    with pytest.warns(DeprecationWarning, match="use num_draws"):
        assert loaded.num_samples == 64
