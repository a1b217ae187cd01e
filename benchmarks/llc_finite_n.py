"""Exact finite-n values of lambda_hat on the equal-power normal crossings, by quadrature.

lambda_hat estimates t (E_t[L_n(w)] - L_n(w0)) at t = n beta under the local posterior
exp(-t (L_n(w) - L_n(w0))) N(w; 0, I). For the normal crossing y = x (w1 w2)^p + eps with
truth w0 = 0 the loss depends on w only through z = w1 w2 (density K0(|z|) / pi under N(0, I)):
t (L_n(w) - L_n(0)) = t (a z^(2p) / 2 - b z^p), a = sum x^2 / n, b = sum x eps / n. So the
posterior expectation is a ratio of one-dimensional integrals, computed here by adaptive
quadrature: no sampling error. Population curve: a = 1, b = 0 (the n -> infinity limit of the
data terms at fixed t). lambda = 1 / (2p), multiplicity m = 2.

Question answered: can a fit over several temperatures remove the finite-n gap? With m = 2,
Z(t) ~ t^(-lambda) (A log t + B), so t E_t[K] = lambda - 1 / (log t + B / A) + O(t^-1): two
unknowns (lambda, B / A) from a curve over t.
"""

from __future__ import annotations

import numpy as np
from scipy import integrate, optimize, special

N = 5000
MULTIPLIERS = (1 / 8, 1 / 4, 1 / 2, 1, 2, 4, 8)  # beta = c / log n
NUM_DATA_SETS = 400


def _lambda_hat(t: float, power: int, a: float = 1.0, b: float = 0.0) -> float:
    """t (E_t[L_n] - L_n(0)) for data terms (a, b), by quadrature over z = w1 w2."""

    def energy(z):
        return t * (a * z ** (2 * power) / 2 - b * z**power)

    def moment(weight):
        """integral of weight(z) exp(-energy(z)) K0(|z|) over the real line."""
        scale = t ** (-1 / (2 * power))  # where the posterior of z lives
        return sum(
            integrate.quad(lambda z, s=sign: weight(s * z) * np.exp(-energy(s * z))
                           * special.k0(z), 0, 60 * scale, points=[scale], limit=500)[0]
            for sign in (1.0, -1.0)
        )

    return moment(energy) / moment(lambda z: 1.0)


def _pole_fit(log_t: np.ndarray, values: np.ndarray) -> tuple[float, float]:
    """(lambda, B/A) of lambda - 1 / (log t + B/A) by least squares."""
    model = lambda x, lam, shift: lam - 1 / (x + shift)  # noqa: E731
    return tuple(optimize.curve_fit(model, log_t, values, p0=[values[-1], 0.0], maxfev=20000)[0])


def run(seed: int = 0) -> str:
    rng = np.random.default_rng(seed)
    t = N * np.asarray(MULTIPLIERS) / np.log(N)
    data = [(x @ x / N, x @ e / N) for x, e in
            (rng.normal(size=(2, N)) for _ in range(NUM_DATA_SETS))]
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
    return "\n".join(lines)


if __name__ == "__main__":
    print(run())
