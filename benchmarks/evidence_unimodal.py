"""The default free energy on unimodal posteriors of real data, against independent references.

`slt.free_energy(problem, key)` with every default (float32, as a user gets it: the fast path
of MAP restarts, NUTS, importance and bridge sampling, its self-check, the tempered fallback)
on models a user brings as NumPyro code, on two medical data sets that scikit-learn ships:

* **Probit regressions**, Wisconsin diagnostic breast cancer (n = 569, malignant or benign):
  nine nested models, an intercept and the first k = 1 … 9 of the ten "mean" cell-nucleus
  features (standardised; radius, perimeter and area are nearly collinear), coefficients
  ~ N(0, 2.5²); y ~ Bernoulli(Φ(x β)) written as a user would, `Bernoulli(probs=ndtr(x @ b))`.
* **Logistic regressions**, the same data and prior, k = 1, 5, 9.
* **Normal-gamma (conjugate) regressions**, the diabetes progression data of Efron et al.
  (2004) (n = 442, ten baseline variables): precision τ ~ Gamma(a0, b0), coefficients
  β | τ ~ N(0, (g / τ) I), y ~ N(X β, 1 / τ); log Z exact
  (`slt.truth.nig_linear_regression_log_evidence`: s² = 1 / τ ~ InvGamma(a0, b0), Λ0 = I / g).
  Standardised data with a0 = b0 = 2, g = 1 on three covariate sets, and the raw centred
  outcome (sd 77) under a vague a0 = b0 = 0.01, g = 100 on all ten.

The GLMs' references are computed outside slt, in float64 NumPy: the MAP by Newton's method
with the exact gradient and Hessian, then importance sampling from a multivariate t (5 degrees
of freedom) centred there with 1.2 × the inverse Hessian as its scale, 2 × 10⁵ draws; the
table gives the reference's own standard error and Pareto k̂.

Each row: F ± se, F − reference, that error in combined standard errors, the path the F came
from, the checks that failed, wall seconds (compilation included: the first key of a model
compiles its programs).

Run: `python -m benchmarks.evidence_unimodal [OUT.json] [KEYS]` (KEYS: comma-separated, default
0,1,2; `EVIDENCE_UNIMODAL_CASES=probit,logistic,normal_gamma` picks families).
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
from scipy import special, stats

PRIOR_SCALE = 2.5  # the GLMs' coefficient prior N(0, 2.5²) on standardised covariates
REFERENCE_DRAWS = 200_000
REFERENCE_DF = 5
REFERENCE_INFLATION = 1.2


# ------------------------------------------------------------------------- data and models


def _breast_cancer(k: int) -> tuple[np.ndarray, np.ndarray]:
    """Intercept and the first k standardised "mean" features; y = 1 for benign."""
    from sklearn.datasets import load_breast_cancer

    data = load_breast_cancer()
    features = data.data[:, :k]
    features = (features - features.mean(0)) / features.std(0)
    return np.column_stack([np.ones(len(features)), features]), data.target.astype(np.float64)


def _diabetes(columns, *, standardise: bool) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    y = y - y.mean()
    if standardise:
        y = y / y.std()
    return X[:, list(columns)], y


def _glm_model(link: str):
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.special import ndtr

    def model(x, y=None):
        prior = dist.Normal(0.0, PRIOR_SCALE).expand([x.shape[1]]).to_event(1)
        beta = numpyro.sample("beta", prior)
        eta = x @ beta
        with numpyro.plate("data", x.shape[0]):
            if link == "probit":
                numpyro.sample("y", dist.Bernoulli(probs=ndtr(eta)), obs=y)
            else:
                numpyro.sample("y", dist.Bernoulli(logits=eta), obs=y)

    return model


def _normal_gamma_model(a0: float, b0: float, g: float):
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    def model(x, y=None):
        tau = numpyro.sample("tau", dist.Gamma(a0, b0))
        beta = numpyro.sample(
            "beta", dist.Normal(0.0, jnp.sqrt(g / tau)).expand([x.shape[1]]).to_event(1))
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", dist.Normal(x @ beta, 1.0 / jnp.sqrt(tau)), obs=y)

    return model


# ------------------------------------------------------------------ references outside slt


def _glm_terms(link: str, X, y, beta):
    """log p(y, beta), its gradient and Hessian in float64 (exact derivatives)."""
    eta = X @ beta
    sign = 2.0 * y - 1.0
    z = sign * eta
    if link == "probit":
        loglik = special.log_ndtr(z)
        mills = np.exp(stats.norm.logpdf(z) - loglik)  # phi(z) / Phi(z)
        first, second = sign * mills, -mills * (z + mills)
    else:
        loglik = -np.logaddexp(0.0, -z)
        p = special.expit(eta)
        first, second = y - p, -p * (1.0 - p)
    value = loglik.sum() + stats.norm.logpdf(beta, 0.0, PRIOR_SCALE).sum()
    gradient = X.T @ first - beta / PRIOR_SCALE**2
    hessian = (X * second[:, None]).T @ X - np.eye(len(beta)) / PRIOR_SCALE**2
    return value, gradient, hessian


def _glm_log_joint(link: str, X, y, betas):
    eta = betas @ X.T
    z = (2.0 * y - 1.0) * eta
    loglik = special.log_ndtr(z) if link == "probit" else -np.logaddexp(0.0, -z)
    return loglik.sum(1) + stats.norm.logpdf(betas, 0.0, PRIOR_SCALE).sum(1)


def glm_reference(link: str, X, y, seed: int = 0) -> dict:
    """F = -log Z by importance sampling from a multivariate t at the MAP (module doc)."""
    import arviz as az

    beta = np.zeros(X.shape[1])
    for _ in range(100):  # Newton's method on a concave objective
        _, gradient, hessian = _glm_terms(link, X, y, beta)
        step = np.linalg.solve(hessian, gradient)
        beta = beta - step
        if np.max(np.abs(step)) < 1e-12:
            break
    _, _, hessian = _glm_terms(link, X, y, beta)
    proposal = stats.multivariate_t(loc=beta, shape=REFERENCE_INFLATION * np.linalg.inv(-hessian),
                                    df=REFERENCE_DF, seed=seed)
    log_weights = []
    for _ in range(REFERENCE_DRAWS // 20_000):
        draws = proposal.rvs(20_000)
        log_weights.append(_glm_log_joint(link, X, y, draws) - proposal.logpdf(draws))
    log_weights = np.concatenate(log_weights)
    top = log_weights.max()
    weights = np.exp(log_weights - top)
    log_z = top + np.log(weights.mean())
    std_error = weights.std() / weights.mean() / np.sqrt(weights.size)
    khat = float(az.psislw(log_weights)[1])
    return {"free_energy": -log_z, "std_error": std_error, "pareto_k": khat}


# --------------------------------------------------------------------------------- cases


def cases(families=("probit", "logistic", "normal_gamma")):
    """(family, name, model, data, reference dict) for every benchmark model."""
    from slt.truth import nig_linear_regression_log_evidence

    if "probit" in families:
        for k in range(1, 10):
            X, y = _breast_cancer(k)
            yield ("probit", f"breast cancer, intercept + {k} features", _glm_model("probit"),
                   {"x": X, "y": y}, glm_reference("probit", X, y))
    if "logistic" in families:
        for k in (1, 5, 9):
            X, y = _breast_cancer(k)
            yield ("logistic", f"breast cancer, intercept + {k} features",
                   _glm_model("logistic"), {"x": X, "y": y}, glm_reference("logistic", X, y))
    if "normal_gamma" in families:
        settings = [((2,), True, (2.0, 2.0, 1.0)), ((2, 3, 8), True, (2.0, 2.0, 1.0)),
                    (tuple(range(10)), True, (2.0, 2.0, 1.0)),
                    (tuple(range(10)), False, (0.01, 0.01, 100.0))]
        for columns, standardise, (a0, b0, g) in settings:
            X, y = _diabetes(columns, standardise=standardise)
            d = X.shape[1]
            log_z = nig_linear_regression_log_evidence(X, y, np.zeros(d), np.eye(d) / g, a0, b0)
            name = (f"diabetes, {d} covariates, {'standardised' if standardise else 'raw'} y, "
                    f"a0 = b0 = {a0:g}, g = {g:g}")
            yield ("normal_gamma", name, _normal_gamma_model(a0, b0, g), {"x": X, "y": y},
                   {"free_energy": -log_z, "std_error": 0.0, "pareto_k": float("nan")})


def run(keys=(0, 1, 2), families=("probit", "logistic", "normal_gamma")) -> list[dict]:
    """Every case and key: the default `slt.free_energy` against its reference."""
    import slt
    from benchmarks.evidence_fast import default_free_energy

    rows = []
    for family, name, model, data, reference in cases(families):
        problem = slt.Problem(model, data)
        for seed in keys:
            result, seconds = default_free_energy(problem, seed)
            error = result.free_energy - reference["free_energy"]
            row = {"family": family, "model": name, "dim": problem.dim, "key": seed,
                   "free_energy": result.free_energy, "std_error": result.std_error,
                   "reference": reference["free_energy"],
                   "reference_std_error": reference["std_error"],
                   "reference_pareto_k": reference["pareto_k"], "error": error,
                   "error_in_se": error / np.hypot(result.std_error, reference["std_error"]),
                   "path": result.path, "failed_checks": list(result.checks),
                   "seconds": seconds}
            rows.append(row)
            print(markdown_row(row), flush=True)
    return rows


def markdown_row(row: dict) -> str:
    reference = f"{row['reference']:.4f}"
    if row["reference_std_error"] > 0:
        reference += f" ± {row['reference_std_error']:.4f} (k̂ {row['reference_pareto_k']:.2f})"
    else:
        reference += " (exact)"
    checks = "; ".join(row["failed_checks"]) or "–"
    return (f"| {row['family']} | {row['model']} | {row['dim']} | {row['key']} | "
            f"{row['free_energy']:.4f} ± {row['std_error']:.4f} | {reference} | "
            f"{row['error']:+.4f} | {row['error_in_se']:+.1f} | {row['path']} | {checks} | "
            f"{row['seconds']:.1f} |")


def summary(rows: list[dict]) -> str:
    errors = np.array([row["error"] for row in rows])
    in_se = np.abs([row["error_in_se"] for row in rows])
    return (f"{len(rows)} runs: largest |error| {np.max(np.abs(errors)):.4f} nats, "
            f"mean error {errors.mean():+.4f}; {np.sum(np.abs(errors) > 0.02)} beyond 0.02 nats; "
            f"{np.sum(in_se > 2)} beyond 2 and {np.sum(in_se > 3)} beyond 3 combined se; "
            f"{sum(row['path'] != 'draws' for row in rows)} from the tempered fallback")


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else None
    keys = tuple(int(k) for k in sys.argv[2].split(",")) if len(sys.argv) > 2 else (0, 1, 2)
    families = tuple(os.environ.get("EVIDENCE_UNIMODAL_CASES",
                                    "probit,logistic,normal_gamma").split(","))
    print("| family | model | d | key | F ± se | reference | error | error / se | path | "
          "failed checks | s |\n|---|---|---|---|---|---|---|---|---|---|---|", flush=True)
    all_rows = run(keys, families)
    print(summary(all_rows))
    if out:
        with open(out, "w") as handle:
            json.dump(all_rows, handle, indent=1)
