"""A short end-to-end run of what slt has today: simulate, wrap in a Problem, fit, and set the
fit beside the exact learning coefficient and BIC's d/2 (`python -m slt.demo`, `make demo`).

For each model: data from a singular truth, the MAP by `fit_map`, n L_n(w_hat), the parameter
count d, BIC's penalty coefficient d/2 and the exact learning coefficient lambda (TRUTH.md).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pandas as pd

from slt import fit_map, models, truth


def _cases(key):
    rrr_truth = models.random_low_rank(key, [5, 3, 5], 1)
    dln_truth = models.random_low_rank(key, [5, 3, 3, 5], 1)
    return [
        (models.linear_regression(3), {"w": jnp.array([1.0, -1.0, 0.5])}, truth.regular_rlct(3)),
        (models.product_model(), {"w": jnp.zeros(2)}, truth.product_model_rlct(True)),
        (models.normal_crossing((1, 2)), {"w": jnp.zeros(2)}, truth.normal_crossing_rlct((1, 2))),
        (models.two_component_mixture(), {"a": 0.0, "b": 0.0}, truth.two_component_mixture_rlct()),
        (models.reduced_rank_regression(5, 3, 5), rrr_truth, truth.rrr_rlct(5, 5, 3, 1)),
        (models.deep_linear_network([5, 3, 3, 5]), dln_truth, truth.dln_rlct([5, 3, 3, 5], 1)),
        (
            models.two_layer_network(1, 3, 1, bias=False),
            {"V": jnp.zeros((3, 1)), "U": jnp.zeros((1, 3))},
            truth.tanh_rlct(3),
        ),
    ]


def main(n: int = 1000) -> pd.DataFrame:
    """Fit every case and print the table; returns it."""
    jax.config.update("jax_enable_x64", True)
    key = jax.random.key(0)
    rows = []
    for spec, true_values, rlct in _cases(key):
        problem = spec.problem(spec.simulate(key, true_values, n))
        fit = fit_map(problem, key)
        rows.append(
            {
                "model": spec.name,
                "d": problem.dim,
                "n L_n(w_hat)": -fit.loglik,
                "BIC d/2": problem.dim / 2,
                "exact lambda": str(rlct.value),
                "m": rlct.multiplicity,
                "restarts agreeing": f"{fit.num_agree}/{fit.num_restarts}",
            }
        )
        print(f"fitted {spec.name}", flush=True)
    table = pd.DataFrame(rows)
    print(f"\nn = {n}: BIC charges d/2 log n, the free energy charges lambda log n.\n")
    print(table.to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    return table


if __name__ == "__main__":
    main()
