"""Exact finite-n values of lambda_hat on the equal-power normal crossings, by quadrature.

lambda_hat estimates t (E_t[L_n(w)] - L_n(w0)) at t = n beta under the local posterior
exp(-t (L_n(w) - L_n(w0))) N(w; 0, I). For the normal crossing y = x (w1 w2)^p + eps with
truth w0 = 0 the loss depends on w only through z = w1 w2 (density K0(|z|) / pi under N(0, I)):
t (L_n(w) - L_n(0)) = t (a z^(2p) / 2 - b z^p), a = sum x^2 / n, b = sum x eps / n. So the
posterior expectation is a ratio of one-dimensional integrals, computed by adaptive quadrature
(`slt.truth.normal_crossing_expected_llc`): no sampling error. Population curve: a = 1, b = 0
(the n -> infinity limit of the data terms at fixed t). lambda = 1 / (2p), multiplicity m = 2.

Question answered: can a fit over several temperatures remove the finite-n gap? With m = 2,
Z(t) ~ t^(-lambda) (A log t + B), so t E_t[K] = lambda - 1 / (log t + B / A) + O(t^-1): two
unknowns (lambda, B / A) from a curve over t.
"""

from __future__ import annotations

import collections
import warnings

import jax
import jax.numpy as jnp
import numpy as np
from scipy import optimize, special

import slt
from slt import models, truth

N = 5000
GAMMAS = (1.0, 0.1, 0.01, 1e-4)
SIZES = (5000, 50_000)
MULTIPLIERS = (1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8)  # beta = c / log n
NUM_DATA_SETS = 400
# SGLD against the quadrature on the same data: (gamma, step size, warmup, draws); None: auto.
SGLD_RUNS = ((1.0, None, 5000, 10_000), (0.01, 4e-5, 500_000, 2_000_000))
SGLD_DATA_SETS = 4

LOCALIZER_DOC = """\
The localizer (gamma / 2) ||w||^2 makes w ~ N(0, I / gamma) a priori, and z = w1 w2 has density
gamma K0(gamma |z|) / pi, which near 0 is (gamma / pi) (log(2 / gamma) - gamma_E - log |z|). Put
into Z(t) this gives A = lambda and B = log(2 / gamma) - gamma_E - lambda psi(lambda) (psi the
digamma function), so the leading finite-t value is
  lambda - 1 / (log t + (log(2 / gamma) - gamma_E - lambda psi(lambda)) / lambda):
the valley along the axes that the prior lets in is the log-multiplicity term, and a wider
localizer (smaller gamma) moves lambda_hat towards lambda, at the rate log(1 / gamma) / lambda.

Question answered: how far does a smaller gamma close the gap, and what does it cost? Columns:
the population value at t = n / log n (quadrature), the leading-order formula above, and the
mean over data sets (the exact expectation of lambda_hat at this n)."""


def _lambda_hat(t: float, power: int, a: float = 1.0, b: float = 0.0,
                gamma: float = 1.0) -> float:
    """t (E_t[L_n] - L_n(0)) for data terms (a, b): `slt.truth.normal_crossing_expected_llc`."""
    return truth.normal_crossing_expected_llc(t, power, second_moment=a, cross_moment=b,
                                              gamma=gamma)


def _pole_fit(log_t: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """(lambda, B/A) of lambda - 1 / (log t + B/A) by least squares."""
    model = lambda x, lam, shift: lam - 1 / (x + shift)  # noqa: E731
    return tuple(optimize.curve_fit(model, log_t, values, p0=[values[-1], 0.0], maxfev=20000)[0])


def _leading_term(t: float, power: int, gamma: float) -> float:
    """lambda - 1 / (log t + B / A) with B / A from the localizer (LOCALIZER_DOC)."""
    lam = 1 / (2 * power)
    shift = (np.log(2 / gamma) - np.euler_gamma - lam * special.digamma(lam)) / lam
    return lam - 1 / (np.log(t) + shift)


def _data_terms(rng, n: int, count: int) -> list[tuple[float, float]]:
    """(a, b) = (sum x^2 / n, sum x eps / n) of `count` simulated data sets of size n."""
    return [(x @ x / n, x @ e / n) for x, e in (rng.normal(size=(2, n)) for _ in range(count))]


def _localizer_table(rng) -> list[str]:
    lines = [
        "\n" + LOCALIZER_DOC + "\n",
        "| powers | γ | " + " | ".join(
            f"n = {n:,}: population, formula, data ({NUM_DATA_SETS // 2} sets)" for n in SIZES
        ) + " |",
        "|---|---|" + "---|" * len(SIZES),
    ]
    data = {n: _data_terms(rng, n, NUM_DATA_SETS // 2) for n in SIZES}
    for power in (1, 2):
        lam = 1 / (2 * power)
        for gamma in GAMMAS:
            cells = []
            for n in SIZES:
                t = n / np.log(n)
                values = (
                    _lambda_hat(t, power, gamma=gamma),
                    _leading_term(t, power, gamma),
                    np.mean([_lambda_hat(t, power, a, b, gamma) for a, b in data[n]]),
                )
                cells.append(", ".join(f"{v:.3f} ({v / lam - 1:+.0%})" for v in values))
            lines.append(f"| ({power}, {power}) | {gamma:g} | " + " | ".join(cells) + " |")
    lines.append(
        "\nReading: a smaller γ closes part of the gap, and the leading-order formula tracks "
        "the quadrature within 1–4% of λ; the data term (the posterior leaning towards the "
        "data's MLE) costs another 3–10% of λ (each mean over data sets has a standard error "
        "of about 0.006, 2–3% of λ). Even at γ = 10⁻⁴ the exact expectation of λ̂ misses λ "
        "by 11–19% at these n; the 20% target for the normal crossings comes within reach of "
        "an exact sampler only from about γ = 0.01 (17–22% below λ there). SGLD cannot go "
        "there: along the valley w2 ≈ 0 at |w1| = r the posterior width across it shrinks "
        "like 1 / r (p = 1: 1 / (r √t)), so the stable step shrinks like 1 / r², while the "
        "valley the localizer admits is 1 / √γ long; diffusing along it takes about t / γ² "
        "steps for p = 1 (6 √t / γ² for p = 2): 4.6·10⁷ at t = 4600 (n = 50 000), "
        "γ = 0.01, against 4.6·10³ at γ = 1. The gap is a property of the estimand at "
        "practical n and γ, not of the sampler.\n"
    )
    return lines


def _warning_kind(message: str) -> str:
    """A short name for one of `llc`'s warnings."""
    for phrase, kind in (("repeated at", "repeated"), ("drifts", "drift"), ("hot", "hot"),
                         ("cold", "cold"), ("diverged", "diverged"), ("R-hat", "R-hat")):
        if phrase in message:
            return kind
    return message[:30]


def _sgld_against_quadrature() -> list[str]:
    """`slt.llc` on normal crossing (2, 2) data sets against the exact value for each one."""
    spec, n, lam = models.normal_crossing((2, 2)), N, 0.25
    lines = [
        "\nQuestion answered: does SGLD follow the estimand when γ changes? `slt.llc` on "
        f"normal crossing (2, 2), n = {n:,}, {SGLD_DATA_SETS} data sets, 4 chains each, against "
        "the quadrature for the same data set (a, b from its x and y). At γ = 1 the step size "
        "is automatic; at γ = 0.01 the automatic step diverges in the far valley (the short "
        "calibration chains never reach it; three halvings are not enough), so the step is "
        "set by hand from the stability bound above.\n",
        "| γ | step size | warmup + draws | exact per data set | λ̂ per data set | mean λ̂ "
        "| mean exact | λ̂ vs exact | warnings (runs) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for gamma, step, warmup, draws in SGLD_RUNS:
        exact, estimates, steps, flagged = [], [], [], collections.Counter()
        for seed in range(SGLD_DATA_SETS):
            key = jax.random.fold_in(jax.random.key(0), seed)
            data = spec.simulate(key, {"w": jnp.zeros(2)}, n)
            x, y = np.asarray(data["x"], float), np.asarray(data["y"], float)
            exact.append(_lambda_hat(n / np.log(n), 2, x @ x / n, x @ y / n, gamma))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = slt.llc(spec.problem(data), {"w": jnp.zeros(2)},
                                 jax.random.fold_in(key, 99),
                                 posterior=slt.LocalPosterior(gamma=gamma),
                                 sampler=slt.samplers.SGLD(
                                     step_size="auto" if step is None else step),
                                 plan=slt.RunPlan(num_warmup=warmup, num_samples=draws,
                                                  chunk_size=10_000, progress=False))
            estimates.append(result.llc_mean)
            steps.append(result.step_size)
            flagged.update(_warning_kind(message) for message in result.warnings)
        mean, reference = np.mean(estimates), np.mean(exact)
        lines.append(
            f"| {gamma:g} | {'auto, median ' if step is None else ''}"
            f"{np.median(steps):.2g} | {warmup:,} + {draws:,} "
            f"| {', '.join(f'{v:.3f}' for v in exact)} "
            f"| {', '.join(f'{v:.3f}' for v in estimates)} | {mean:.3f} ({mean / lam - 1:+.0%}) "
            f"| {reference:.3f} ({reference / lam - 1:+.0%}) | {mean / reference - 1:+.1%} "
            f"| {', '.join(f'{kind} ×{count}' for kind, count in sorted(flagged.items()))} |"
        )
    lines.append(
        "\nReading: SGLD follows the estimand to the smaller γ: per data set within −2 … +1% "
        "of the exact value at γ = 0.01 (+6% on average at γ = 1 with the automatic step), so "
        "what the (2, 2) row of the accuracy table misses is the estimand's finite-n gap at "
        "γ = 1, not sampling error. At γ = 0.01 the expectation over data sets is 17–21% "
        "below λ (table above, and an independent draw of 200 data sets); the exact values "
        "of the four data sets alone span 0.18 to 0.28, so a mean over a handful of data "
        "sets cannot settle a 20% target either way (these four happen to lie above "
        "average). The price of the smaller γ: a step size 21 times smaller than the "
        "automatic one at γ = 1, set by hand, and 170 times as many steps (about two minutes "
        "per data set on 2 CPU cores instead of seconds). The drift warnings say what the "
        "quarters of a run show: the valley is explored slowly, λ̂ over a quarter of the run "
        "varies by about ±10%.\n"
    )
    return lines


def run(seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    t = N * np.asarray(MULTIPLIERS) / np.log(N)
    data = _data_terms(rng, N, NUM_DATA_SETS)
    lines = [
        "## Finite-n values of λ̂ on the normal crossings with m = 2 (quadrature)\n",
        __doc__.split("\n\n", 1)[1],
        f"n = {N:,}, β = c / log n for c in {', '.join(f'{c:g}' for c in MULTIPLIERS)} "
        f"(t = nβ from {t[0]:.0f} to {t[-1]:.0f}); {NUM_DATA_SETS} data sets.\n",
        "| powers | λ | population λ̂ at β = 1/log n | fit of the population curve "
        "| data sets: mean λ̂ over c | sd over data sets at c = 1 "
        "| fits per data set (first 6) |",
        "|---|---|---|---|---|---|---|",
    ]
    for power in (1, 2):
        lam = 1 / (2 * power)
        population = np.array([_lambda_hat(s, power) for s in t])
        fit = _pole_fit(np.log(t), population)
        curves = np.array([[_lambda_hat(s, power, a, b) for s in t] for a, b in data])
        per_set = []
        for curve in curves[:6]:
            try:
                per_set.append(f"{_pole_fit(np.log(t), curve)[0]:.2f}")
            except RuntimeError:
                per_set.append("no fit")
        middle = MULTIPLIERS.index(1)
        lines.append(
            f"| ({power}, {power}) | {lam:g} | {population[middle]:.3f} "
            f"({population[middle] / lam - 1:+.0%}) | λ = {fit[0]:.3f} "
            f"({fit[0] / lam - 1:+.1%}), B/A = {fit[1]:.2f} "
            f"| {', '.join(f'{v:.3f}' for v in curves.mean(0))} "
            f"| {curves[:, middle].std():.3f} ({curves[:, middle].std() / lam:.0%} of λ) "
            f"| {', '.join(per_set)} |"
        )
    lines.append(
        "\nReading: on the population curve the two-parameter fit recovers λ within a few "
        "percent where the single temperature misses it by 30–40%. On data it does not: at "
        "fixed n the data term t (L_n(w) − L_n(w0)) ≈ t K(w) − t √K ξ / √n grows with β, "
        "the posterior moves onto the MLE and λ̂(β) falls at large β instead of rising to λ, "
        "and one data set's λ̂ already scatters by the sd shown. A temperature sweep at fixed "
        "n therefore does not correct the finite-n gap of the LLC on these models; the gap "
        "is reported, not fitted away.\n"
    )
    return "\n".join(lines + _localizer_table(rng) + _sgld_against_quadrature())


if __name__ == "__main__":
    print(run())
