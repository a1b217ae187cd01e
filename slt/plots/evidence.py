"""Figures for the evidence estimators: BIC, Laplace, WBIC, the reference F, lambda_hat, compare.

Every function takes the result object, draws on new axes unless `ax`/`axes` are given, and
returns the matplotlib figure.
"""

from __future__ import annotations

import numpy as np

from slt.plots.layout import figure_and_axes

# The methods of a comparison that sit on the free-energy scale: (column, se column, label).
FREE_ENERGY_COLUMNS = (
    ("bic", None, "BIC  n L_n(ŵ) + (d/2) log n"),
    ("laplace", None, "Laplace"),
    ("wbic", "wbic_se", "WBIC"),
    ("free_energy", "free_energy_se", "reference F (SMC)"),
    ("nested", "nested_se", "reference F (nested sampling)"),
    ("singular_bic", "singular_bic_se", "n L_n(ŵ) + λ̂ log n"),
)


def plot_bic(result, *, ax=None):
    """The BIC's two terms, n L_n(ŵ) and (d/2) log n, as a stacked bar."""
    fig, ax = figure_and_axes(ax, figsize=(3.5, 4))
    ax.bar([0], [result.nll], color="C0", label="n L_n(ŵ)")
    ax.bar([0], [result.penalty], bottom=[result.nll], color="C1", label="(d/2) log n")
    ax.set(xticks=[], ylabel="free energy (nats)",
           title=f"BIC = {result.free_energy:.5g} (d={result.dim}, n={result.n})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_laplace(result, *, axes=None):
    """Left: eigenvalues of the Hessian (log scale), the numerical tolerance dashed. Right: the
    prior's share of the curvature per direction, the 1/sqrt(n) threshold dashed."""
    fig, axes = figure_and_axes(axes, 1, 2, figsize=(10, 3.8))
    spectrum, share = axes
    index = np.arange(result.eigenvalues.size)
    magnitude = np.abs(result.eigenvalues)
    colors = np.where(result.eigenvalues > 0, "C0", "C3")
    spectrum.scatter(index, np.maximum(magnitude, np.finfo(float).tiny), c=colors, zorder=3)
    spectrum.set(yscale="log", xlabel="eigendirection (ascending)", ylabel="|eigenvalue| of H",
                 title=f"Hessian spectrum: rank {result.rank}/{result.dim}")
    spectrum.axhline(1e-10 * magnitude.max(), color="k", ls="--", lw=1, label="tolerance")
    spectrum.legend(fontsize=8)
    share.scatter(np.arange(result.prior_share.size), result.prior_share, color="C1", zorder=3)
    if result.data_rank < result.rank:
        share.set_title(f"prior's share of curvature: {result.rank - result.data_rank} "
                        f"direction(s) singular")
    else:
        share.set_title("prior's share of curvature")
    share.set(xlabel="direction", ylabel="share")
    fig.tight_layout()
    return fig


def plot_wbic(result, *, axes=None):
    """Left: n L_n per draw and chain. Right: its histogram, the estimate ± 2 se shaded."""
    fig, axes = figure_and_axes(axes, 1, 2, figsize=(11, 3.8))
    trace, histogram = axes
    for chain, values in enumerate(result.nll):
        trace.plot(values, lw=0.5, alpha=0.8, label=f"chain {chain}")
    trace.axhline(result.wbic, color="k", ls="--", lw=1, label="WBIC")
    trace.set(xlabel="draw", ylabel="n L_n(w)",
              title=f"tempered draws, β = {result.beta:.3g} (R-hat {result.rhat:.3f})")
    if result.num_chains <= 8:
        trace.legend(fontsize=7, ncol=2)
    histogram.hist(result.nll.ravel(), bins=50, color="C0", alpha=0.7)
    histogram.axvspan(result.wbic - 2 * result.std_error, result.wbic + 2 * result.std_error,
                      color="C3", alpha=0.3, label=f"WBIC {result.wbic:.5g} ± 2 se")
    histogram.set(xlabel="n L_n(w)", ylabel="draws")
    histogram.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_free_energy(result, *, axes=None):
    """Tempered runs: left, E_beta[n L_n] along each copy's ladder (log beta); right, log Z(beta)
    accumulated, with the final estimates. Nested sampling: each run's F (± its own error)
    and the merged estimate (± its standard error) as a band."""
    if result.method == "nested":
        return _plot_nested(result, axes)
    if hasattr(result.run, "bridge_errors"):  # the fast path's DrawsRun
        return _plot_draws(result, axes)
    fig, axes = figure_and_axes(axes, 1, 2, figsize=(11, 3.8))
    expectation, path = axes
    run = result.run
    for copy in range(run.betas.shape[0]):
        keep = np.isfinite(run.betas[copy]) & (run.betas[copy] > 0)
        expectation.plot(run.betas[copy][keep], run.mean_nll[copy][keep], marker=".", ms=3,
                         lw=0.8, label=f"copy {copy}")
        path.plot(run.betas[copy][keep], run.log_evidence_path[copy][keep], marker=".", ms=3,
                  lw=0.8)
    expectation.set(xscale="log", yscale="symlog", xlabel="β", ylabel="E_β[n L_n]",
                    title=f"tempering ladders ({np.mean(run.num_stages):.0f} stages)")
    expectation.legend(fontsize=7)
    path.set(xscale="log", xlabel="β", ylabel="log Z(β)",
             title=f"F = {result.free_energy:.5g} ± {result.std_error:.2g} ({result.method})")
    fig.tight_layout()
    return fig


def _plot_draws(result, ax):
    """The fast path: each proposal's importance and bridge estimates of F (± 2 se), and the
    reported F (± 2 se) as a band."""
    fig, ax = figure_and_axes(ax, figsize=(6, 4))
    run = result.run
    labels = ["IS q_A", "IS q_B", "bridge q_A", "bridge q_B"]
    values = [-r.log_evidence for r in run.importance] + list(-run.bridge)
    errors = [r.std_error for r in run.importance] + list(run.bridge_errors)
    ax.errorbar(range(4), values, yerr=2 * np.asarray(errors), fmt="o", capsize=3,
                label="each estimate ± 2 se")
    ax.axhspan(result.free_energy - 2 * result.std_error,
               result.free_energy + 2 * result.std_error, color="C3", alpha=0.2,
               label=f"F = {result.free_energy:.6g} ± {result.std_error:.2g}")
    ax.set(xticks=range(4), xticklabels=labels, ylabel="F = -log Z",
           title=f"from posterior draws (Pareto k̂ {run.pareto_k:.2f})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _plot_nested(result, ax):
    fig, ax = figure_and_axes(ax, figsize=(6, 4))
    run = result.run
    runs = np.arange(len(run.log_evidence))
    ax.errorbar(runs, -run.log_evidence, yerr=2 * run.log_evidence_std_error, fmt="o",
                capsize=3, label="each run ± 2 se")
    ax.axhspan(result.free_energy - 2 * result.std_error,
               result.free_energy + 2 * result.std_error, color="C3", alpha=0.2,
               label=f"merged: F = {result.free_energy:.6g} ± {result.std_error:.2g}")
    ax.set(xticks=runs, xlabel="run", ylabel="F = -log Z",
           title=f"nested sampling (H = {run.information:.3g} nats)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_rlct(result, *, ax=None):
    """E_beta[n L_n] against 1/beta (± 2 se) with the fitted curve; the slope is lambda."""
    fig, ax = figure_and_axes(ax, figsize=(6, 4))
    inverse = 1.0 / result.betas
    ax.errorbar(inverse, result.expected_nll, yerr=2 * result.expected_nll_std_error, fmt="o",
                capsize=3, label="E_β[n L_n] ± 2 se")
    grid = np.linspace(inverse.min(), inverse.max(), 200)
    ax.plot(grid, result.fitted(1.0 / grid), color="C3",
            label=f"fit: λ̂ = {result.rlct:.3g} ± {result.std_error:.2g}")
    ax.set(xlabel="1/β", ylabel="E_β[n L_n]", title="learning coefficient from temperatures")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_comparison(result, *, relative: bool = True, axes=None):
    """Free energy per model and method with ±2 se error bars; PSIS-LOO beside it if run.

    With `relative`, each method's values are shifted by that method's minimum over models, so
    that the differences between models, which decide the choice, are visible on one scale.
    """
    table = result.table
    has_loo = "elpd_loo" in table.columns
    fig, axes = figure_and_axes(axes, 1, 2 if has_loo else 1,
                                figsize=(12 if has_loo else 7, 4.2))
    main = axes[0] if has_loo else axes
    positions = np.arange(len(table))
    columns = [c for c in FREE_ENERGY_COLUMNS if c[0] in table.columns]
    width = 0.8 / max(len(columns), 1)
    for offset, (column, se_column, label) in enumerate(columns):
        values = table[column].to_numpy(dtype=float)
        shift = np.nanmin(values) if relative else 0.0
        errors = None if se_column is None else 2 * table[se_column].to_numpy(dtype=float)
        main.errorbar(positions + (offset - (len(columns) - 1) / 2) * width, values - shift,
                      yerr=errors, fmt="o", capsize=3, label=label)
    main.set_xticks(positions, table.index, rotation=30 if len(table) > 4 else 0)
    main.set(ylabel="F − min over models (nats)" if relative else "free energy (nats)",
             title="free energy per model (lower is better; ±2 se)")
    main.legend(fontsize=8)
    if has_loo:
        loo = axes[1]
        loo.errorbar(positions, table["elpd_loo"], yerr=2 * table["elpd_loo_se"], fmt="s",
                     capsize=3, color="C5")
        loo.set_xticks(positions, table.index, rotation=30 if len(table) > 4 else 0)
        loo.set(ylabel="elpd_loo", title="PSIS-LOO (higher is better; ±2 se)")
    fig.tight_layout()
    return fig
