"""λ̂ at 10^4 to 10^6 parameters against exact values: accuracy, time, peak memory (issue 19).

Cases. Reduced-rank regression y = B A x + ε (unit noise, x ~ N(0, I)) with M = N = 4H inputs
and outputs, at a true parameter of rank r = H / 5 drawn by `models.random_low_rank`, where
the local learning coefficient is the exact global value `truth.rrr_rlct(M, N, H, r)`
(Aoyagi). n = 100 000 examples, float32 data and chains. Weights are drawn at the scale of a
standard initialisation, entries N(0, 1 / M), so the product's singular values are O(1) as in
a trained network; one more row keeps `random_low_rank`'s default entries N(0, 1) at d ≈ 1e5,
whose per-example gradients are about 300 times larger: there the calibration's default grid
lies wholly above the step sizes its gradient-noise criterion admits, and its chains need
longer to settle, the case in which `SGLD(step_size="auto")` used to raise.

Each case runs in a fresh process (`python -m benchmarks.llc_scale CHILD name`): after the data
and the Problem are built, the peak resident set size (VmHWM) is reset, then
`slt.llc(problem, w0, key)` runs with its defaults (`SGLD(step_size="auto")`, 4 chains, 1000
draws after 1000 warmup steps, batch 256, γ = 1, nβ = n / log n), calibration included, except
where the row says otherwise. Reported: λ̂ ± its standard error against λ, the configurational
temperature T, the calibrated step and the warmup used, the wall time (calibration and
sampling), the memory the call adds (peak RSS minus RSS before), and what a design that holds
no draw of the weights predicts: chains × d × 4 bytes for the chains' positions (the program
keeps a few such arrays: gradient, noise, proposal), the per-example losses at w* (n × 4
bytes), no copy of the data (an argument of the program). On an accelerator the memory reported
is the device's peak bytes in use (JAX's allocator statistics): the data, which `llc` moves
there, included; the data are drawn on the host's CPU in every case. Expected finite-n
behaviour: at w* = w0 (not the MLE), λ̂ estimates nβ (E[L_n] − L_n(w0)), whose mean at finite n
lies below λ by up to λ / log n (8.7% at n = 1e5) in directions that are locally regular.

Overhead. `llc` at a fixed step (`SGLD(mala_every=0)`, no warmup, 4 chains, 500 draws) against
a hand-written vmapped `lax.scan` SGLD loop with the same target, minibatches and randomness
(`benchmarks.llc_speed.bare_sgld`), interleaved, medians of 3. End to end, both compute the
per-example losses at w* on all n examples once per call (L_n(w*) and the paired losses: the
one full pass an estimate needs), and `llc` also validates and summarises; the sampling alone
is `llc`'s `run_time`. The issue's target: slt within 10% of the loop at d ≈ 1e5 and 1e6.

The plot (`llc_scale.png`, as in Furman & Lau 2024): λ̂ against λ on log axes with the line
λ̂ = λ and the ±15% band.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks.llc_speed import _reset_peak_rss, _rss_mb

ROOT = Path(__file__).resolve().parent.parent
FIGURE = Path(__file__).resolve().parent / "llc_scale.png"
N = 100_000
CHAINS = 4
TARGET = 0.15
# (name, M, H, N, r, weight scale: "init" = 1 / sqrt(M), or a number; `_options`' mode)
CASES = [
    ("d=1e4", 140, 35, 140, 7, "init", None),
    ("d=1e5", 448, 112, 448, 22, "init", None),
    ("d=1e5, weights N(0, 1)", 316, 158, 316, 30, 1.0, None),
    ("d=1e6", 1416, 354, 1416, 70, "init", "narrow"),
    ("d=1e6, transferred step", 1416, 354, 1416, 70, "init", "transferred"),
]
OVERHEAD_CASES = ("d=1e5", "d=1e6")
OVERHEAD_DRAWS = 500


def _case(name: str):
    return next(case for case in CASES if case[0] == name)


def build(name: str):
    """(problem, w0 as float32 params, exact lambda, arrays for the bare loop) of case `name`.

    The weights and data are drawn on the host's CPU whatever the default device, so that
    every device gets the same data; the Problem and the parameters then live on the default
    device, where a user's would.
    """
    import jax
    import jax.numpy as jnp

    from slt import models, truth

    _, M, H, N_out, r, scale, _ = _case(name)
    key = jax.random.key(0)
    spec = models.reduced_rank_regression(M, H, N_out)
    with jax.default_device(jax.devices("cpu")[0]):
        w0 = {k: np.asarray(v) for k, v in models.random_low_rank(
            key, [M, H, N_out], r, scale=1 / np.sqrt(M) if scale == "init" else scale).items()}
        data = {k: np.asarray(v, np.float32)
                for k, v in spec.simulate(jax.random.fold_in(key, 1), w0, N).items()}
    problem = spec.problem(data)
    params = {k: jnp.asarray(v, jnp.float32) for k, v in problem.unconstrain(w0).items()}
    arrays = {"kind": np.array("rrr"), "x": data["x"], "y": data["y"],
              "W1": np.asarray(params["W1"]), "W2": np.asarray(params["W2"])}
    return problem, params, float(truth.rrr_rlct(M, N_out, H, r).value), arrays


# The step the calibration chose for these weights at d = 1e4 and at d = 1e5 (ε nβ = 0.0022,
# the default grid's sixth candidate), and the warmup it settled in there (2000 steps).
TRANSFERRED_STEP_NBETA = 0.0022
TRANSFERRED_WARMUP = 3000


def _options(problem, mode: str | None) -> dict:
    """llc's sampler and plan for a case's `mode` (CHAINS chains, no progress bar):

    None: the defaults (`SGLD(step_size="auto")`, the calibration).
    "narrow": a calibration sweep over 5 candidates of the default grid (steps 1e-4 / nβ ..
      1 / nβ) centred on the step calibrated at d = 1e5 on the same kind of weights: a full
      13-candidate sweep, lengthened, costs hours on 2 CPU cores at d = 1e6.
    "transferred": no calibration at this size: the step and warmup the calibration chose at
      d = 1e4 and 1e5 (TRANSFERRED_STEP_NBETA, TRANSFERRED_WARMUP); the run's configurational
      temperature and drift test then say whether they still hold.
    """
    from slt import RunPlan
    from slt.samplers import SGLD, Calibration

    nbeta = problem.n / np.log(problem.n)
    sampler, plan = SGLD(), RunPlan(num_chains=CHAINS, progress=False)
    if mode == "narrow":
        sampler = SGLD(step_size=Calibration(
            step_sizes=list(np.logspace(-4, 0, 13)[3:8] / nbeta)))
    if mode == "transferred":
        sampler = SGLD(step_size=TRANSFERRED_STEP_NBETA / nbeta)
        plan = RunPlan(num_chains=CHAINS, num_warmup=TRANSFERRED_WARMUP, progress=False)
    return {"sampler": sampler, "plan": plan}


def _child(name: str) -> dict:
    import jax

    import slt

    problem, params, exact, _ = build(name)
    options = _options(problem, _case(name)[6])
    _reset_peak_rss()
    before, _ = _rss_mb()
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = slt.llc(problem, params, jax.random.key(1), **options)
    wall = time.perf_counter() - start
    _, peak = _rss_mb()
    device = jax.devices()[0]
    device_stats = device.memory_stats()  # None on CPU: the process's memory is the RSS
    return {
        "name": name, "device": f"{device.platform} ({device.device_kind})", "d": problem.dim,
        "exact": exact, "llc": result.llc_mean,
        "se": result.std_error, "temperature": result.temperature,
        "step_size": result.step_size, "nbeta": result.nbeta, "num_warmup": result.num_warmup,
        "wall_s": wall, "run_s": result.run_time, "added_mb": peak - before,
        "device_peak_mb": device_stats["peak_bytes_in_use"] / 2**20 if device_stats else None,
        "chains_mb": CHAINS * problem.dim * 4 / 2**20, "losses_mb": problem.n * 4 / 2**20,
        "data_mb": sum(np.asarray(v).nbytes for v in problem.data.values()) / 2**20,
        "warnings": [str(w.message) for w in caught],
    }


def _overhead_child(name: str) -> dict:
    """`llc` at a fixed step against the bare loop, interleaved (module doc)."""
    import jax

    import slt
    from benchmarks.llc_speed import bare_sgld, slt_values
    from benchmarks.timing import interleaved_medians

    problem, params, _, arrays = build(name)
    nbeta = problem.n / np.log(problem.n)
    config = {"num_chains": CHAINS, "num_samples": OVERHEAD_DRAWS, "num_warmup": 0,
              "step_size": 0.0046 / nbeta, "gamma": 1.0, "nbeta": nbeta, "batch_size": 256}
    # any stable step: the overhead does not depend on it (no diagnostics, no warmup)
    compiled, _ = bare_sgld(arrays, paired=True, config=config)
    key = jax.random.key(0)
    values = slt_values(config)  # mala_every=0, no progress bar

    sampling = []

    def slt_call():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = slt.llc(problem, params, key, **values)
        sampling.append(result.run_time)
        return result.llc_mean

    medians = interleaved_medians({"slt": slt_call, "loop": lambda: compiled(key)}, repeats=3)
    return {"name": name, "d": problem.dim, **medians, "slt_sampling": float(np.median(sampling))}


def _in_child(kind: str, name: str) -> dict:
    output = subprocess.run(
        [sys.executable, "-m", "benchmarks.llc_scale", kind, name],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def plot(rows: list[dict], figure_path: Path = FIGURE) -> None:
    """λ̂ against λ on log axes, the line λ̂ = λ and the ±15% band (Furman & Lau's view)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exact = np.array([row["exact"] for row in rows])
    span = np.array([exact.min() / 2, exact.max() * 2])
    figure, axes = plt.subplots(figsize=(5, 4.5))
    axes.plot(span, span, color="black", lw=1, label="λ̂ = λ")
    axes.fill_between(span, span * (1 - TARGET), span * (1 + TARGET), color="grey", alpha=0.2,
                      label="±15%")
    for row in rows:
        axes.errorbar(row["exact"], row["llc"], yerr=2 * row["se"], fmt="o", capsize=3,
                      label=f"{row['name']} (d = {row['d']:,})")
    axes.set(xscale="log", yscale="log", xlabel="λ (exact, Aoyagi)", ylabel="λ̂ (slt.llc)",
             title=f"λ̂ against λ, reduced-rank regression, n = 1e5\n{rows[0]['device']}")
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(figure_path, dpi=120)
    plt.close(figure)


def report(rows: list[dict], overhead: list[dict], figure_path: Path = FIGURE) -> str:
    """The section's markdown for the `CHILD` rows and `OVERHEAD` rows; draws the plot."""
    plot(rows, figure_path)
    on_accelerator = any(row.get("device_peak_mb") is not None for row in rows)
    memory_header = "accelerator memory peak (MiB)" if on_accelerator else "memory added (MiB)"
    lines = [
        "## λ̂ at 10^4 to 10^6 parameters (reduced-rank regression, exact λ)\n",
        __doc__.split("\n\n", 1)[1].strip(),
        "",
        f"Device: {rows[0]['device']}.",
        "",
        "| case | d | λ | λ̂ ± se | relative error | T | step × nβ | warmup | wall (s) | "
        f"sampling (s) | {memory_header} | chains × d × 4 B + losses (MiB) | data (MiB) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        error = row["llc"] / row["exact"] - 1
        verdict = "met" if abs(error) <= TARGET else "**missed**"
        memory = row["device_peak_mb"] if on_accelerator else row["added_mb"]
        lines.append(
            f"| {row['name']} | {row['d']:,} | {row['exact']:,.1f} | {row['llc']:,.0f} ± "
            f"{row['se']:,.0f} | {error:+.1%} ({verdict}) | {row['temperature']:.2f} | "
            f"{row['step_size'] * row['nbeta']:.2g} | {row['num_warmup']} | {row['wall_s']:.0f} | "
            f"{row['run_s']:.0f} | {memory:,.0f} | "
            f"{row['chains_mb'] + row['losses_mb']:,.1f} | {row['data_mb']:,.0f} |"
        )
    notes = [f"- {row['name']}: " + "; ".join(row["warnings"]) for row in rows if row["warnings"]]
    if notes:
        lines += ["", "Warnings and notes of the runs:", "", *notes]
    lines += [
        "",
        f"![λ̂ against λ]({figure_path.name})",
        "",
        f"Overhead against the bare loop (fixed step, 4 chains, {OVERHEAD_DRAWS} draws, no "
        "diagnostics):",
        "",
        "| case | d | slt `llc` end to end (s) | its sampling (s) | bare loop (s) | "
        "end to end / loop | sampling / loop | target ≤ 1.10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in overhead:
        ratio, sampling = row["slt"] / row["loop"], row["slt_sampling"] / row["loop"]
        lines.append(f"| {row['name']} | {row['d']:,} | {row['slt']:.2f} | "
                     f"{row['slt_sampling']:.2f} | {row['loop']:.2f} | {ratio:.3f} | "
                     f"{sampling:.3f} | {'met' if ratio <= 1.10 else '**missed**'} |")
    return "\n".join(lines) + "\n"


def run() -> str:
    rows = [_in_child("CHILD", case[0]) for case in CASES]
    overhead = [_in_child("OVERHEAD", name) for name in OVERHEAD_CASES]
    return report(rows, overhead)


def _read_rows(path: str) -> list[dict]:
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


if __name__ == "__main__":
    import jax

    if len(sys.argv) == 3 and sys.argv[1] == "CHILD":
        jax.config.update("jax_enable_x64", True)  # as `make bench`; data and chains are float32
        print(json.dumps(_child(sys.argv[2])))
    elif len(sys.argv) == 3 and sys.argv[1] == "OVERHEAD":  # 32-bit JAX: the loop is float32
        print(json.dumps(_overhead_child(sys.argv[2])))
    elif len(sys.argv) == 5 and sys.argv[1] == "REPORT":  # rows of CHILD / OVERHEAD runs, saved
        # one JSON object a line (on another machine, say): the section and its plot
        print(report(_read_rows(sys.argv[2]), _read_rows(sys.argv[3]), Path(sys.argv[4])))
    else:
        print(run())
