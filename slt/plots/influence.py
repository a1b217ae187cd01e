"""Figures for what the local posterior says about the data: the loss kernel and loss gains,
Bayesian influence functions, susceptibilities."""

from __future__ import annotations

import numpy as np
import pandas as pd

from slt.plots.layout import figure_and_axes

# More examples than this on a heat-map axis: no tick labels (they would overlap).
MAX_TICK_LABELS = 40


def _symmetric_limit(values) -> float:
    """The colour scale's half-range: the largest finite |value| (1 when there is none)."""
    finite = np.abs(values[np.isfinite(values)])
    return float(finite.max()) if finite.size and finite.max() > 0 else 1.0


def _label_axis(set_ticks, labels, order) -> None:
    if len(order) <= MAX_TICK_LABELS:
        set_ticks(np.arange(len(order)), [str(labels[i]) for i in order], fontsize=7)
    else:
        set_ticks([])


def _heat_map_and_panel(result, order, axes, *, heat_width: int):
    """The figure, its heat-map axis (left, `heat_width` times as wide as the other), the
    panel's axis beside it (`axes`, a pair, when given) and the examples' order (`order` as
    given, else `result.order()`)."""
    fig, (heat_axis, panel_axis) = figure_and_axes(axes, 1, 2, figsize=(11, 4.8),
                                                   gridspec_kw={"width_ratios": [heat_width, 1]})
    return fig, heat_axis, panel_axis, result.order() if order is None else np.asarray(order)


def plot_loss_kernel(result, *, order=None, axes=None):
    """Left: the correlation of the per-example losses as a heat map, the examples in
    `order` (positions into the result's examples, e.g. sorted by class), by default
    `result.order()` (a hierarchical clustering: blocks are examples the network treats
    alike). Right: every example's loss gain E[l_i] - l_i(w*) in the same order, with +-2
    standard errors. Returns the figure."""
    fig, heat_axis, gain_axis, order = _heat_map_and_panel(result, order, axes, heat_width=3)
    image = heat_axis.imshow(result.correlation[np.ix_(order, order)], cmap="RdBu_r",
                             vmin=-1, vmax=1, interpolation="nearest")
    fig.colorbar(image, ax=heat_axis, label="Corr(ℓ_i, ℓ_j)", shrink=0.8)
    _label_axis(heat_axis.set_xticks, result.labels, order)
    _label_axis(heat_axis.set_yticks, result.labels, order)
    heat_axis.set(title=f"loss kernel (correlation), {len(order)} examples",
                  xlabel="example", ylabel="example")
    positions = np.arange(len(order))
    gain_axis.errorbar(result.loss_gain[order], positions,
                       xerr=2 * result.loss_gain_std_error[order], fmt="o", ms=3, capsize=2)
    gain_axis.axvline(0, color="k", lw=0.8)
    gain_axis.set(ylim=(len(order) - 0.5, -0.5), xlabel="E[ℓ_i] − ℓ_i(w*)",
                  title="loss gain (±2 se)")
    _label_axis(gain_axis.set_yticks, result.labels, order)
    fig.tight_layout()
    return fig


def plot_bif(result, *, query: int = 0, k: int = 5, order=None, axes=None):
    """Left: the BIF -Cov(l_i, l_q) as a heat map, training examples (rows) in `order`
    (positions into the result's training examples), by default `result.order()`, queries as
    columns. Right: the k most supporting (negative) and most
    opposing (positive) training examples of query number `query`, with +-2 standard
    errors. Returns the figure."""
    fig, heat_axis, top_axis, order = _heat_map_and_panel(result, order, axes, heat_width=2)
    limit = _symmetric_limit(result.influence)
    image = heat_axis.imshow(result.influence[order], cmap="RdBu_r", vmin=-limit, vmax=limit,
                             aspect="auto", interpolation="nearest")
    fig.colorbar(image, ax=heat_axis, label="BIF = −Cov(ℓ_i, ℓ_q)", shrink=0.8)
    _label_axis(heat_axis.set_yticks, result.train_labels, order)
    _label_axis(heat_axis.set_xticks, result.query_labels, np.arange(result.influence.shape[1]))
    heat_axis.set(title="Bayesian influence (blue: supports the query)", xlabel="query",
                  ylabel="training example")
    ranked, opposing = result.supporting(query, k), result.opposing(query, k)
    shown = pd.concat([ranked, opposing[~opposing.index.isin(ranked.index)]])
    positions = np.arange(len(shown))
    colors = np.where(shown["influence"] < 0, "C0", "C3")
    top_axis.barh(positions, shown["influence"], xerr=2 * shown["se"], color=colors,
                  capsize=2)
    top_axis.set_yticks(positions, [str(label) for label in shown.index], fontsize=7)
    top_axis.axvline(0, color="k", lw=0.8)
    top_axis.set(ylim=(len(shown) - 0.5, -0.5), xlabel="BIF (±2 se)",
                 title=f"query {result.query_labels[query]}: most supporting / opposing")
    fig.tight_layout()
    return fig


def plot_susceptibilities(result, *, ax=None):
    """chi_{C,S} as a heat map (components as rows, subsets as columns), every cell annotated
    with chi ± se; cells within 2 standard errors of 0 in grey text. Returns the figure."""
    chi, se = result.susceptibility, result.std_error
    fig, ax = figure_and_axes(ax, figsize=(max(4.0, 1.3 * chi.shape[1] + 2.5),
                                           max(3.0, 0.6 * chi.shape[0] + 1.5)))
    limit = _symmetric_limit(chi)
    image = ax.imshow(chi, cmap="RdBu_r", vmin=-limit, vmax=limit, aspect="auto")
    fig.colorbar(image, ax=ax, label="χ = −Cov(φ_C, ΔL_S)")
    for (row, column), value in np.ndenumerate(chi):
        clear = abs(value) > 2 * se[row, column]
        ax.text(column, row, f"{value:.2g}\n±{se[row, column]:.1g}", ha="center", va="center",
                fontsize=7, color="k" if clear else "0.5")
    ax.set_xticks(np.arange(chi.shape[1]), result.subsets)
    ax.set_yticks(np.arange(chi.shape[0]), result.components)
    ax.set(xlabel="subset S", ylabel="component C", title="susceptibilities")
    fig.tight_layout()
    return fig
