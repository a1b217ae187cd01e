"""Choose the SGLD step size (and, if asked, gamma) for `llc` by a stated criterion.

Criterion. For every candidate (step size, gamma) a few short chains run, all candidates at
once in one compiled program (step size and gamma are per-chain runtime values). A candidate
**passes** when
  1. no chain diverges,
  2. the mean MALA acceptance probability is at least `min_acceptance` (0.9 by default:
     the discretisation error of each step is small; Lau et al. report trustworthy lambda_hat
     in that regime), and
  3. the trace is stationary: the mean of n beta (L_b - L_b(w*)) over the first and the second
     half of the post-warmup draws differ by less than 3 standard errors of the difference
     (too small a step size has not reached the local posterior and still drifts), and
  4. the minibatch gradient noise is small against the injected Langevin noise:
     r(eps) = (eps / 4d) sum_j G_j (n beta)^2 Var_b(g_j) <= `max_noise_ratio` (0.02), with
     Var_b(g_j) the variance of coordinate j of the minibatch gradient of L_b at w*
     (`gradient_noise_ratio`). Minibatch noise heats the chains: measured on reduced-rank
     regression, lambda_hat grows linearly in eps with a relative bias of about 2.5 r, which
     MALA acceptance (computed on one minibatch) cannot see. r <= 0.02 keeps it near 5%.
  5. the chains are neither hot nor cold: their configurational temperature T (measured from
     the draws; `slt.samplers.local_chains.configurational_temperature`, exactly 1 at the
     local posterior) satisfies |T - 1| <= `max_temperature_deviation` (0.1) + 2 standard
     errors, and is measurable (a mean Laplacian of U that is not positive happens only away
     from equilibrium). T < 1 flags chains still close to w*, which have not spread over the
     local posterior (too small a step size for the run's length: their lambda_hat is far too
     small, yet their trace can look stationary); T > 1 flags chains heated by a too large
     step or by minibatch noise. The two-standard-error allowance keeps a short noisy run from
     failing a good candidate, so the hot side catches only gross heating; the estimate of T
     in the final run, with its warning, is sharper.
The chosen step size is the **largest passing one** (fastest mixing among the accurate ones).
With several gammas, the smallest gamma that has a passing step size is chosen (gamma biases
lambda_hat downward by confining the chains; the smallest workable gamma biases it least).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

from slt.estimators.local_run import (
    MAX_DRIFT,
    default_nbeta,
    restriction_mask,
    trace_drift,
    trace_statistics,
    validate_local_run,
)
from slt.problem import Params, Problem
from slt.results import Persistable
from slt.samplers.local_chains import configurational_temperature, run_chains
from slt.samplers.sgld import RMSPROP_DAMPING
from slt.validation import InputError, require_in_interval, require_positive

__all__ = [
    "CalibrationResult",
    "default_step_sizes",
    "gradient_noise_ratio",
    "llc_calibrate",
]

# The columns of `CalibrationResult.table`, in order.
_TABLE_COLUMNS = ["step_size", "gamma", "llc", "se", "mala_acceptance", "drift_z", "temperature",
                  "temperature_se", "noise_ratio", "diverged", "passes"]


def default_step_sizes(nbeta: float, preconditioner: str | None) -> np.ndarray:
    """The candidate grid: 13 log-spaced values over four decades.

    Without preconditioning the stable step size scales like 1 / (n beta * curvature of L_n):
    the grid spans 1e-4 / (n beta) .. 1 / (n beta). RMSprop divides the gradient by its own
    magnitude, so its steps are in parameter units: 1e-7 .. 1e-3.
    """
    if preconditioner == "rmsprop":
        return np.logspace(-7, -3, 13)
    return np.logspace(-4, 0, 13) / nbeta


@dataclass(frozen=True)
class CalibrationResult(Persistable):
    """The sweep and the choice.

    Attributes:
      step_size, gamma: the chosen values.
      table: one row per candidate: step_size, gamma, llc (mean), se, mala_acceptance,
        drift_z (half-to-half difference in standard errors), diverged, passes.
      criterion: the criterion in words.
    """

    step_size: float
    gamma: float
    table: pd.DataFrame = field(repr=False)
    criterion: str = field(repr=False, default=__doc__)

    def summary(self) -> pd.DataFrame:
        """One row per candidate (step size, gamma): `table` with a column ``chosen`` that
        marks the candidate picked."""
        chosen = (self.table["step_size"] == self.step_size) & (self.table["gamma"] == self.gamma)
        return self.table.assign(chosen=chosen)

    def to_xarray(self) -> xr.Dataset:
        """The sweep as an xarray Dataset: the columns of `summary` (step_size, gamma, llc,
        se, mala_acceptance, drift_z, temperature, temperature_se, noise_ratio, diverged,
        passes, chosen) as variables over dim ``candidate``; attrs criterion (in words)."""
        return xr.Dataset.from_dataframe(self.summary().rename_axis("candidate")).assign_attrs(
            criterion=self.criterion)

    def plot(self, **kwargs):
        """lambda_hat and MALA acceptance against step size, the chosen one marked."""
        from slt.plots.llc import plot_calibration

        return plot_calibration(self, **kwargs)

    def __repr__(self) -> str:
        passing = int(self.table["passes"].sum())
        return (
            f"CalibrationResult(step_size={self.step_size:.3g}, gamma={self.gamma:g}, "
            f"{passing}/{len(self.table)} candidates pass)"
        )


def llc_calibrate(  # 17 user parameters (Args), flat for help(); 25/97 lines docstring
    problem: Problem,
    params: Params,
    key: jax.Array,
    *,
    step_sizes=None,
    gamma: float = 1.0,
    gammas=None,
    nbeta: float | None = None,
    batch_size: int = 256,
    preconditioner: str | None = None,
    include_prior: bool = False,
    chains_per_candidate: int = 2,
    num_samples: int = 1000,
    num_warmup: int = 500,
    min_acceptance: float = 0.9,
    max_noise_ratio: float = 0.02,
    max_temperature_deviation: float = 0.1,
    progress: bool = True,
    restrict_to=None,
) -> CalibrationResult:
    """Sweep step sizes (and optionally gammas) and pick one by the module's criterion.

    Args:
      problem, params: as for `llc` (params = w*).
      key: PRNG key.
      step_sizes: candidate step sizes (default `default_step_sizes`).
      gamma: localization strength when `gammas` is None.
      gammas: candidate gammas to calibrate as well (optional).
      nbeta, batch_size, preconditioner, include_prior: as for `llc`.
      chains_per_candidate, num_samples, num_warmup: size of each candidate's short run.
      min_acceptance: the MALA acceptance a candidate needs.
      max_noise_ratio: the largest gradient-noise ratio r(eps) a candidate may have.
      max_temperature_deviation: the largest |T - 1| (beyond 2 standard errors) a candidate
        may have.
      progress: show a progress bar.
      restrict_to: as for `llc`: calibrate the chains that move only the selected weights
        (the noise ratio r(eps) then averages over those weights).

    Returns:
      A `CalibrationResult`.

    Raises:
      InputError (a ValueError, `slt.validation`): as for `llc`; step_sizes not a non-empty
        list of finite positive numbers, gammas not finite and >= 0, min_acceptance outside
        [0, 1], max_noise_ratio or max_temperature_deviation not finite and positive.
      ValueError: no candidate passes (the message holds the table).
    """
    gammas = np.asarray([gamma] if gammas is None else gammas, dtype=float).ravel()
    validate_local_run(
        problem, params, key, gamma=gammas, nbeta=nbeta, batch_size=batch_size,
        preconditioner=preconditioner, counts={
            "chains_per_candidate": (chains_per_candidate, 1), "num_samples": (num_samples, 1),
            "num_warmup": (num_warmup, 0),
        },
    )
    require_in_interval("min_acceptance", min_acceptance, 0.0, 1.0, closed=True)
    require_positive("max_noise_ratio", max_noise_ratio)
    require_positive("max_temperature_deviation", max_temperature_deviation)
    mask = restriction_mask(problem, params, restrict_to)
    nbeta = default_nbeta(problem.n) if nbeta is None else float(nbeta)
    grid_steps, grid_gammas = _candidate_grid(step_sizes, gammas, nbeta, preconditioner)
    repeat = chains_per_candidate
    trace = run_chains(
        problem,
        params,
        key,
        num_chains=grid_steps.size * repeat,
        num_steps=num_warmup + num_samples,
        step_size=jnp.repeat(grid_steps, repeat),
        gamma=jnp.repeat(grid_gammas, repeat),
        nbeta=nbeta,
        batch_size=min(batch_size, problem.n),
        preconditioner=preconditioner,
        include_prior=include_prior,
        mala_every=5,
        progress=progress,
        description="llc calibration",
        mask=mask,
    )
    noise_per_step = gradient_noise_ratio(
        problem, params, 1.0, nbeta=nbeta, batch_size=batch_size, preconditioner=preconditioner,
        mask=mask,
    )
    rows = []
    for index, (step_size, gamma_value) in enumerate(zip(grid_steps, grid_gammas, strict=True)):
        chains = slice(index * repeat, (index + 1) * repeat)
        row = _assess(trace, chains, num_warmup, nbeta, min_acceptance, max_temperature_deviation)
        row["noise_ratio"] = noise_per_step * step_size
        row["passes"] = row["passes"] and row["noise_ratio"] <= max_noise_ratio
        rows.append(row | {"step_size": step_size, "gamma": gamma_value})
    table = pd.DataFrame(rows)[_TABLE_COLUMNS]
    passing = table[table["passes"]]
    if passing.empty:
        raise ValueError(
            "no candidate passes the calibration criterion (divergence, MALA acceptance >= "
            f"{min_acceptance}, stationarity, noise ratio <= {max_noise_ratio}, |temperature - 1| "
            f"<= {max_temperature_deviation} + 2 se); widen "
            "step_sizes or gammas, or raise batch_size:\n" + table.to_string(index=False)
        )
    best_gamma = passing["gamma"].min()
    chosen = passing[passing["gamma"] == best_gamma]["step_size"].max()
    return CalibrationResult(step_size=float(chosen), gamma=float(best_gamma), table=table)


def _candidate_grid(step_sizes, gammas, nbeta, preconditioner) -> tuple[np.ndarray, np.ndarray]:
    """Every (step size, gamma) candidate, step sizes varying fastest; checks both lists."""
    step_sizes = np.asarray(
        default_step_sizes(nbeta, preconditioner) if step_sizes is None else step_sizes, dtype=float
    ).ravel()
    if step_sizes.size == 0 or gammas.size == 0:
        raise InputError("step_sizes and gammas must be non-empty lists of numbers")
    for step_size in step_sizes:
        require_positive("every step size", step_size)
    grid_steps, grid_gammas = (g.ravel() for g in np.meshgrid(step_sizes, gammas))
    return grid_steps, grid_gammas


def gradient_noise_ratio(
    problem: Problem,
    params: Params,
    step_size: float,
    *,
    nbeta: float,
    batch_size: int,
    preconditioner: str | None = None,
    num_examples: int = 512,
    chunk: int = 64,
    mask=None,
) -> float:
    """r(eps): minibatch gradient noise relative to the injected Langevin noise, at w*.

    One SGLD step adds (eps/2) G (n beta) (grad L_b - grad L_n), of variance per coordinate
    (eps^2 / 4) G_j^2 (n beta)^2 Var_b(g_j), to the Langevin noise of variance eps G_j; their
    ratio averaged over coordinates is

        r = (eps / 4d) sum_j G_j (n beta)^2 Var_b(g_j),
        Var_b(g_j) = Var_i(grad_j l_i(w*)) / b * (n - b) / (n - 1)   (sampling without replacement).

    G = 1 without preconditioning; for RMSprop G_j = 1 / (delta + sqrt(v_j)) with v_j the
    stationary mean square of the scaled gradient, (n beta)^2 (mean_j^2 + Var_b(g_j)).
    Var_i is estimated from the per-example gradients of `num_examples` examples (evenly spaced
    through the data), computed `chunk` at a time to bound memory at O(chunk * d). With a
    `mask` (flat booleans: a restricted run) d and the sum count the selected weights only.
    """
    count = min(num_examples, problem.n)
    count -= count % min(chunk, count)
    indices = jnp.linspace(0, problem.n - 1, count).astype(jnp.int32).reshape(-1, min(chunk, count))
    flat = problem.ravel(params)

    def example_loss(position, index):
        return -problem.loglik(problem.unravel(position), problem.take(index[None]))[0]

    def moments(block):
        gradients = jax.vmap(jax.grad(example_loss), in_axes=(None, 0))(flat, block)
        return gradients.sum(0), (gradients**2).sum(0)

    sums, squares = jax.lax.map(moments, indices)
    mean = sums.sum(0) / count
    variance = jnp.maximum(squares.sum(0) / count - mean**2, 0.0)
    b = min(batch_size, problem.n)
    minibatch_variance = variance / b * (problem.n - b) / max(problem.n - 1, 1)
    if preconditioner == "rmsprop":
        mean_square = nbeta**2 * (mean**2 + minibatch_variance)
        diagonal = 1.0 / (RMSPROP_DAMPING + jnp.sqrt(mean_square))
    else:
        diagonal = jnp.ones_like(mean)
    per_weight = diagonal * minibatch_variance
    if mask is not None:
        per_weight = per_weight[np.asarray(mask)]
    return float(step_size / 4 * nbeta**2 * jnp.mean(per_weight))


def _assess(trace, chains, num_warmup, nbeta, min_acceptance, max_temperature_deviation) -> dict:
    """The criterion's checks 1, 2, 3 and 5 for one candidate's chains."""
    diverged = bool(np.any(trace.diverged_at[chains] >= 0))
    values = nbeta * (trace.loss[chains, num_warmup:] - trace.center_loss[chains, num_warmup:])
    acceptance = np.exp(trace.log_acceptance[chains, num_warmup:])
    mala = float(np.nanmean(acceptance)) if np.isfinite(acceptance).any() else 0.0
    temperature, temperature_se = configurational_temperature(
        trace.gradient_product[chains, num_warmup:], trace.laplacian[chains, num_warmup:]
    )
    if diverged or not np.all(np.isfinite(values)):
        return {
            "llc": np.nan,
            "se": np.nan,
            "mala_acceptance": mala,
            "drift_z": np.nan,
            "temperature": temperature,
            "temperature_se": temperature_se,
            "diverged": True,
            "passes": False,
        }
    drift_z = trace_drift(values)
    temperate = abs(temperature - 1) <= max_temperature_deviation + 2 * temperature_se
    return {
        "llc": float(values.mean()),
        "se": trace_statistics(values)[1],
        "mala_acceptance": mala,
        "drift_z": drift_z,
        "temperature": temperature,
        "temperature_se": temperature_se,
        "diverged": False,
        "passes": bool(mala >= min_acceptance and drift_z < MAX_DRIFT and temperate),
    }
