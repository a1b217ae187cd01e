"""Figures for Fisher geometry: spectra, and 1-D and 2-D scans.

Scans are drawn as log det I and rank, never raw det I: det depends on the coordinates
(it scales by det(J)^2 under a reparametrisation); its zero set, the rank and the singular
set outlined in red do not.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["plot_scan", "plot_spectral_density", "plot_spectrum"]

_SINGULAR_COLOR = "C3"


def plot_spectrum(result, *, ax=None):
    """Eigenvalues (largest first) on a log scale with the rank threshold; returns the figure.

    `result` is a `FisherResult` or a `LanczosSpectrum` (anything with `eigenvalues`, `rank`,
    `rank_tol` and `dim`; a Lanczos spectrum has num_steps <= d Ritz values). Eigenvalues at or
    below zero are drawn at the bottom of the axis, as open markers.
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.6))
    else:
        fig = ax.figure
    values = np.sort(np.asarray(result.eigenvalues))[::-1]
    largest = values[0] if values[0] > 0 else 1.0
    floor = largest * min(result.rank_tol, 1e-18) * 1e-2
    index = np.arange(1, values.size + 1)
    positive = values > floor
    threshold = result.rank_tol * largest
    counted = values > threshold
    ax.semilogy(index[counted], values[counted], "o", ms=4, color="C0", label="counted by rank")
    ax.semilogy(index[positive & ~counted], values[positive & ~counted], "o", ms=4,
                color=_SINGULAR_COLOR, label="below threshold")
    ax.semilogy(index[~positive], np.full((~positive).sum(), floor), "o", ms=4, mfc="none",
                color=_SINGULAR_COLOR, label="<= 0 (rounding)")
    ax.axhline(threshold, color="k", ls="--", lw=1, label=f"{result.rank_tol:g} x largest")
    ax.set(xlabel="index (largest first)", ylabel="eigenvalue",
           title=f"Fisher spectrum: rank {result.rank} of {result.dim}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_spectral_density(result, *, ax=None):
    """The stochastic-Lanczos estimate of the eigenvalue density, with the rank threshold.

    `result` is a `FisherSummary`: a histogram of log10 of its Ritz values, each weighted by
    dim * tau^2 / num_probes, so that the bars count eigenvalues (their total is the size of
    the operator). Ritz values at or below zero are left out.
    """
    if ax is None:
        fig, ax = plt.subplots(figsize=(6, 3.6))
    else:
        fig = ax.figure
    values, weights = np.ravel(result.ritz_values), np.ravel(result.ritz_weights)
    size = result.num_outputs if result.space == "outputs" else result.dim
    positive = values > 0
    ax.hist(np.log10(values[positive]), bins=40,
            weights=weights[positive] * size / result.num_probes, color="C0")
    threshold = result.rank_tol * result.max_eigenvalue
    ax.axvline(np.log10(threshold), color="k", ls="--", lw=1,
               label=f"{result.rank_tol:g} x largest")
    ax.set(xlabel="log10 eigenvalue", ylabel="eigenvalues (estimated count)",
           title=f"Fisher spectral density (SLQ): rank ~ {result.rank:.1f} of {result.dim}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _plot_scan_1d(scan, axes):
    log_axis, rank_axis = axes
    name = scan.axes[0]
    grid = scan.dataset[name].values
    log_det = scan.dataset["log_det"].values
    singular = scan.singular().values
    finite = np.isfinite(log_det)
    log_axis.plot(grid[finite], log_det[finite], color="C0", label="log det I")
    log_axis.plot(grid, scan.dataset["log_pdet"].values, color="C1", ls="--", lw=1,
                  label="log pseudo-det")
    for value in grid[singular]:
        log_axis.axvline(value, color=_SINGULAR_COLOR, lw=0.8, alpha=0.6)
    log_axis.set(ylabel="log det I", title=f"{scan.model_name}: log det I along {name}")
    log_axis.legend(fontsize=8)
    rank_axis.step(grid, scan.dataset["rank"].values, where="mid", color="C0")
    rank_axis.plot(grid[singular], scan.dataset["rank"].values[singular], "o", ms=3,
                   color=_SINGULAR_COLOR, label=f"rank < d = {scan.dim}")
    rank_axis.set(xlabel=name, ylabel="rank",
                  ylim=(-0.5, scan.dim + 0.5), yticks=range(scan.dim + 1)
                  if scan.dim <= 12 else None)
    if singular.any():
        rank_axis.legend(fontsize=8)


_MAX_DOTS = 50  # singular points drawn as dots too, when so few that a contour may hide them


def _outline(ax, x, y, singular):
    """The singular set: a red contour around it (and its points as dots when there are few)."""
    if singular.any() and not singular.all():
        ax.contour(x, y, singular.T.astype(float), levels=[0.5], colors=_SINGULAR_COLOR,
                   linewidths=1.2)
    rows, cols = np.nonzero(singular)
    if rows.size <= _MAX_DOTS:
        ax.plot(x[rows], y[cols], ".", ms=3, color=_SINGULAR_COLOR)


def _plot_scan_2d(scan, axes):
    log_axis, rank_axis = axes
    x_name, y_name = scan.axes
    x, y = scan.dataset[x_name].values, scan.dataset[y_name].values
    singular = scan.singular().values
    log_det = np.ma.masked_invalid(scan.dataset["log_det"].values)
    colormap = plt.get_cmap("viridis").with_extremes(bad="0.75")
    image = log_axis.pcolormesh(x, y, log_det.T, cmap=colormap, shading="nearest")
    log_axis.figure.colorbar(image, ax=log_axis, label="log det I (grey: -inf)")
    ranks = scan.dataset["rank"].values
    rank_image = rank_axis.pcolormesh(
        x, y, ranks.T, cmap=plt.get_cmap("viridis", scan.dim + 1), vmin=-0.5,
        vmax=scan.dim + 0.5, shading="nearest",
    )
    rank_axis.figure.colorbar(rank_image, ax=rank_axis, label="rank",
                              ticks=range(scan.dim + 1) if scan.dim <= 12 else None)
    for ax, title in ((log_axis, "log det I"), (rank_axis, "rank (singular set in red)")):
        _outline(ax, x, y, singular)
        ax.set(xlabel=x_name, ylabel=y_name, title=title)
    log_axis.figure.suptitle(scan.model_name)


def plot_scan(scan, *, axes=None):
    """A `FisherScan`: 1-D, log det and rank against the coordinate (stacked); 2-D, maps of
    log det and of the rank side by side, the singular set (rank < d) outlined in red.
    Returns the figure."""
    if axes is None:
        if len(scan.axes) == 1:
            fig, axes = plt.subplots(2, 1, figsize=(6, 5), sharex=True)
        else:
            fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    fig = axes[0].figure
    (_plot_scan_1d if len(scan.axes) == 1 else _plot_scan_2d)(scan, axes)
    fig.tight_layout()
    return fig

