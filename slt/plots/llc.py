"""Figures for the local learning coefficient: traces, per-chain estimates, calibration."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np


def plot_llc(result, *, axes=None):
    """Left: loss trace of every chain with L_n(w*) dashed. Right: lambda_hat per chain with the
    pooled estimate and its +-2 standard-error band. Returns the figure."""
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [3, 1]})
    else:
        fig = axes[0].figure
    trace_axis, chain_axis = axes
    draws = np.arange(result.num_burnin, result.num_burnin + result.num_draws)
    for chain, loss in enumerate(result.loss_trace):
        trace_axis.plot(draws, loss, lw=0.6, alpha=0.8, label=f"chain {chain}")
    trace_axis.axhline(result.init_loss, color="k", ls="--", lw=1, label="L_n(w*)")
    trace_axis.set(xlabel="step", ylabel="minibatch loss L_b(w)",
                   title=f"SGLD loss traces (step size {result.step_size:.2g})")
    if result.num_chains <= 8:
        trace_axis.legend(fontsize=7, ncol=2)
    chains = np.arange(result.num_chains)
    chain_axis.scatter(chains, result.llc_per_chain, color="C0", zorder=3)
    chain_axis.axhline(result.llc_mean, color="C3", label=f"λ̂ = {result.llc_mean:.3g}")
    chain_axis.axhspan(result.llc_mean - 2 * result.llc_std_error,
                       result.llc_mean + 2 * result.llc_std_error, color="C3", alpha=0.15)
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
        llc_axis.errorbar(rows["step_size"], rows["llc"], yerr=2 * rows["se"], marker="o",
                          ms=3, capsize=2, label=f"γ = {gamma:g}")
        acceptance_axis.plot(rows["step_size"], rows["mala_acceptance"], marker="o", ms=3,
                             label=f"γ = {gamma:g}")
    for axis in axes:
        axis.axvline(calibration.step_size, color="k", ls="--", lw=1, label="chosen")
        axis.set_xscale("log")
        axis.set_xlabel("step size")
        axis.legend(fontsize=8)
    llc_axis.set(ylabel="λ̂", title="λ̂ against step size")
    acceptance_axis.set(ylabel="MALA acceptance", ylim=(0, 1.05),
                        title="acceptance (criterion: ≥ threshold, stationary)")
    fig.tight_layout()
    return fig
