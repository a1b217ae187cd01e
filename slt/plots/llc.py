"""Figures for the local learning coefficient: traces, per-chain estimates, calibration, the
weight-refined table over parts, the trajectory over training checkpoints."""

from __future__ import annotations

import numpy as np

from slt.plots.layout import figure_and_axes


def plot_llc(result, *, axes=None):
    """Left: the per-draw estimate n beta (L_b(w_t) - L_b(w*)) of every chain (thin) and its
    running mean (thick), the pooled lambda_hat dashed. Right: lambda_hat per chain with the
    pooled estimate and its +-2 standard-error band. Returns the figure."""
    fig, axes = figure_and_axes(axes, 1, 2, figsize=(11, 3.8),
                                gridspec_kw={"width_ratios": [3, 1]})
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
    chosen step size marked, its interval shaded. Returns the figure."""
    fig, axes = figure_and_axes(axes, 1, 2, figsize=(11, 3.8))
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
    low, high = calibration.interval
    for axis in axes:
        axis.axvline(calibration.step_size, color="k", ls="--", lw=1, label="chosen")
        if high > low:
            axis.axvspan(low, high, color="k", alpha=0.08, label="its interval")
        axis.set_xscale("log")
        axis.set_xlabel("step size")
        axis.legend(fontsize=8)
    llc_axis.set(ylabel="λ̂", title="λ̂ against step size")
    acceptance_axis.set(ylabel="MALA acceptance", ylim=(0, 1.05),
                        title="MALA acceptance (× = fails the calibration criterion)")
    fig.tight_layout()
    return fig


def plot_llc_table(table, *, reference=None, ax=None):
    """lambda_hat of every part (+-2 standard errors) against its regular value d_V / 2 (open
    marks); `reference`: exact values per part (a sequence in the table's order), drawn as
    crosses. Returns the figure."""
    fig, ax = figure_and_axes(ax, figsize=(max(4.0, 1.2 * len(table.parts) + 2), 3.8))
    positions = np.arange(len(table.parts))
    means = np.array([result.llc_mean for result in table.results])
    errors = np.array([2 * result.std_error for result in table.results])
    ax.errorbar(positions, means, yerr=errors, fmt="o", color="C0", capsize=3,
                label="λ̂ (±2 se)", zorder=3)
    ax.scatter(positions, [result.sampled_weights / 2 for result in table.results],
               facecolors="none", edgecolors="C7", label="d_V / 2 (regular)")
    if reference is not None:
        ax.scatter(positions, reference, marker="x", color="C3", s=50, label="exact", zorder=4)
    ax.set_xticks(positions, table.parts, rotation=30 if len(table.parts) > 4 else 0)
    ax.set(ylabel="λ̂ of the part", title="weight-refined LLC per part")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_llc_trajectory(trajectory, *, reference=None, axes=None):
    """Top: lambda_hat (+-2 standard errors) at every checkpoint against the training step;
    `reference` (exact values per checkpoint) as a step line. Bottom: L_n(w*) at the
    checkpoints (log scale when positive). Returns the figure."""
    fig, (llc_axis, loss_axis) = _trajectory_axes(axes, height=5.5)
    steps = trajectory.steps
    llc_axis.errorbar(steps, trajectory.llc_means, yerr=2 * trajectory.std_errors, fmt="o-",
                      ms=3, lw=1, capsize=2, label="λ̂ (±2 se)")
    if reference is not None:
        llc_axis.step(steps, reference, where="mid", color="C3", lw=1.2, label="exact")
    flagged = np.array([bool(result.warnings) for result in trajectory.results])
    if flagged.any():
        llc_axis.scatter(steps[flagged], trajectory.llc_means[flagged], marker="x", color="k",
                         s=40, zorder=4, label="with warnings")
    llc_axis.set(ylabel="λ̂", title="local learning coefficient along training")
    llc_axis.legend(fontsize=8)
    loss_axis.plot(steps, trajectory.losses, "o-", ms=3, lw=1, color="C2")
    if np.all(trajectory.losses > 0):
        loss_axis.set_yscale("log")
    loss_axis.set(xlabel="training step", ylabel="L_n(w*)")
    fig.tight_layout()
    return fig


def plot_parts_trajectory(trajectory, *, axes=None):
    """Top: lambda_hat (+-2 standard errors) of every part of a `PartsTrajectory` against the
    training step, one line each (log x axis when the steps are positive; checkpoints with
    warnings marked x). Bottom: L_n(w*) at the checkpoints. Returns the figure."""
    fig, (llc_axis, loss_axis) = _trajectory_axes(axes, height=6)
    steps = trajectory.steps
    for index, (part, along) in enumerate(zip(trajectory.parts, trajectory.trajectories,
                                              strict=True)):
        color = f"C{index % 10}"
        llc_axis.errorbar(steps, along.llc_means, yerr=2 * along.std_errors, fmt="o-", ms=3,
                          lw=1, capsize=2, color=color, label=part)
        flagged = np.array([bool(result.warnings) for result in along.results])
        if flagged.any():
            llc_axis.scatter(steps[flagged], along.llc_means[flagged], marker="x", color="k",
                             s=30, zorder=4)
    llc_axis.set(ylabel="λ̂ (±2 se)", title="local learning coefficient of each part "
                 "along training (x: warnings)")
    llc_axis.legend(fontsize=7, ncol=max(1, len(trajectory.parts) // 8))
    losses = trajectory.trajectories[0].losses
    loss_axis.plot(steps, losses, "o-", ms=3, lw=1, color="k")
    if np.all(losses > 0):
        loss_axis.set_yscale("log")
    if np.all(steps > 0):
        loss_axis.set_xscale("log")
    loss_axis.set(xlabel="training step", ylabel="L_n(w*)")
    fig.tight_layout()
    return fig


def _trajectory_axes(axes, *, height: float):
    """The figure and its two axes (lambda_hat above, L_n below, sharing the training step):
    `axes` as given, or new ones of this height."""
    return figure_and_axes(axes, 2, 1, figsize=(8, height), sharex=True,
                           gridspec_kw={"height_ratios": [3, 2]})
