"""Figure for the singular BIC (`slt.estimators.evidence.sbic.SBICResult`): free energies and
posterior.

The function takes the result, draws on new axes unless `axes` are given, and returns the
matplotlib figure.
"""

from __future__ import annotations

import numpy as np

from slt.plots.layout import figure_and_axes


def plot_sbic(result, *, axes=None):
    """Left: free energy -sBIC (and BIC, when d is known) minus that of the first model, per
    model (lower is better). Right: the posterior model probabilities of sBIC."""
    fig, axes = figure_and_axes(axes, 1, 2, figsize=(10, 3.8))
    energies, posterior = axes
    index = np.arange(len(result.names))
    energies.plot(index, result.free_energy - result.free_energy[0], "o-", color="C0",
                  label="sBIC  -log L'(M_j)")
    if result.bic is not None:
        energies.plot(index, result.bic - result.bic[0], "s--", color="C1",
                      label="BIC  n L_n(ŵ) + (d/2) log n")
    energies.set(xticks=index, xticklabels=result.names, ylabel="free energy - first (nats)",
                 title=f"n = {result.n}: sBIC selects {result.selected}")
    energies.legend(fontsize=8)
    posterior.bar(index, result.posterior, color="C0")
    posterior.set(xticks=index, xticklabels=result.names, ylim=(0, 1),
                  ylabel="posterior probability", title="sBIC posterior over models")
    fig.tight_layout()
    return fig
