"""Figures for optimisation results: `FitResult` (restarts) and `NaturalGradientResult` (steps).

Every function takes the result, draws on new axes unless `ax` is given, and returns the
matplotlib figure.
"""

from __future__ import annotations

import numpy as np

from slt.plots.layout import figure_and_axes

__all__ = ["plot_fit", "plot_natural_gradient"]

# The smallest excess objective drawn on the natural gradient's log axis (float64 rounding of
# an O(1) objective per example); an exact zero, at the best step, is drawn there.
_EXCESS_FLOOR = 1e-16


def plot_fit(result, *, ax=None):
    """The restarts of a `FitResult`, best first, as their gap below the best objective.

    The y axis is best - objective in nats (log_joint for MAP, loglik for MLE) on a symmetric
    log scale that is linear below `agree_tol`, so that both the band of restarts counted as
    agreeing (shaded, 0 .. agree_tol) and distant local optima are visible. Restarts that
    diverged (NaN objective) are counted in the title. Returns the figure.
    """
    fig, ax = figure_and_axes(ax, figsize=(6, 3.8))
    objectives = np.asarray(result.restart_objectives, dtype=np.float64)
    finite = np.sort(objectives[np.isfinite(objectives)])[::-1]
    gap = result.best - finite
    order = np.arange(1, finite.size + 1)
    agree = gap <= result.agree_tol
    ax.axhspan(0.0, result.agree_tol, color="C0", alpha=0.15,
               label=f"agree_tol = {result.agree_tol:g} nats")
    ax.axhline(0.0, color="k", lw=1, label=f"best {result.objective}: {result.best:.6g}")
    ax.plot(order[agree], gap[agree], "o", color="C0", label="agrees with the best")
    ax.plot(order[~agree], gap[~agree], "o", color="C3", label="another optimum")
    ax.set_yscale("symlog", linthresh=result.agree_tol)
    diverged = objectives.size - finite.size
    ax.set(xlabel="restart (best first)", ylabel="best − objective (nats)",
           title=f"{result.num_agree}/{result.num_restarts} restarts agree"
           + (f", {diverged} diverged" if diverged else ""))
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_natural_gradient(result, *, ax=None):
    """J(w) - min J over the steps of a `NaturalGradientResult`, on a log scale (J: the
    per-example objective, nats). Returns the figure."""
    fig, ax = figure_and_axes(ax, figsize=(5, 3.5))
    history = result.history
    excess = history["objective"] - history["objective"].min()
    ax.semilogy(history["step"], np.maximum(excess, _EXCESS_FLOOR), marker="o", ms=3)
    ax.set_xlabel("natural-gradient step")
    ax.set_ylabel("J(w) - min J  (nats per example)")
    ax.set_title(f"{result.solver} natural gradient, {result.fisher_kind} Fisher")
    fig.tight_layout()
    return fig
