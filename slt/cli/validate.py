"""`slt validate`: run the estimators on cases with exact answers (TRUTH.md), on this machine.

Every case computes an estimate whose exact value is known in closed form and checks the
error against a tolerance stated in advance (printed in the table):

* Fisher information of f = v u x (scalar u, v), x ~ N(0, 1) by Gauss-Hermite quadrature:
  I = E[x^2] [[v^2, u v], [u v, u^2]], entries within 1e-10; rank 1 (the scaling symmetry).
* Fisher rank of pi N(mu, sigma^2) + (1 - pi) N(0, 1) at mu = 0, sigma = 1: 2 of 3 (pi is
  unidentifiable there), exactly.
* Bayesian linear regression, known noise (d = 3, n = 200): the Laplace free energy equals the
  closed-form F = -log Z (the posterior is Gaussian) to 1e-6 relative; the reference F by
  tempered SMC within 4 standard errors of it; WBIC by NUTS within 4 standard errors of the
  closed-form E_beta[n L_n] at beta = 1 / log n.
* The local learning coefficient by `slt.llc` (calibrated step size) at the maximum-
  likelihood w*: linear regression (d = 3, n = 5000; lambda = d/2 = 3/2) and reduced-rank
  regression (M, N, H, r) = (5, 5, 3, 1), n = 20000 (lambda = 8, Aoyagi & Watanabe 2005),
  each within 25% of the truth (the project's per-case accuracy target, benchmarks/
  RESULTS.md) or 4 standard errors, whichever is larger.
* The exact cross-check (`slt.llc_check`): SGLD's lambda_hat of the linear regression
  (n = 5000) against HMC's on the same local posterior, within 3 standard errors of their
  difference.

``--quick`` runs the deterministic cases and a short LLC run of the linear regression
(seconds; for smoke tests). The exit status is 1 if any case misses its tolerance.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from slt import models, truth
from slt.cli.inputs import OutputFolder, UsageError
from slt.cli.options import add_command
from slt.estimators.evidence.free_energy import free_energy
from slt.estimators.evidence.laplace import laplace
from slt.estimators.evidence.wbic import wbic
from slt.estimators.local.check import AGREEMENT_Z, llc_check
from slt.estimators.local.llc import llc
from slt.fit import MAPFit, fit_map
from slt.geometry.fisher import FisherRequest, fisher_information, gauss_hermite_inputs
from slt.samplers.config import RunPlan

__all__ = ["CASES", "Outcome", "add_parser", "run", "run_cases"]


class Outcome(NamedTuple):
    """A case's estimate, the exact value, the error and the tolerance it must stay within."""

    estimate: float
    truth: float
    error: float
    tolerance: float
    rule: str


class Case(NamedTuple):
    """A validation case: a name, whether `--quick` runs it, and `run(key, quick)`."""

    name: str
    quick: bool
    run: Callable[[jax.Array, bool], Outcome]


def _absolute(estimate: float, exact: float, tolerance: float, rule: str) -> Outcome:
    return Outcome(float(estimate), float(exact), abs(float(estimate) - float(exact)),
                   float(tolerance), rule)


def _fisher_scaling(key, quick) -> Outcome:
    u, v = 0.7, -1.3
    spec = models.two_layer_network(1, 1, 1, activation="identity", bias=False)
    x, weights = gauss_hermite_inputs()
    result = fisher_information(spec, {"V": [[u]], "U": [[v]]},
                                request=FisherRequest(x=x, x_weights=weights))
    second_moment = float(np.sum(weights * x[:, 0] ** 2))
    exact = second_moment * np.array([[v * v, u * v], [u * v, u * u]])
    error = float(np.max(np.abs(result.matrix - exact)))
    if result.rank != 1:
        error = np.inf  # the kernel (u, -v) must be found
    return Outcome(float(result.matrix[0, 1]), u * v, error, 1e-10,
                   "I[0,1]; max entry error, and rank 1")


def _fisher_mixture_rank(key, quick) -> Outcome:
    spec = models.fixed_component_mixture()
    result = fisher_information(spec, {"pi": 0.5, "mu": 0.0, "sigma": 1.0})
    return _absolute(result.rank, 2, 0, "rank, exact")


def _linear_regression_data(n: int, d: int = 3):
    spec = models.linear_regression(d)
    data = spec.simulate(jax.random.key(11), {"w": jnp.linspace(1.0, -1.0, d)}, n)
    return spec, data


def _laplace_linear(key, quick) -> Outcome:
    spec, data = _linear_regression_data(200)
    problem = spec.problem(data)
    exact = -truth.linear_regression_log_evidence(data["x"], data["y"], 1.0, 1.0)
    result = laplace(problem, fit_map(problem, key, MAPFit(num_restarts=4)))
    return _absolute(result.free_energy, exact, 1e-6 * abs(exact), "relative 1e-6")


def _smc_linear(key, quick) -> Outcome:
    spec, data = _linear_regression_data(200)
    exact = -truth.linear_regression_log_evidence(data["x"], data["y"], 1.0, 1.0)
    result = free_energy(spec.problem(data), key, progress=False)
    return _absolute(result.free_energy, exact, 4 * result.std_error, "4 se")


def _wbic_linear(key, quick) -> Outcome:
    spec, data = _linear_regression_data(200)
    exact = truth.linear_regression_wbic(data["x"], data["y"], 1.0, 1.0)
    result = wbic(spec.problem(data), key, progress=False)
    return _absolute(result.wbic, exact, 4 * result.std_error, "4 se")


def _llc_case(spec, true_values, n, exact, key, quick) -> Outcome:
    data = spec.simulate(jax.random.key(12), true_values, n)
    problem = spec.problem(data)
    fit_key, llc_key = jax.random.split(key)
    fit = fit_map(problem, fit_key, MAPFit(num_restarts=4), prior=False)
    draws = {"num_samples": 300, "num_warmup": 300} if quick else {}
    result = llc(problem, fit.params, llc_key, plan=RunPlan(progress=False, **draws))
    tolerance = max(0.25 * exact, 4 * result.std_error)
    return _absolute(result.llc_mean, exact, tolerance, "25% or 4 se")


def _llc_against_exact(key, quick) -> Outcome:
    """SGLD's lambda_hat against HMC's on the same local posterior (`slt.llc_check`)."""
    spec, data = _linear_regression_data(5000)
    problem = spec.problem(data)
    fit_key, sgld_key, exact_key = jax.random.split(key, 3)
    params = fit_map(problem, fit_key, MAPFit(num_restarts=4), prior=False).params
    result = llc(problem, params, sgld_key, plan=RunPlan(progress=False))
    check = llc_check(problem, params, exact_key, result,
                      plan=RunPlan(num_warmup=1000, num_samples=2000, progress=False))
    return _absolute(result.llc_mean, check.reference.llc_mean,
                     AGREEMENT_Z * np.hypot(result.std_error, check.reference.std_error),
                     "3 se of the difference; truth: HMC's λ̂")


def _llc_linear(key, quick) -> Outcome:
    exact = float(truth.regular_rlct(3).value)
    return _llc_case(models.linear_regression(3), {"w": jnp.array([1.0, -1.0, 0.5])}, 5000,
                     exact, key, quick)


def _llc_rrr(key, quick) -> Outcome:
    true_values = models.random_low_rank(jax.random.key(13), [5, 3, 5], 1)
    exact = float(truth.rrr_rlct(5, 5, 3, 1).value)
    return _llc_case(models.reduced_rank_regression(5, 3, 5), true_values, 20_000, exact, key,
                     quick)


CASES = (
    Case("Fisher I of f = v u x (exact, quadrature)", True, _fisher_scaling),
    Case("Fisher rank of the mixture at mu = 0", True, _fisher_mixture_rank),
    Case("Laplace F, linear regression d=3 n=200", True, _laplace_linear),
    Case("reference F (SMC), linear regression", False, _smc_linear),
    Case("WBIC (NUTS), linear regression", False, _wbic_linear),
    Case("LLC, linear regression d=3 (λ = 3/2)", True, _llc_linear),
    Case("LLC, RRR (5,5,3,1) (λ = 8)", False, _llc_rrr),
    Case("LLC, SGLD against exact HMC (linear regression d=3)", False, _llc_against_exact),
)


def run_cases(key: jax.Array, *, quick: bool, progress: bool) -> pd.DataFrame:
    """Run the cases (`--quick`: those marked quick) and return the calibration table.

    Columns: case, estimate, truth, error, tolerance, rule, seconds, passed.
    """
    from tqdm.auto import tqdm

    cases = [case for case in CASES if case.quick or not quick]
    rows = []
    for index, case in enumerate(tqdm(cases, desc="validate", disable=not progress)):
        start = time.perf_counter()
        outcome = case.run(jax.random.fold_in(key, index), quick)
        seconds = time.perf_counter() - start
        rows.append({"case": case.name, **outcome._asdict(), "seconds": seconds,
                     "passed": bool(outcome.error <= outcome.tolerance)})
    columns = ["case", "estimate", "truth", "error", "tolerance", "rule", "seconds", "passed"]
    return pd.DataFrame(rows, columns=columns)


def add_parser(subparsers, common: argparse.ArgumentParser) -> None:
    parser = add_command(
        subparsers, common, "validate", run,
        help="check the estimators against exact answers on this machine",
        description=(
            "Run the estimators on cases with exact answers (Fisher matrices, closed-form "
            "evidences, exact learning coefficients) on this machine's CPU or GPU and print a "
            "calibration table: estimate, truth, error, tolerance, time. Exit status 1 if a "
            "case misses its tolerance."
        ),
    )
    parser.add_argument("--quick", action="store_true",
                        help="only the fast cases (deterministic ones and a short LLC run)")
    group = parser.add_argument_group("output")
    group.add_argument("--out", metavar="FILE",
                       help="also write the table to FILE (.json or .csv)")
    group.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


def run(args: argparse.Namespace) -> int:
    """Run the cases, print the table, write it with --out; 1 if a case failed."""
    out = None
    if args.out is not None:
        suffix = args.out.rsplit(".", 1)[-1].lower() if "." in args.out else ""
        if suffix not in ("json", "csv"):
            raise UsageError(f"--out {args.out!r}: the table is written as .json or .csv")
        path = Path(args.out)
        out = OutputFolder(path.parent, [path.name], force=args.force)
    devices = ", ".join(sorted({device.device_kind for device in jax.devices()}))
    print(f"slt validate on {jax.default_backend()} ({devices}), "
          f"{'float32' if args.float32 else 'float64'}{', quick' if args.quick else ''}")
    table = run_cases(jax.random.key(args.seed), quick=args.quick, progress=args.progress)
    with pd.option_context("display.width", 200, "display.max_colwidth", 60):
        print(table.to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    failed = int((~table["passed"]).sum())
    print(f"\n{len(table) - failed} of {len(table)} cases within tolerance")
    if out is not None:
        name = out.names[0]
        if name.endswith(".csv"):
            out.write(name, lambda path: table.to_csv(path, index=False))
        else:
            out.write_json(name, {"backend": jax.default_backend(), "devices": devices,
                                  "cases": table.to_dict(orient="records")})
        print(f"wrote {out.path(name)}")
    return 1 if failed else 0
