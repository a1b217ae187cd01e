"""`fit_map` against closed forms: least squares (MLE) and ridge (MAP) for linear regression."""

from __future__ import annotations

import time

import jax
import jax.numpy as jnp
import numpy as np

from slt import fit_map, models


def run(key=None) -> str:
    key = jax.random.key(0) if key is None else key
    rows = [
        "| d | n | objective | max abs error vs closed form | restarts agreeing | time (s) |",
        "|---|---|---|---|---|---|",
    ]
    for d, n in [(5, 200), (20, 2000)]:
        spec = models.linear_regression(d, noise_scale=0.5, prior_precision=2.0)
        truth = {"w": jax.random.normal(key, (d,))}
        data = spec.simulate(key, truth, n)
        problem = spec.problem(data)
        X, y = np.asarray(data["x"]), np.asarray(data["y"])
        closed_forms = {
            "mle": np.linalg.lstsq(X, y, rcond=None)[0],
            "map": np.linalg.solve(2.0 * np.eye(d) + X.T @ X / 0.25, X.T @ y / 0.25),
        }
        for objective, exact in closed_forms.items():
            start = time.perf_counter()
            fit = fit_map(problem, key, prior=objective == "map")
            elapsed = time.perf_counter() - start
            error = float(jnp.max(jnp.abs(fit.values["w"] - exact)))
            rows.append(
                f"| {d} | {n} | {objective} | {error:.1e} | "
                f"{fit.num_agree}/{fit.num_restarts} | {elapsed:.1f} |"
            )
    return (
        "## fit_map against closed forms\n\n"
        "Linear regression (noise sd 0.5, prior precision 2), float64: the MLE is least squares, "
        "the MAP is ridge. Time includes compilation.\n\n" + "\n".join(rows) + "\n"
    )
