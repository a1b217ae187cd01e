"""Figures for Fisher geometry: spectra, 1-D and 2-D scans, and slices along directions.

Scans are drawn as log det I and rank, never raw det I: det depends on the coordinates
(it scales by det(J)^2 under a reparametrisation); its zero set, the rank and the singular
set outlined in red do not. A slice (`fisher_slice`) is drawn as its loss beside log pdet I
over the same axes, with the rank: a twin axis in 1-D, red contour lines where it drops in
2-D.
"""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

from slt.plots.layout import figure_and_axes

__all__ = ["plot_scan", "plot_spectral_density", "plot_spectrum"]

_SINGULAR_COLOR = "C3"


def plot_spectrum(result, *, ax=None):
    """Eigenvalues (largest first) on a log scale with the rank threshold; returns the figure.

    `result` is a `FisherResult` or a `LanczosSpectrum` (anything with `eigenvalues`, `rank`,
    `rank_tol` and `dim`; a Lanczos spectrum has num_steps <= d Ritz values). Eigenvalues at or
    below zero are drawn at the bottom of the axis, as open markers.
    """
    fig, ax = figure_and_axes(ax, figsize=(6, 3.6))
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
    fig, ax = figure_and_axes(ax, figsize=(6, 3.6))
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


_LOSS_LABELS = {"nll": "L_n", "kl": "KL from params"}


def _loss_label(scan) -> str:
    return _LOSS_LABELS.get(scan.loss_kind, "loss")


def _rank_label(scan) -> str:
    return "rank (lower bound)" if scan.method == "matrix_free" else "rank"


def _no_loss(ax) -> None:
    ax.text(0.5, 0.5, "no exact loss for this model", ha="center", va="center",
            transform=ax.transAxes)


def _plot_slice_1d(scan, axes):
    loss_axis, log_axis = axes
    name = scan.axes[0]
    grid = scan.dataset[name].values
    if "loss" in scan.dataset:
        loss_axis.plot(grid, scan.dataset["loss"].values, color="k")
    else:
        _no_loss(loss_axis)
    loss_axis.set(ylabel=_loss_label(scan), title=f"{scan.model_name}: slice along {name}")
    log_axis.plot(grid, scan.dataset["log_pdet"].values, color="C0")
    log_axis.set(xlabel=name, ylabel="log pdet I")
    rank_axis = log_axis.twinx()
    rank_axis.step(grid, scan.dataset["rank"].values, where="mid", color="C1", lw=1)
    rank_axis.set_ylabel(_rank_label(scan), color="C1")
    for value in grid[scan.singular().values]:
        for ax in axes:
            ax.axvline(value, color=_SINGULAR_COLOR, lw=0.8, alpha=0.6)


def _rank_contours(ax, x, y, ranks):
    """Red lines between regions of different rank, labelled by the rank below them."""
    seen = np.unique(ranks)
    if seen.size > 1:
        lines = ax.contour(x, y, ranks.T, levels=seen[:-1] + 0.5, colors=_SINGULAR_COLOR,
                           linewidths=1.0)
        ax.clabel(lines, fmt=lambda level: f"rank {level - 0.5:.0f}", fontsize=7)


def _plot_slice_2d(scan, axes):
    loss_axis, log_axis = axes
    x_name, y_name = scan.axes
    x, y = scan.dataset[x_name].values, scan.dataset[y_name].values
    ranks = scan.dataset["rank"].values
    panels = [(log_axis, "log_pdet", "log pdet I")]
    if "loss" in scan.dataset:
        panels.append((loss_axis, "loss", _loss_label(scan)))
    else:
        _no_loss(loss_axis)
    for ax, variable, label in panels:
        values = np.ma.masked_invalid(scan.dataset[variable].values)
        image = ax.pcolormesh(x, y, values.T, shading="nearest")
        ax.figure.colorbar(image, ax=ax, label=label)
    for ax, title in ((loss_axis, _loss_label(scan)), (log_axis, "log pdet I")):
        _rank_contours(ax, x, y, ranks)
        ax.set(xlabel=x_name, ylabel=y_name,
               title=f"{title} ({_rank_label(scan)} drops at red lines)")
    loss_axis.figure.suptitle(f"{scan.model_name}: slice through params")


def plot_scan(scan, *, axes=None):
    """A `FisherScan`: 1-D, log det and rank against the coordinate (stacked); 2-D, maps of
    log det and of the rank side by side, the singular set (rank < d) outlined in red.
    A slice along directions: 1-D, the loss above log pdet I with the rank on a twin axis;
    2-D, maps of the loss and of log pdet I side by side, red contour lines where the rank
    changes. Returns the figure."""
    one = len(scan.axes) == 1
    fig, axes = (figure_and_axes(axes, 2, 1, figsize=(6, 5), sharex=True) if one
                 else figure_and_axes(axes, 1, 2, figsize=(11, 4.2)))
    if scan.directions is None:
        (_plot_scan_1d if one else _plot_scan_2d)(scan, axes)
    else:
        (_plot_slice_1d if one else _plot_slice_2d)(scan, axes)
    fig.tight_layout()
    return fig

