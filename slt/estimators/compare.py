"""Compare model classes by free energy: BIC, Laplace, WBIC, a reference F, lambda_hat, PSIS-LOO.

`compare({name: problem}, key)` fits every model (MAP, `slt.fit_map`) and runs the requested
estimators on it; the result's table has one row per model and the choice of every criterion
(the lowest free energy; the highest elpd for PSIS-LOO). All free energies are on the seeds'
scale F = -log Z ≈ n L_n(w0) + lambda log n, so the columns are directly comparable:

    bic            n L_n(ŵ) + (d/2) log n            (ŵ the MAP: the MLE may not exist)
    laplace        -log Z_Laplace                     (flagged when singular)
    wbic           E_beta[n L_n], beta = 1/log n      (± se)
    free_energy    the reference F, tempered SMC      (± se)
    singular_bic   n L_n(ŵ) + lambda_hat log n        (± se), lambda_hat from temperatures
    elpd_loo       PSIS-LOO (ArviZ) on posterior draws: a predictive check, not a free energy

Label switching: for mixtures, WBIC, the reference F and lambda_hat average n L_n, which is
invariant under relabelling, so chains or particles sitting in different label modes do not
corrupt them; Laplace counts one mode (pass `laplace_options={"num_modes": ...}` to count K!).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field

import arviz as az
import jax
import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from slt.estimators.bic import bic
from slt.estimators.free_energy import free_energy
from slt.estimators.laplace import laplace
from slt.estimators.rlct import rlct
from slt.estimators.wbic import draws_inference_data, tempered_draws, wbic
from slt.fit import fit_map
from slt.problem import Problem
from slt.results import Persistable
from slt.samplers.nuts import pointwise_loglik_of_draws
from slt.validation import InputError, require_instance, require_key, require_problem

__all__ = ["ComparisonResult", "compare", "METHODS"]

METHODS = ("bic", "laplace", "wbic", "free_energy", "rlct", "loo")
# criterion -> (table column, whether lower is better)
CRITERIA = {
    "bic": ("bic", True),
    "laplace": ("laplace", True),
    "wbic": ("wbic", True),
    "free_energy": ("free_energy", True),
    "rlct": ("singular_bic", True),
    "loo": ("elpd_loo", False),
}


@dataclass(frozen=True)
class ComparisonResult(Persistable):
    """One row per model, the choice of every criterion, and every estimator's full result.

    Attributes:
      table: pandas DataFrame indexed by model name with columns d, n, nll_hat (n L_n(ŵ) at the
        MAP) and, per method run, its estimate(s) (see the module docstring).
      choices: criterion -> the model it selects.
      results: model -> method -> the estimator's result object (FitResult under "fit").
      methods: the methods run.
      warnings: "model: message" for every diagnostic an estimator raised.
    """

    table: pd.DataFrame
    choices: dict[str, str]
    results: dict[str, dict[str, object]] = field(repr=False)
    methods: tuple[str, ...]
    warnings: tuple[str, ...] = ()

    def summary(self) -> pd.DataFrame:
        """The comparison table."""
        return self.table

    def plot(self, **kwargs):
        """Free energy per model and method with ±2 se error bars (and PSIS-LOO if run)."""
        from slt.plots.evidence import plot_comparison

        return plot_comparison(self, **kwargs)

    def __repr__(self) -> str:
        choices = ", ".join(f"{criterion}: {name}" for criterion, name in self.choices.items())
        with pd.option_context("display.width", 160, "display.max_columns", 30):
            table = self.table.to_string(float_format=lambda v: f"{v:.4g}")
        flags = f"\n{len(self.warnings)} diagnostic warning(s): see .warnings" * bool(self.warnings)
        return f"ComparisonResult(choices: {choices})\n{table}{flags}"


def compare(
    problems: Mapping[str, Problem],
    key: jax.Array,
    *,
    methods=METHODS,
    fit_options: Mapping | None = None,
    laplace_options: Mapping | None = None,
    wbic_options: Mapping | None = None,
    free_energy_options: Mapping | None = None,
    rlct_options: Mapping | None = None,
    loo_options: Mapping | None = None,
    progress: bool = True,
) -> ComparisonResult:
    """Run every estimator in `methods` on every model and tabulate the free energies.

    Args:
      problems: {name: Problem}; the models must describe the same data for the comparison
        to mean anything.
      key: PRNG key; model i uses `fold_in(key, i)`.
      methods: one or several of "bic", "laplace", "wbic", "free_energy", "rlct", "loo". With
        both "wbic" and "rlct", the WBIC is the rlct run at beta = 1/log n (one sampler run
        fewer) unless `wbic_options` are given.
      fit_options: for `slt.fit_map` (MAP, shared by bic, laplace and rlct).
      laplace_options, wbic_options, free_energy_options, rlct_options: for those estimators.
      loo_options: for the posterior NUTS run of PSIS-LOO (`num_chains`, `num_warmup`,
        `num_samples`, and NUTS settings).
      progress: show a progress bar over models and methods.

    Returns:
      A `ComparisonResult`.

    Raises:
      InputError (a ValueError, `slt.validation`): problems not a dict of Problems, problems
        with different numbers of examples n, key not a PRNG key, and what the estimators
        reject in their options.
      ValueError: no problems, or an unknown method (the message lists them).

    Example:
      >>> problems = {f"K={k}": slt.models.gaussian_mixture(k).problem(data) for k in (1, 2, 3)}
      >>> result = slt.compare(problems, jax.random.key(0))
      >>> result.table, result.choices
      >>> result.plot()
    """
    methods = (methods,) if isinstance(methods, str) else tuple(methods)
    unknown = set(methods) - set(METHODS)
    if unknown:
        raise ValueError(f"unknown method(s) {sorted(unknown)}; available: {', '.join(METHODS)}")
    require_instance("problems", problems, Mapping, "a dict {name: Problem}")
    if not problems:
        raise ValueError("problems is empty: give {name: Problem}")
    for name, problem in problems.items():
        require_problem(problem, f"problems[{name!r}]")
    sizes = {name: problem.n for name, problem in problems.items()}
    if len(set(sizes.values())) > 1:
        raise InputError(
            f"the models must describe the same data, but their numbers of examples differ: "
            f"{sizes}; free energies of different data sets are not comparable"
        )
    require_key(key)
    options = {
        "fit": dict(fit_options or {}), "laplace": dict(laplace_options or {}),
        "wbic": dict(wbic_options or {}), "free_energy": dict(free_energy_options or {}),
        "rlct": dict(rlct_options or {}), "loo": dict(loo_options or {}), "bic": {},
    }
    rows, results, messages = {}, {}, []
    steps = [(name, method) for name in problems for method in ("fit", *methods)]
    with tqdm(total=len(steps), desc="compare", disable=not progress) as bar:
        for index, (name, problem) in enumerate(problems.items()):
            model_key = jax.random.fold_in(key, index)
            results[name], row = {}, {"d": problem.dim, "n": problem.n}
            for step, method in enumerate(("fit", *_ordered(methods))):
                bar.set_description(f"compare: {name} {method}")
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    result = _RUNNERS[method](
                        problem, jax.random.fold_in(model_key, step), results[name],
                        options[method],
                    )
                messages += [f"{name}: {w.message}" for w in caught]
                results[name][method] = result
                row.update(_COLUMNS[method](result))
                bar.update(1)
            rows[name] = row
    table = pd.DataFrame.from_dict(rows, orient="index")
    table = table[[column for column in _COLUMN_ORDER if column in table.columns]]
    choices = {
        criterion: _choose(table[column], lower)
        for criterion, (column, lower) in CRITERIA.items()
        if criterion in methods
    }
    if messages:
        warnings.warn(
            f"{len(messages)} diagnostic warning(s) during the comparison; see "
            f"result.warnings", stacklevel=2,
        )
    return ComparisonResult(
        table=table, choices=choices, results=results, methods=methods, warnings=tuple(messages)
    )


def _ordered(methods):
    """rlct before wbic, so that WBIC can reuse the rlct run at beta = 1/log n."""
    return sorted(methods, key=lambda m: (m != "rlct", METHODS.index(m)))


def _choose(column: pd.Series, lower: bool) -> str:
    finite = column[np.isfinite(column.astype(float))]
    if finite.empty:
        return ""
    return str(finite.idxmin() if lower else finite.idxmax())


def _run_fit(problem, key, done, options):
    return fit_map(problem, key, **options)


def _run_bic(problem, key, done, options):
    return bic(problem, done["fit"], **options)


def _run_laplace(problem, key, done, options):
    return laplace(problem, done["fit"], **options)


def _run_wbic(problem, key, done, options):
    reused = done["rlct"].wbic() if "rlct" in done and not options else None
    return reused or wbic(problem, key, progress=False, **options)


def _run_free_energy(problem, key, done, options):
    return free_energy(problem, key, progress=False, **options)


def _run_rlct(problem, key, done, options):
    return rlct(problem, key, fit=done["fit"], progress=False, **options)


def _run_loo(problem, key, done, options):
    """PSIS-LOO (ArviZ) from NUTS draws of the posterior (beta = 1)."""
    options = dict(options)
    num_chains = int(options.pop("num_chains", 4))
    draws = tempered_draws(problem, key, np.ones(num_chains), progress=False, **options)
    pointwise = np.asarray(pointwise_loglik_of_draws(problem, draws.positions))
    name = "_".join(problem.observed_site_names) or "y"
    data = draws_inference_data(problem, draws, log_likelihood={name: pointwise})
    return az.loo(data, pointwise=True)


_RUNNERS = {
    "fit": _run_fit, "bic": _run_bic, "laplace": _run_laplace, "wbic": _run_wbic,
    "free_energy": _run_free_energy, "rlct": _run_rlct, "loo": _run_loo,
}

_COLUMN_ORDER = (
    "d", "n", "nll_hat", "bic", "laplace", "laplace_singular", "wbic", "wbic_se",
    "free_energy", "free_energy_se", "rlct", "rlct_se", "singular_bic", "singular_bic_se",
    "elpd_loo", "elpd_loo_se",
)

_COLUMNS = {
    "fit": lambda r: {"nll_hat": -r.loglik},
    "bic": lambda r: {"bic": r.free_energy},
    "laplace": lambda r: {"laplace": r.free_energy, "laplace_singular": r.singular},
    "wbic": lambda r: {"wbic": r.wbic, "wbic_se": r.std_error},
    "free_energy": lambda r: {"free_energy": r.free_energy, "free_energy_se": r.std_error},
    "rlct": lambda r: {
        "rlct": r.rlct, "rlct_se": r.std_error, "singular_bic": r.singular_bic,
        "singular_bic_se": r.singular_bic_se,
    },
    "loo": lambda r: {"elpd_loo": float(r["elpd_loo"]), "elpd_loo_se": float(r["se"])},
}
