"""Figures for the local learning coefficient: traces, per-chain estimates, calibration."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def plot_llc(result, *, axes=None):
    """Left: the per-draw estimate n beta (L_b(w_t) - L_b(w*)) of every chain (thin) and its
    running mean (thick), the pooled lambda_hat dashed. Right: lambda_hat per chain with the
    pooled estimate and its +-2 standard-error band. Returns the figure."""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [3, 1]})
    else:
        fig = axes[0].figure
    trace_axis, chain_axis = axes
    draws = np.arange(result.num_warmup, result.num_warmup + result.num_samples)
    for chain, values in enumerate(result.llc_trace()):
        line = trace_axis.plot(draws, values, lw=0.4, alpha=0.35)[0]
        running = np.cumsum(values) / np.arange(1, values.size + 1)
        trace_axis.plot(draws, running, lw=1.8, color=line.get_color(), label=f"chain {chain}")
    trace_axis.axhline(result.llc_mean, color="k", ls="--", lw=1, label="λ̂")
    trace_axis.set(xlabel="step", ylabel="nβ (L_b(w) − L_b(w*))",
                   title=f"per-draw estimates and running means (step size {result.step_size:.2g})")
    if result.num_chains <= 8:
        trace_axis.legend(fontsize=7, ncol=2)
    chains = np.arange(result.num_chains)
    chain_axis.scatter(chains, result.llc_per_chain, color="C0", zorder=3)
    chain_axis.axhline(result.llc_mean, color="C3", label=f"λ̂ = {result.llc_mean:.3g}")
    chain_axis.axhspan(result.llc_mean - 2 * result.std_error,
                       result.llc_mean + 2 * result.std_error, color="C3", alpha=0.15)
    chain_axis.set(xlabel="chain", ylabel="λ̂", title="λ̂ per chain (±2 se)", xticks=chains)
    chain_axis.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_calibration(calibration, *, axes=None):
    """lambda_hat (+-2 se) and MALA acceptance against step size, one line per gamma; the
    chosen step size marked. Returns the figure."""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    else:
        fig = axes[0].figure
    llc_axis, acceptance_axis = axes
    for gamma, rows in calibration.table.groupby("gamma"):
        line = llc_axis.errorbar(rows["step_size"], rows["llc"], yerr=2 * rows["se"], marker="o",
                                 ms=3, capsize=2, label=f"γ = {gamma:g}")
        acceptance_axis.plot(rows["step_size"], rows["mala_acceptance"], marker="o", ms=3,
                             label=f"γ = {gamma:g}")
        failing = rows[~rows["passes"]]
        color = line[0].get_color()
        for axis, column in ((llc_axis, "llc"), (acceptance_axis, "mala_acceptance")):
            axis.scatter(failing["step_size"], failing[column], marker="x", color=color, s=40,
                         zorder=3, label="fails the criterion" if gamma == rows["gamma"].min()
                         else None)
    for axis in axes:
        axis.axvline(calibration.step_size, color="k", ls="--", lw=1, label="chosen")
        axis.set_xscale("log")
        axis.set_xlabel("step size")
        axis.legend(fontsize=8)
    llc_axis.set(ylabel="λ̂", title="λ̂ against step size")
    acceptance_axis.set(ylabel="MALA acceptance", ylim=(0, 1.05),
                        title="MALA acceptance (× = fails the calibration criterion)")
    fig.tight_layout()
    return fig
