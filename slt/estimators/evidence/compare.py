"""Compare model classes by free energy: BIC, Laplace, WBIC, a reference F, lambda_hat, PSIS-LOO.

`compare({name: problem}, key)` fits every model (MAP, `slt.fit_map`) and runs the requested
estimators on it; the result's table has one row per model and the choice of every criterion
(the lowest free energy; the highest elpd for PSIS-LOO). All free energies are on the seeds'
scale F = -log Z ≈ n L_n(w0) + lambda log n, so the columns are directly comparable:

    bic            n L_n(ŵ) + (d/2) log n            (ŵ the MAP: the MLE may not exist)
    laplace        -log Z_Laplace                     (flagged when singular)
    wbic           E_beta[n L_n], beta = 1/log n      (± se)
    free_energy    the reference F, tempered SMC      (± se; `free_energy_method` says
                   which estimate: "importance" for mixtures, `slt.free_energy`)
    singular_bic   n L_n(ŵ) + lambda_hat log n - (m_hat - 1) log log n   (± se), lambda_hat
                   and m_hat from temperatures (`slt.rlct`)
    elpd_loo       PSIS-LOO (ArviZ) on posterior draws: a predictive check, not a free energy
    nested         a second reference F, nested sampling (± se; opt in: methods=(..., "nested"),
                   BlackJAX's nested slice sampler)
    sbic           -sBIC (Drton & Plummer's singular BIC) of a nested family, from the MAP
                   log-likelihoods of every model together (opt in: methods=(..., "sbic") and
                   `sbic_family`, e.g. `functools.partial(slt.sbic_gaussian_mixtures, dim=1)`
                   for gaussian_mixture(K), K = 1, 2, ... given smallest first); its posterior
                   model probabilities in `sbic_posterior`

**The fast path first** (the default plan, `ComparisonPlan(draws=FromDraws())`; issue 37).
For every model the reference F comes from posterior draws: NUTS chains started at the fit's
distinct optima, importance and bridge sampling from two proposals fitted to the halves of
the draws (`slt.estimators.evidence.draws`), and a self-check (Pareto k-hat <= 0.7, se <= 0.02
nats, the proposals agree, the bridge agrees, every optimum within 10 nats covered). For a
mixture the proposals include the empty-component cover (`slt.samplers.empty_component`),
whose K - 1 component part is fitted to the previous model's draws when that model is the same
mixture with one component fewer (a family given smallest first). The
chains at 1/log n run beside those at beta = 1 in the same NUTS call (trajectories of at most
128 leapfrog steps, `FromDraws.nuts`: at NUTS's default depth 10 the chains at 1/log n of
the over-fitted mixtures ran up to 680 steps per draw), and WBIC, lambda_hat
and PSIS-LOO read them (`source` "nuts"): lambda_hat is Watanabe's two-temperature estimate
between 1/log n and 1 with m_hat = 1 (`slt.estimators.evidence.rlct.rlct_two_temperatures`:
measured as accurate as the five-temperature fit, and steadier, for a fifth of its chains);
the fit over lambda_hat's temperatures runs when the plan names them (`multipliers` or
`betas`), their chains then beside the others. Where a model's
check fails, that model alone falls back to the tempered path below (`free_energy_path`
"tempered", `free_energy_checks` says why) and its tempered columns read the SMC particles.

How each column is computed is one value, a `ComparisonPlan` (the MAP fit, the tempered SMC
of the reference F, lambda_hat's temperatures, the samplers of WBIC, lambda_hat and LOO, the
nested sampling); `methods` says which columns are computed.

**One tempered path** (the fallback, and `ComparisonPlan(draws=None)`). One adaptive
tempered SMC run per model, its ladder forced through beta = 1/log n and the temperatures
of lambda_hat, gives the reference F, WBIC, E_beta[n L_n] at every temperature (hence
lambda_hat and the singular BIC), and its final particles are the posterior draws of
PSIS-LOO: every temperature-based number comes from the same particles, with standard errors
from the independent copies. The SMC's draws carry weight between non-equivalent modes, where
NUTS chains each see one mode (the fast path's F does not need them to; its check says when
its draws were mis-weighted).
A plan may give WBIC, lambda_hat or LOO a sampler of their own instead (NUTS chains per
temperature: `ComparisonPlan(rlct=NUTS(), loo=NUTS())`). The table's `source` column says
where the temperature-based numbers of each row came from.

**Choices that admit ties.** A criterion with a standard error picks a model only when the
runner-up is worse by more than `SEPARATION` combined standard errors; otherwise its entry in
`choices` reads "tie: A, B" (every model within that distance of the best). PSIS-LOO uses
ArviZ's paired difference (`elpd_diff`, `dse`) the same way.

**Two references.** With both "free_energy" and "nested", every model whose tempered-SMC and
nested-sampling free energies differ by more than `DISAGREEMENT_SE` combined standard errors
(and 0.1 nats) is flagged: `references_agree` is False in its row and a warning names the gap.
Tempered SMC can miss mass at a first-order phase transition, where nested sampling does
not; nested sampling's slice moves can miss separated modes, where SMC's reweighting does
not. When they disagree, neither choice of the two columns should be trusted yet.

Label switching: WBIC, the reference F and lambda_hat average n L_n, which is invariant under
relabelling; Laplace counts one mode (`ComparisonPlan(num_modes=...)` counts K!).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, is_dataclass

import arviz as az
import jax
import numpy as np
import pandas as pd
import xarray as xr
from tqdm.auto import tqdm

from slt.estimators.evidence.bic import bic
from slt.estimators.evidence.draws import FromDraws
from slt.estimators.evidence.free_energy import (
    DISAGREEMENT_SE,
    disagreement,
    free_energy,
    from_draws_or_fallback,
)
from slt.estimators.evidence.laplace import laplace
from slt.estimators.evidence.rlct import (
    MAX_MULTIPLICITY,
    inverse_temperatures,
    rlct,
    rlct_from_draws,
    rlct_two_temperatures,
)
from slt.estimators.evidence.sbic import SBICResult
from slt.estimators.evidence.wbic import (
    Sampler,
    draws_inference_data,
    require_sampler,
    smc_draws,
    summarise_draws,
    tempered_draws,
    wbic,
    wbic_beta,
)
from slt.fit import MAPFit, fit_map
from slt.problem import Problem, require_problem
from slt.results import Persistable
from slt.samplers.nested import NestedSampling
from slt.samplers.nuts import NUTS, pointwise_loglik_of_draws
from slt.samplers.tempering import Tempering
from slt.validation import (
    InputError,
    require_callable,
    require_choices,
    require_instance,
    require_int,
    require_key,
    require_positive,
    set_field,
)

__all__ = ["ComparisonPlan", "ComparisonResult", "compare", "DEFAULT_METHODS", "METHODS"]

METHODS = ("bic", "laplace", "wbic", "free_energy", "rlct", "loo", "nested", "sbic")
DEFAULT_METHODS = ("bic", "laplace", "wbic", "free_energy", "rlct", "loo")
# The columns computed from tempered draws: from the one tempered path, unless the plan gives
# them a sampler of their own.
TEMPERED_COLUMNS = ("wbic", "rlct", "loo")
# A criterion separates two models when their difference exceeds this many standard errors of
# the difference (about 95% two-sided for a normal difference).
SEPARATION = 2.0
# The columns of the compact view (`ComparisonResult.__repr__`); `.table` has all of them.
COMPACT = (("bic", None), ("laplace", None), ("wbic", "wbic_se"),
           ("free_energy", "free_energy_se"), ("rlct", "rlct_se"), ("m", None),
           ("singular_bic", "singular_bic_se"), ("elpd_loo", "elpd_loo_se"),
           ("nested", "nested_se"), ("references_agree", None), ("sbic", None))
# Why a criterion can pick another model than the reference F (`ComparisonResult.assessment`).
CAVEATS = {
    "bic": "BIC charges (d/2) log n, the penalty of a regular model; singular models (mixtures "
           "with more components than the data need) cost less than that",
    "laplace": "the Laplace approximation fits one Gaussian at the MAP: it counts one of the "
               "K! label-switched modes of a mixture (about log K! too high) and fails where "
               "the model is singular",
    "wbic": "WBIC = E_beta[n L_n] at beta = 1/log n matches F only up to O_p(1) (Watanabe "
            "2013): its differences between models can be off by a few nats",
    "rlct": "n L_n(ŵ) + λ̂ log n - (m̂ - 1) log log n drops F's O_p(1) terms and carries the "
            "estimation error of λ̂",
    "loo": "PSIS-LOO estimates predictive accuracy, not the evidence: it answers another "
           "question and tends to prefer larger models",
    "nested": "nested sampling is a second reference: a disagreement with the tempered SMC "
              "means one of them missed posterior mass",
    "sbic": "sBIC charges each model the learning coefficients of its family's table (upper "
            "bounds for Gaussian mixtures), averaged over the smaller models the data may come "
            "from: an asymptotic approximation, like BIC, with F's O_p(1) terms dropped",
}
# criterion -> (table column, whether lower is better)
CRITERIA = {
    "bic": ("bic", True),
    "laplace": ("laplace", True),
    "wbic": ("wbic", True),
    "free_energy": ("free_energy", True),
    "rlct": ("singular_bic", True),
    "loo": ("elpd_loo", False),
    "nested": ("nested", True),
    "sbic": ("sbic", True),
}


@dataclass(frozen=True)
class ComparisonPlan:
    """How `compare` computes each column of its table: one value per column.

    Every model gets a MAP fit ŵ (`fit`), which gives n L_n(ŵ), BIC = n L_n(ŵ) + (d/2) log n
    and Laplace's -log Z ≈ n L_n(ŵ) - log p(ŵ) + (1/2) log det H - (d/2) log 2π - log
    `num_modes`. The reference F = -log Z comes from posterior draws, checked (`draws`, the
    fast path: NUTS at beta = 1, with chains at 1/log n beside them), and WBIC = E_beta[n L_n]
    at beta = 1/log n, lambda_hat and PSIS-LOO from the same chains; for a model whose fast
    path fails its check, all of them come from one tempered SMC run (`free_energy`: its
    ladder passes through 1/log n and lambda_hat's beta_j = c_j / log n, `multipliers` c_j or
    `betas`, multiplicities up to `max_multiplicity`); `wbic`, `rlct` or `loo` may name a
    sampler of their own. The second reference F comes from nested sampling (`nested`).

    Attributes:
      fit: the MAP fit of every model (`slt.fit_map`), shared by bic, laplace and rlct.
      num_modes: the modes Laplace counts (`slt.laplace`): K! for a K-component mixture
        whose label-switched modes the Gaussian at ŵ would otherwise count once.
      free_energy: the tempered SMC of the reference F (`slt.free_energy`); the one tempered
        path that the columns without a sampler of their own read.
      multipliers, betas: lambda_hat's inverse temperatures, beta_j = c_j / log n or the
        given `betas` (`slt.rlct`); both None: the default window (`rlct.DEFAULT_MULTIPLIERS`,
        mapped into 3 / n <= beta <= 1 at small n: `inverse_temperatures`); on the tempered
        path, the waypoints of its ladder. On the fast path (`draws`), both None gives
        lambda_hat from the chains at 1/log n and 1 alone (`rlct_two_temperatures`, m_hat =
        1); given (e.g. `multipliers=slt.estimators.evidence.rlct.DEFAULT_MULTIPLIERS`), NUTS
        chains run at them too and lambda_hat is the fit over them, m_hat included.
      max_multiplicity: the largest multiplicity m the fit of lambda_hat considers.
      wbic: None: WBIC from the tempered path, or, where lambda_hat has a sampler of its own,
        from its draws at beta = 1/log n (one run fewer; a run of that sampler at 1/log n
        when its temperatures lack it); or a sampler value (`NUTS`, `TemperedSGLD`,
        `Tempering`): a `slt.wbic` run of its own.
      rlct: None: lambda_hat from the tempered path; or a sampler value: a `slt.rlct` run of
        its own (e.g. `NUTS(num_chains=1)`: one NUTS chain per temperature).
      loo: None: PSIS-LOO on the tempered path's final particles (copies as chains); or a
        `NUTS` value: on NUTS draws of the posterior (beta = 1).
      nested: the nested sampling of the second reference (`slt.free_energy(method=
        "nested")`; live points, runs, ...).
      draws: the fast path of the reference F (`slt.estimators.evidence.draws.FromDraws`:
        NUTS from the fit's optima, importance and bridge sampling, the self-check), tried
        first for every model; where its check fails, that model's F comes from the tempered
        path (`free_energy`, through lambda_hat's temperatures), and the table's
        `free_energy_path` and `free_energy_checks` say so. Where it stands, the columns that
        would read the tempered path come from NUTS instead (`draws.nuts`: WBIC from the
        chains at 1/log n, lambda_hat from those and the draws at beta = 1 (or from chains at
        its temperatures, when `multipliers` or `betas` is given), PSIS-LOO from the draws at
        beta = 1). None: the tempered path for every model (the behaviour before issue 37).

    Its repr shows the fields that differ from the defaults (in the values too).

    Example:
      >>> ComparisonPlan(fit=slt.MAPFit(num_restarts=8), rlct=slt.NUTS(num_chains=1))
      ComparisonPlan(fit=MAPFit(num_restarts=8), rlct=NUTS(num_chains=1))
      >>> ComparisonPlan(loo="nuts")
      Traceback (most recent call last):
      slt.validation.InputError: loo must be None (PSIS-LOO on the tempered path) or a NUTS \
value, got str
    """

    fit: MAPFit = MAPFit()
    num_modes: int = 1
    free_energy: Tempering = Tempering()
    multipliers: tuple[float, ...] | None = None
    betas: tuple[float, ...] | None = None
    max_multiplicity: int = MAX_MULTIPLICITY
    wbic: Sampler | None = None
    rlct: Sampler | None = None
    loo: NUTS | None = None
    nested: NestedSampling = NestedSampling()
    draws: FromDraws | None = FromDraws()

    def __post_init__(self):
        require_instance("fit", self.fit, MAPFit, "a MAPFit value")
        set_field(self, "num_modes", require_int("num_modes", self.num_modes,
                                                          minimum=1))
        require_instance("free_energy", self.free_energy, Tempering, "a Tempering value")
        for name in ("multipliers", "betas"):
            values = getattr(self, name)
            if values is not None:
                set_field(self, name, tuple(
                    require_positive(f"every entry of {name}", value)
                    for value in np.ravel(np.asarray(values, dtype=object))))
        set_field(self, "max_multiplicity", require_int(
            "max_multiplicity", self.max_multiplicity, minimum=1))
        for name in ("wbic", "rlct"):
            if getattr(self, name) is not None:
                require_sampler(getattr(self, name), name)
        if self.loo is not None and not isinstance(self.loo, NUTS):
            raise InputError(f"loo must be None (PSIS-LOO on the tempered path) or a NUTS "
                             f"value, got {type(self.loo).__name__}")
        require_instance("nested", self.nested, NestedSampling, "a NestedSampling value")
        if self.draws is not None:
            require_instance("draws", self.draws, FromDraws, "a FromDraws value or None")

    def __repr__(self) -> str:
        return _changed_fields(self)

    def reads_path(self, method: str) -> bool:
        """Whether column `method` is computed from the tempered path."""
        if method == "wbic" and self.wbic is None and self.rlct is not None:
            return False  # from lambda_hat's own draws
        return method in TEMPERED_COLUMNS and getattr(self, method) is None

    def source(self, methods=TEMPERED_COLUMNS) -> str:
        """Where the tempered columns among `methods` (all of them, if none is) come from:
        "smc" (the path) and / or their samplers' names, joined by "+"."""
        columns = [method for method in TEMPERED_COLUMNS if method in methods]
        names = set()
        for method in columns or TEMPERED_COLUMNS:
            sampler = getattr(self, method)
            if method == "wbic" and sampler is None:
                sampler = self.rlct  # WBIC from lambda_hat's draws
            names.add("smc" if sampler is None else sampler.name)
        return "+".join(sorted(names))


def _changed_fields(value) -> str:
    """`Name(field=..., ...)` of a configuration value with only the fields that differ from
    its defaults, nested values likewise: the call that builds it."""
    if not is_dataclass(value) or isinstance(value, type):
        return repr(value)
    defaults = type(value)()
    changed = [f"{item.name}={_changed_fields(getattr(value, item.name))}"
               for item in fields(value)
               if getattr(value, item.name) != getattr(defaults, item.name)]
    return f"{type(value).__name__}({', '.join(changed)})"


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
      timings: seconds each step took, one row per model, one column per step ("fit", then
        the methods in the order they ran; compilation included): where the time went.
    """

    table: pd.DataFrame
    choices: dict[str, str]
    results: dict[str, dict[str, object]] = field(repr=False)
    methods: tuple[str, ...]
    warnings: tuple[str, ...] = ()
    timings: pd.DataFrame | None = field(default=None, repr=False)

    def summary(self) -> pd.DataFrame:
        """The comparison table."""
        return self.table

    def to_xarray(self) -> xr.Dataset:
        """The comparison as an xarray Dataset.

        Returns:
          Every column of `table` as a variable over dim ``model`` (coordinate: the model
          names; estimates in nats, as in the table); ``choice`` (the model each criterion
          selects) over dim ``criterion``; ``seconds`` (the time each step took) over dims
          (model, step) when timings were recorded; attrs methods.
        """
        dataset = xr.Dataset.from_dataframe(self.table.rename_axis("model"))
        dataset["choice"] = xr.DataArray(
            list(self.choices.values()), coords={"criterion": list(self.choices)})
        if self.timings is not None:
            dataset["seconds"] = self.timings.rename_axis(index="model", columns="step")
        dataset.attrs["methods"] = self.methods
        return dataset

    def plot(self, **kwargs):
        """Free energy per model and method with ±2 se error bars (and PSIS-LOO if run)."""
        from slt.plots.evidence import plot_comparison

        return plot_comparison(self, **kwargs)

    def compact(self) -> pd.DataFrame:
        """The main columns, each estimate with its standard error as "value ± se" text."""
        columns = {}
        for name, se in COMPACT:
            if name not in self.table:
                continue
            values = self.table[name]
            if se is None or se not in self.table:
                columns[name] = values.map(_format)
            else:
                columns[name] = [f"{v:.5g} ± {e:.2g}" if np.isfinite(v) else ""
                                 for v, e in zip(values, self.table[se], strict=True)]
        return pd.DataFrame(columns, index=self.table.index)

    def assessment(self) -> list[str]:
        """Plain-language statements: for each criterion, whether it picks what the reference
        free energy picks, how far its values are from F, and (where it does not agree) why
        it can be off (`CAVEATS`); first, how far the reference itself can be trusted."""
        if "free_energy" not in self.choices:
            return []
        table, reference = self.table, self.choices["free_energy"]
        errors = table["free_energy_se"]
        how = {"smc": "tempered SMC", "ti": "thermodynamic integration",
               "importance": "importance sampling from the tempered SMC's particles",
               "draws": "importance and bridge sampling from NUTS draws, checked"}
        methods = table.get("free_energy_method", pd.Series(["smc"] * len(table),
                                                            index=table.index))
        paths = table.get("free_energy_path", pd.Series(["tempered"] * len(table),
                                                        index=table.index))
        sources = ["draws" if path == "draws" else method
                   for method, path in zip(methods, paths, strict=True)]
        fallbacks = [str(name) for name, checks in
                     table.get("free_energy_checks", pd.Series(dtype=str)).items()
                     if isinstance(checks, str) and checks]
        lines = [
            f"Reference F ({', '.join(how.get(m, m) for m in dict.fromkeys(sources))}) picks "
            f"{reference}; standard errors "
            f"{errors.min():.2g}–{errors.max():.2g} nats"
            + ("" if not self.warnings else
               f"; {len(self.warnings)} diagnostic(s) raised, listed below")
            + "."
        ]
        if fallbacks:
            lines.append(f"The fast path's self-check failed on {', '.join(fallbacks)}: their "
                         f"F comes from the tempered path (free_energy_checks says why).")
        if "references_agree" in table:
            disagree = [str(name) for name, ok in table["references_agree"].items() if not ok]
            lines.append(
                "Nested sampling agrees with it on every model." if not disagree else
                f"Nested sampling disagrees with it on {', '.join(disagree)}: trust neither "
                f"reference there."
            )
        for criterion, choice in self.choices.items():
            if criterion == "free_energy":
                continue
            column = CRITERIA[criterion][0]
            agrees = _same_choice(choice, reference)
            text = f"{criterion} picks {choice}: " + (
                "the same as the reference F" if agrees else "not what the reference F picks")
            if criterion != "loo" and column in table:
                gaps = (table[column] - table["free_energy"]).astype(float)
                text += f"; its values are {gaps.min():+.3g} to {gaps.max():+.3g} nats from F"
            lines.append(text + ("." if agrees else f" — {CAVEATS[criterion]}."))
        return lines

    def __repr__(self) -> str:
        choices = ", ".join(f"{criterion}: {name}" for criterion, name in self.choices.items())
        with pd.option_context("display.width", 200, "display.max_columns", 30):
            table = self.compact().to_string()
        flags = f"\n{len(self.warnings)} diagnostic warning(s): see .warnings" * bool(self.warnings)
        return f"ComparisonResult(choices: {choices})\n{table}{flags}"


def _format(value) -> str:
    """A table cell: numbers to 5 significant digits, blank when not finite."""
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    return f"{value:.5g}" if np.isfinite(value) else ""


def compare(
    problems: Mapping[str, Problem],
    key: jax.Array,
    methods=DEFAULT_METHODS,
    plan: ComparisonPlan = ComparisonPlan(),
    *,
    sbic_family: Callable | None = None,
    progress: bool = True,
) -> ComparisonResult:
    """Run every estimator in `methods` on every model and tabulate the free energies.

    Args:
      problems: {name: Problem}; the models must describe the same data for the comparison
        to mean anything.
      key: PRNG key; model i uses `fold_in(key, i)`.
      methods: one or several of "bic", "laplace", "wbic", "free_energy", "rlct", "loo",
        "nested", "sbic" (default: all but "nested", which costs more than the rest together,
        and "sbic", which needs `sbic_family`).
      plan: how each column is computed (`ComparisonPlan`, its fields stated there): the MAP
        fit, the tempered SMC of the reference F (the one tempered path per model, module
        doc), lambda_hat's temperatures, the samplers of WBIC, lambda_hat and LOO where they
        do not read the path, the nested sampling. The path is run whenever "free_energy" or
        a column that reads it is among the methods (BIC and Laplace need only the fit).
      sbic_family: for "sbic": `(log_likelihoods, n) -> SBICResult`, given the MAP
        log-likelihoods of the models in the order of `problems` (which must then be a nested
        family, smallest first): `functools.partial(slt.sbic_gaussian_mixtures, dim=D)`,
        `functools.partial(slt.sbic_reduced_rank, M=..., N=...)`, or for a family of one's
        own `lambda ll, n: slt.sbic(ll, n, learning_coefficients)`.
      progress: show a progress bar over models and methods.

    Returns:
      A `ComparisonResult`.

    Raises:
      InputError (a ValueError, `slt.validation`): problems not a dict of Problems, problems
        with different numbers of examples n, methods not a method or a sequence of them (an
        unknown one: the message lists them), key not a PRNG key, plan not a
        `ComparisonPlan`, and what the estimators reject.
      ValueError: no problems.

    Example:
      >>> x, y = problem.data["x"], problem.data["y"]        # simulated at w = (1, -0.5)
      >>> smaller = slt.models.linear_regression(1).problem({"x": x[:, :1], "y": y})
      >>> result = slt.compare({"d=1": smaller, "d=2": problem}, key,
      ...                      methods=("bic", "laplace"), progress=False)
      >>> result.choices
      {'bic': 'd=2', 'laplace': 'd=2'}
      >>> result.table[["bic", "laplace"]].round(1)
             bic  laplace
      d=1  149.6    150.1
      d=2  140.9    141.6
    """
    methods = require_choices("methods", methods, METHODS)
    _check_problems(problems)
    require_key(key)
    require_instance("plan", plan, ComparisonPlan, "a ComparisonPlan value")
    if "sbic" in methods:
        require_callable("sbic_family (needed by the 'sbic' method)", sbic_family)
    per_model = [method for method in methods if method != "sbic"]
    order = ("fit", *_ordered(per_model))
    path = [method for method in per_model if plan.reads_path(method)]
    if path or ("free_energy" in methods and _pure_path(plan)):
        # the path (the reference F) first: the other methods read it
        order = ("fit", "free_energy", *(m for m in _ordered(per_model) if m != "free_energy"))
    runners = _runners(plan, through_temperatures=bool(path) or _pure_path(plan))
    rows, results, messages, timings = {}, {}, [], {}
    steps = [(name, method) for name in problems for method in order]
    with tqdm(total=len(steps), desc="compare", disable=not progress) as bar:
        for index, (name, problem) in enumerate(problems.items()):
            results[name], rows[name], timings[name], caught = _run_model(
                name, problem, jax.random.fold_in(key, index), order, runners,
                {"d": problem.dim, "n": problem.n, "source": plan.source(methods)}, bar,
            )
            messages += caught
            messages += _check_references(name, results[name], rows[name])
            if _from_draws(results[name]):  # the tempered columns came from NUTS instead
                rows[name]["source"] = "+".join(sorted(
                    {"nuts" if part == "smc" else part
                     for part in rows[name]["source"].split("+")}))
    if "sbic" in methods:
        messages += _add_sbic(sbic_family, problems, results, rows)
    table = pd.DataFrame.from_dict(rows, orient="index")
    table = table[[column for column in _COLUMN_ORDER if column in table.columns]]
    choices = {
        criterion: _choose(table, column, lower)
        for criterion, (column, lower) in CRITERIA.items()
        if criterion in methods and criterion != "loo"
    }
    if "loo" in methods:
        choices["loo"] = _choose_loo({name: done["loo"] for name, done in results.items()})
    if messages:
        warnings.warn(
            f"{len(messages)} diagnostic warning(s) during the comparison; see "
            f"result.warnings", stacklevel=2,
        )
    return ComparisonResult(
        table=table, choices=choices, results=results, methods=methods, warnings=tuple(messages),
        timings=pd.DataFrame.from_dict(timings, orient="index"),
    )


def _check_problems(problems) -> None:
    """A non-empty dict of Problems of the same data (the same n)."""
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


def _run_model(name, problem, model_key, order, runners, row, bar):
    """Run the methods in `order` on one model, method i with `fold_in(model_key, i)`, each
    reading the results before it; returns its results {method: result}, its table row
    (`row` filled in), its timings {method: seconds} and the warnings its methods raised."""
    results, timings, messages = {}, {}, []
    for step, method in enumerate(order):
        bar.set_description(f"compare: {name} {method}")
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = runners[method](problem, jax.random.fold_in(model_key, step), results)
        timings[method] = time.perf_counter() - start
        messages += [f"{name}: {w.message}" for w in caught]
        results[method] = result
        row.update(_COLUMNS.get(method, lambda r: {})(result))
        bar.update(1)
    return results, row, timings, messages


def _check_references(name: str, done: dict, row: dict) -> list[str]:
    """Compare the tempered-SMC and nested-sampling references of one model (module doc):
    set `references_agree` in its row; a message when they disagree."""
    if not ("free_energy" in done and "nested" in done):
        return []
    tempered, nested = done["free_energy"], done["nested"]
    gap = disagreement((tempered.free_energy, tempered.std_error),
                       (nested.free_energy, nested.std_error))
    row["references_agree"] = gap is None
    if gap is None:
        return []
    message = (
        f"the two references disagree: tempered SMC F = {tempered.free_energy:.6g} ± "
        f"{tempered.std_error:.2g}, nested sampling F = {nested.free_energy:.6g} ± "
        f"{nested.std_error:.2g}, a gap of {gap:.3g} nats (> {DISAGREEMENT_SE:g} combined se): "
        f"one of them missed posterior mass; trust neither free energy for this model"
    )
    warnings.warn(f"{name}: {message}", stacklevel=3)
    return [f"{name}: {message}"]


def _add_sbic(sbic_family: Callable, problems: Mapping, results: dict, rows: dict) -> list[str]:
    """sBIC of the family from the models' MAP log-likelihoods, in `problems`' order: the
    `sbic` and `sbic_posterior` columns, the result under every model's "sbic"; its warnings."""
    names = list(problems)
    log_likelihoods = [results[name]["fit"].loglik for name in names]
    result = sbic_family(log_likelihoods, next(iter(problems.values())).n)
    if not isinstance(result, SBICResult) or len(result.free_energy) != len(names):
        raise InputError(
            f"sbic_family must return an SBICResult for the {len(names)} models; got {result!r}"
        )
    for index, name in enumerate(names):
        results[name]["sbic"] = result
        rows[name]["sbic"] = float(result.free_energy[index])
        rows[name]["sbic_posterior"] = float(result.posterior[index])
    return [f"sbic: {message}" for message in result.warnings]


def _ordered(methods):
    """rlct before wbic, so that WBIC can reuse the rlct run at beta = 1/log n."""
    return sorted(methods, key=lambda m: (m != "rlct", METHODS.index(m)))


def _same_choice(choice: str, reference: str) -> bool:
    """Whether two `choices` entries pick the same model ("tie: A, B" counts as {A, B}): the
    sets overlap."""
    def models(entry):
        return set(entry.removeprefix("tie: ").split(", "))

    return bool(models(choice) & models(reference))


def _choose(table: pd.DataFrame, column: str, lower: bool) -> str:
    """The best model by `column`, or "tie: A, B, ..." when the models within `SEPARATION`
    standard errors of the difference from the best cannot be told apart (module doc)."""
    values = table[column].astype(float)
    finite = values[np.isfinite(values)]
    if finite.empty:
        return ""
    best = finite.idxmin() if lower else finite.idxmax()
    errors = table.get(f"{column}_se", pd.Series(0.0, index=table.index)).astype(float)
    errors = errors.fillna(0.0)
    close = [name for name in finite.index
             if abs(finite[name] - finite[best])
             <= SEPARATION * np.hypot(errors[name], errors[best]) and name != best]
    return f"tie: {', '.join([str(best), *map(str, close)])}" if close else str(best)


def _choose_loo(loo_results: dict) -> str:
    """The best model by PSIS-LOO, or a tie with every model whose paired elpd difference is
    within `SEPARATION` of its standard error (ArviZ's `compare`: elpd_diff, dse)."""
    table = az.compare(loo_results)
    best = str(table.index[0])
    close = [str(name) for name, row in table.iloc[1:].iterrows()
             if abs(row["elpd_diff"]) <= SEPARATION * row["dse"]]
    return f"tie: {', '.join([best, *close])}" if close else best


def _pure_path(plan: ComparisonPlan) -> bool:
    """Whether no tempered column has a sampler of its own: then the reference F's run always
    passes through the temperatures, as the one path of every tempered column."""
    return all(getattr(plan, method) is None for method in TEMPERED_COLUMNS)


def _runners(plan: ComparisonPlan, *, through_temperatures: bool) -> dict[str, Callable]:
    """method -> `(problem, key, done) -> result` for `plan`; "free_energy" runs the tempered
    path through lambda_hat's temperatures and 1/log n when `through_temperatures`. Each
    reads the results `done` before it."""

    def run_fit(problem, key, done):
        return fit_map(problem, key, plan.fit)

    def run_bic(problem, key, done):
        return bic(problem, done["fit"])

    def run_laplace(problem, key, done):
        return laplace(problem, done["fit"], num_modes=plan.num_modes)

    def run_tempered(problem, key):
        if not through_temperatures:
            return free_energy(problem, key, plan.free_energy, progress=False)
        betas = inverse_temperatures(problem.n, plan.multipliers, plan.betas)
        return free_energy(problem, key, plan.free_energy, progress=False,
                           waypoints=np.append(betas, 1.0))

    previous = {}  # the last model's fast-path draws: a mixture's K - 1 component source

    def run_free_energy(problem, key, done):
        if plan.draws is None:
            return run_tempered(problem, key)
        temperatures = ()
        if through_temperatures:  # WBIC's (and lambda_hat's) chains beside those at beta = 1
            temperatures = _fast_temperatures(problem.n, plan)
        result = from_draws_or_fallback(problem, key, plan.draws, fit=done["fit"],
                                        tempered=lambda k: run_tempered(problem, k),
                                        temperatures=temperatures,
                                        smaller=previous.get("draws"))
        if result.draws_run is not None:
            previous["draws"] = (problem, result.draws_run.positions)
        return result

    def run_nested(problem, key, done):
        return free_energy(problem, key, plan.nested, method="nested", progress=False)

    def run_wbic(problem, key, done):
        if plan.wbic is not None:
            return wbic(problem, key, sampler=plan.wbic, progress=False)
        if plan.rlct is None:
            return _path_wbic(problem, done)
        reused = done["rlct"].wbic() if "rlct" in done else None
        return reused or wbic(problem, key, sampler=plan.rlct, progress=False)

    def run_rlct(problem, key, done):
        if plan.rlct is not None:
            return rlct(problem, key, fit=done["fit"], multipliers=plan.multipliers,
                        betas=plan.betas, max_multiplicity=plan.max_multiplicity,
                        sampler=plan.rlct, progress=False)
        return _path_rlct(problem, done, plan)

    def run_loo(problem, key, done):
        if plan.loo is None and _from_draws(done):
            draws = done["free_energy"].run.nuts
            return _draws_loo(problem, draws.positions[draws.betas == 1.0])
        if plan.loo is None:
            return _path_loo(problem, done)
        draws = tempered_draws(problem, key, [1.0], plan.loo, progress=False)
        pointwise = np.asarray(pointwise_loglik_of_draws(problem, draws.positions))
        name = "_".join(problem.observed_site_names) or "y"
        data = draws_inference_data(problem, draws, log_likelihood={name: pointwise})
        return az.loo(data, pointwise=True)

    return {"fit": run_fit, "bic": run_bic, "laplace": run_laplace, "wbic": run_wbic,
            "free_energy": run_free_energy, "rlct": run_rlct, "loo": run_loo,
            "nested": run_nested}


def _fast_temperatures(n: int, plan: ComparisonPlan) -> np.ndarray:
    """The inverse temperatures below 1 whose NUTS chains the fast path runs beside those at
    beta = 1 for the tempered columns: 1/log n (WBIC; with beta = 1, lambda_hat by two
    temperatures) and, when the plan names lambda_hat's temperatures (`multipliers` or
    `betas`), those too (the fit)."""
    if not _fits_temperatures(plan):
        return np.array([wbic_beta(n)])
    return np.unique(np.append(inverse_temperatures(n, plan.multipliers, plan.betas),
                               wbic_beta(n)))


def _fits_temperatures(plan: ComparisonPlan) -> bool:
    """Whether the fast path's lambda_hat is the fit over the plan's temperatures (they are
    given) rather than the two-temperature estimate."""
    return plan.multipliers is not None or plan.betas is not None


def _from_draws(done) -> bool:
    """Whether the reference F of this model came from the fast path (no tempered run)."""
    return "free_energy" in done and done["free_energy"].path == "draws"


def _draws_loo(problem, positions):
    """PSIS-LOO on the fast path's NUTS draws at beta = 1, (chain, draw, dim)."""
    pointwise = np.asarray(pointwise_loglik_of_draws(problem, positions))
    name = "_".join(problem.observed_site_names) or "y"
    data = az.from_dict(posterior={"position": positions},
                        log_likelihood={name: pointwise})
    return az.loo(data, pointwise=True)


def _path_draws(done):
    """(draws at every temperature of the path, the sampler's name): the tempered SMC's
    particles, or, where the fast path's F stood, its NUTS chains (`FromDraws`)."""
    if _from_draws(done):
        return done["free_energy"].run.nuts, "nuts"
    return smc_draws(done["free_energy"].run), "smc"


def _path_wbic(problem, done):
    """WBIC from the path's draws at beta = 1/log n."""
    draws, sampler = _path_draws(done)
    beta = wbic_beta(problem.n)
    chosen = np.isclose(draws.betas, beta, rtol=1e-6)
    return summarise_draws(problem, draws.select(chosen), sampler=sampler)


def _path_rlct(problem, done, plan: ComparisonPlan):
    """lambda_hat from the path's draws: on the fast path by default from the chains at
    1/log n and 1 (`rlct_two_temperatures`), else the fit over its temperatures below 1."""
    draws, sampler = _path_draws(done)
    if _from_draws(done) and not _fits_temperatures(plan):  # 1/log n and 1 (module doc)
        result = rlct_two_temperatures(problem, draws, sampler=sampler, fit=done["fit"])
    else:
        draws = draws.select(draws.betas < 1.0)
        if _from_draws(done):  # WBIC's chains at 1/log n count only if lambda_hat's beta
            betas = inverse_temperatures(problem.n, plan.multipliers, plan.betas)
            draws = draws.select(
                np.isclose(draws.betas[:, None], betas[None], rtol=1e-6).any(1))
        result = rlct_from_draws(problem, draws, sampler=sampler, fit=done["fit"],
                                 max_multiplicity=plan.max_multiplicity)
    for message in result.warnings:
        warnings.warn(message, stacklevel=2)
    return result


def _path_loo(problem, done):
    """PSIS-LOO on the path's final particles (copies as chains)."""
    run = done["free_energy"].run
    pointwise = np.asarray(pointwise_loglik_of_draws(problem, run.particles))
    draws = smc_draws(run)
    draws = draws.select(draws.betas == 1.0)._replace(positions=run.particles)
    name = "_".join(problem.observed_site_names) or "y"
    data = draws_inference_data(problem, draws, log_likelihood={name: pointwise})
    return az.loo(data, pointwise=True)


_COLUMN_ORDER = (
    "d", "n", "source", "nll_hat", "bic", "laplace", "laplace_singular", "wbic", "wbic_se",
    "free_energy", "free_energy_se", "free_energy_method", "free_energy_path",
    "free_energy_checks", "rlct", "rlct_se", "m",
    "singular_bic", "singular_bic_se",
    "elpd_loo", "elpd_loo_se", "nested", "nested_se", "references_agree", "sbic",
    "sbic_posterior",
)

_COLUMNS = {
    "fit": lambda r: {"nll_hat": -r.loglik},
    "bic": lambda r: {"bic": r.free_energy},
    "laplace": lambda r: {"laplace": r.free_energy, "laplace_singular": r.singular},
    "wbic": lambda r: {"wbic": r.wbic, "wbic_se": r.std_error},
    "free_energy": lambda r: {"free_energy": r.free_energy, "free_energy_se": r.std_error,
                              "free_energy_method": r.method, "free_energy_path": r.path,
                              "free_energy_checks": "; ".join(r.checks)},
    "rlct": lambda r: {
        "rlct": r.rlct, "rlct_se": r.std_error, "m": r.multiplicity,
        "singular_bic": r.singular_bic, "singular_bic_se": r.singular_bic_std_error,
    },
    "loo": lambda r: {"elpd_loo": float(r["elpd_loo"]), "elpd_loo_se": float(r["se"])},
    "nested": lambda r: {"nested": r.free_energy, "nested_se": r.std_error},
}
