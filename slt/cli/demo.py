"""`slt demo`: the three questions of slt answered end to end, written up as a report.

1. **Which model class does the data support?** The Old Faithful eruption durations
   (bundled, `slt/data/README.md`) under Gaussian mixtures with K = 1 … 3 components, compared
   by `slt.compare`: BIC, Laplace, WBIC, the reference F (from posterior draws, checked, with
   tempered SMC as the fallback) and n L_n(ŵ) + λ̂ log n.
2. **How complex is a trained network, really?** Two-layer networks trained (maximum
   likelihood, `slt.fit_map`: Adam then L-BFGS) on seeded synthetic data whose learning
   coefficient is known; λ̂ by `slt.llc` with a calibrated step size, beside d/2 (BIC), the
   symmetry-adjusted (d − generic Fisher nullity)/2 (`slt.geometry.symmetry`), the exact λ,
   and the Fisher rank at w*.
3. **Where is the model regular, where singular?** The det I landscapes of the mixture
   π N(μ, σ²) + (1 − π) N(0, 1) and of a tanh network (`slt.cli.landscapes`).

The report goes to ``--out DIR`` (default ``slt-demo``): report.md, results.json (every number
in the report), the figures as PNG under stable names (`FIGURES`), and evidence_comparison.nc
(the comparison, `slt.results.load` reads it). The sizes below are chosen so that the whole
run takes a few minutes on 2 CPU cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from collections.abc import Callable
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from slt import models, truth
from slt.cli.compare import format_comparison
from slt.cli.inputs import OutputFolder, bundled_path, load_data, parse_model
from slt.cli.landscapes import seed_figures, seed_scans
from slt.cli.options import add_command, add_output_options
from slt.estimators.evidence.compare import ComparisonPlan, compare
from slt.estimators.local.llc import llc
from slt.fit import MAPFit, fit_map
from slt.geometry.fisher import FisherRequest, fisher_information
from slt.geometry.symmetry import expected_fisher_nullity
from slt.samplers.config import RunPlan
from slt.samplers.tempering import Tempering

__all__ = ["FIGURES", "NETWORKS", "add_parser", "run"]

DEFAULT_OUT = "slt-demo"
MIXTURE_COMPONENTS = (1, 2, 3)
# SMC particles per copy: 40% of the default (500), which keeps the comparison of K = 1…3 (one
# tempered path per model) to about a minute and a half on 2 cores; the standard errors in the
# table say what that costs.
NUM_PARTICLES = 200

FIGURES = {
    "evidence_data.png": "Old Faithful eruption durations with the MAP mixture of each K",
    "evidence_comparison.png": "free energy per model and estimator",
    "llc_linear_network.png": "λ̂ traces, linear network 5-3-5",
    "llc_tanh_network.png": "λ̂ traces, tanh network 2-3-1",
    "fisher_mixture_pi_mu.png": "log det I and rank of the mixture over (π, μ)",
    "fisher_mixture_mu.png": "log det I of the mixture along μ",
    "fisher_mixture_pi.png": "log det I of the mixture along π",
    "fisher_tanh_outgoing.png": "log det I of a tanh network along an outgoing weight",
    "fisher_tanh_units.png": "log det I of a tanh network over one unit's weights",
}
OUTPUT_FILES = ("report.md", "results.json", "evidence_comparison.nc", *FIGURES)


class Network(NamedTuple):
    """A two-layer network of the demo and the data it is trained on.

    Attributes:
      name: used in the figure name `llc_<name>.png`.
      label: how the report names it.
      widths, activation, bias: the architecture (`slt.models.two_layer_network`).
      teacher: the true parameters the data are simulated from (constrained values).
      n: examples.
      exact: the exact learning coefficient at the teacher (`slt.truth`), or None.
      exact_source: where `exact` comes from.
      num_restarts: random restarts of the fit (`slt.fit_map`).
    """

    name: str
    label: str
    widths: tuple[int, int, int]
    activation: str
    bias: bool
    teacher: Callable[[], dict]
    n: int
    exact: Callable[[], truth.RLCT] | None
    exact_source: str
    num_restarts: int = 32


def _linear_teacher() -> dict:
    """A rank-1 product U V of a 5-3-5 linear network."""
    weights = models.random_low_rank(jax.random.key(101), [5, 3, 5], 1)
    return {"V": weights["W1"], "U": weights["W2"]}


def _tanh_teacher() -> dict:
    """Three active tanh units with distinct weights: a regular point (only the finite sign and
    permutation symmetries), where the exact learning coefficient is d/2."""
    return {"V": jnp.array([[1.0, -0.5], [-0.8, 1.2], [0.4, 0.9]]),
            "U": jnp.array([[1.5, -1.0, 0.8]])}


NETWORKS = (
    Network(
        "linear_network", "linear 5-3-5, no biases (reduced-rank regression), teacher of rank 1",
        (5, 3, 5), "identity", False, _linear_teacher, 20_000,
        lambda: truth.rrr_rlct(M=5, N=5, H=3, r=1), "Aoyagi & Watanabe 2005",
        # a deep linear network has no spurious local minima (Kawaguchi 2016): 8 restarts
        # instead of 32 find the optimum and save a minute of full-batch steps at n = 20 000
        num_restarts=8,
    ),
    Network(
        "tanh_network", "tanh 2-3-1, no biases, teacher with three distinct active units",
        (2, 3, 1), "tanh", False, _tanh_teacher, 5_000,
        lambda: truth.regular_rlct(9), "regular point (full-rank Fisher): λ = d/2",
    ),
)


# --------------------------------------------------------------------------- the three parts


def _evidence(key, progress: bool) -> tuple[dict, object, dict[str, object]]:
    data_path = bundled_path("old_faithful.csv")
    problems, fits_data = {}, None
    for k in MIXTURE_COMPONENTS:
        choice = parse_model(f"gaussian_mixture({k})")
        fits_data = load_data(data_path, choice, y_columns="eruptions")
        problems[f"K={k}"] = choice.problem(fits_data)
    result = compare(
        problems, key, methods=("bic", "laplace", "wbic", "free_energy", "rlct"),
        plan=ComparisonPlan(free_energy=Tempering(num_particles=NUM_PARTICLES)),
        progress=progress,
    )
    figure = _mixture_fits_figure(fits_data["y"], result)
    summary = {
        "data": "Old Faithful eruption durations (minutes), n = 272",
        "table": result.table.reset_index(names="model").to_dict(orient="records"),
        "compact": result.compact().reset_index(names="model").to_dict(orient="records"),
        "choices": result.choices,
        "assessment": result.assessment(),
        "warnings": list(result.warnings),
    }
    return summary, result, {"evidence_data.png": figure,
                             "evidence_comparison.png": result.plot()}


def _mixture_fits_figure(y: np.ndarray, result):
    """Histogram of the data with the MAP density of every mixture."""
    import matplotlib.pyplot as plt
    from scipy.stats import norm

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.hist(y, bins=40, density=True, color="0.8", label="eruptions (n = 272)")
    grid = np.linspace(y.min() - 0.5, y.max() + 0.5, 400)
    for name, results in result.results.items():
        values = results["fit"].values
        weights = np.asarray(values["weights"])
        means = np.asarray(values["means"])[:, 0]
        scales = np.asarray(values["scales"])[:, 0]
        density = (weights[:, None] * norm.pdf(grid[None], means[:, None], scales[:, None]))
        ax.plot(grid, density.sum(0), label=f"{name} (MAP)")
    ax.set(xlabel="eruption duration (minutes)", ylabel="density",
           title="Old Faithful: Gaussian mixtures with K components")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def _network_llc(network: Network, key, progress: bool) -> tuple[dict, object]:
    n_in, h, n_out = network.widths
    spec = models.two_layer_network(n_in, h, n_out, activation=network.activation,
                                    bias=network.bias)
    data_key, fit_key, llc_key = jax.random.split(key, 3)
    data = spec.simulate(data_key, network.teacher(), network.n)
    problem = spec.problem(data)
    start = time.perf_counter()
    fit = fit_map(problem, fit_key, MAPFit(num_restarts=network.num_restarts), prior=False)
    result = llc(problem, fit.params, llc_key, plan=RunPlan(progress=progress))
    fisher = fisher_information(spec, fit.values,
                                request=FisherRequest(x=np.asarray(data["x"])))
    nullity = expected_fisher_nullity(n_in, h, n_out, network.activation, bias=network.bias)
    exact = network.exact() if network.exact is not None else None
    row = {
        "network": network.label,
        "n": problem.n,
        "d": problem.dim,
        "d/2 (BIC)": problem.dim / 2,
        "(d - nullity)/2 (symmetry)": (problem.dim - nullity) / 2,
        "exact λ": None if exact is None else float(exact.value),
        "λ̂": result.llc_mean,
        "se": result.std_error,
        "rank I(w*)": fisher.rank,
        "step size": result.step_size,
        "seconds": time.perf_counter() - start,
        "exact source": network.exact_source,
        "warnings": list(result.warnings),
    }
    return row, result.plot()


def _fisher_landscapes(progress: bool) -> tuple[list[dict], dict[str, object]]:
    scans = seed_scans(progress=progress)
    figures = seed_figures(scans=scans)
    rows = [{
        "scan": name,
        "model": scan.model_name,
        "axes": " × ".join(scan.axes),
        "d": scan.dim,
        "grid points": int(scan.dataset["rank"].size),
        "ranks seen": sorted(int(r) for r in np.unique(scan.dataset["rank"].values)),
        "singular points": int(scan.singular().sum()),
    } for name, scan in scans.items()]
    return rows, {f"fisher_{name}.png": figure for name, figure in figures.items()}


# --------------------------------------------------------------------------- report


def _markdown_table(frame: pd.DataFrame) -> str:
    def cell(value) -> str:
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return ""
        if isinstance(value, float | np.floating):
            return f"{value:.4g}"
        return str(value).replace("|", "\\|")

    header = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "---|" * len(frame.columns)
    rows = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(False)]
    return "\n".join([header, rule, *rows])


_LLC_COLUMNS = ["network", "n", "d", "d/2 (BIC)", "(d - nullity)/2 (symmetry)", "exact λ", "λ̂",
                "se", "rank I(w*)"]


def _report(results: dict) -> str:
    """report.md: a header, then one section per question (evidence, λ̂, Fisher)."""
    evidence, networks, fisher = results["evidence"], results["llc"], results["fisher"]
    llc_table = pd.DataFrame(networks)[_LLC_COLUMNS]
    fisher_table = pd.DataFrame(fisher)
    run = results["run"]
    figure = "![{text}]({name})".format
    lines = [
        "# slt demo report",
        "",
        f"Produced by `slt demo` (slt {run['slt']}) in {run['seconds']:.0f} s on "
        f"{run['backend']} ({run['cpus']} CPUs, load average {run['load_average']}), "
        f"float64, seed {run['seed']}. Every number is also in `results.json`.",
        "",
        *_evidence_section(evidence),
    ]
    lines += [
        "## 2. How complex is a trained network, really?",
        "",
        "Two-layer networks trained by maximum likelihood (`slt.fit_map`, prior off) on data "
        "simulated from a teacher with unit Gaussian noise; λ̂ by `slt.llc` "
        f"({RunPlan().num_chains} chains, step size calibrated, run until the standard error "
        f"is {RunPlan().target_se:.0%} of λ̂ or {RunPlan().max_steps:,} steps). BIC charges "
        "d/2 per log n; the parameter-space "
        "symmetries (`slt.geometry.symmetry`) alone lower that to (d − generic Fisher "
        "nullity)/2; the exact learning coefficient at the teacher is lower still. "
        "`rank I(w*)` is the rank of the Fisher information at the trained parameters.",
        "",
        _markdown_table(llc_table),
        "",
        *[f"- {row['network']}: exact λ from {row['exact source']}; calibrated step size "
          f"{row['step size']:.2g}; {row['seconds']:.0f} s."
          + (f" Diagnostics: {'; '.join(row['warnings'])}." if row["warnings"] else "")
          for row in networks],
        "",
        "One data set's λ̂ fluctuates around λ by about sqrt(λ / (2 log n)) (Watanabe 2013), "
        "on top of the standard error of the chains; `benchmarks/RESULTS.md` measures the "
        "estimator's accuracy over many cases.",
        "",
        figure(text=FIGURES["llc_linear_network.png"], name="llc_linear_network.png"),
        figure(text=FIGURES["llc_tanh_network.png"], name="llc_tanh_network.png"),
        "",
        "## 3. Where is the model regular, where singular?",
        "",
        "Exact Fisher information (quadrature) over parameter grids: log det I and the rank; "
        "the singular set (rank < d) outlined in red. The mixture π N(μ, σ²) + (1 − π) N(0, 1) "
        "loses one rank along μ = 0 (π unidentifiable) and two at π = 0 (μ, σ "
        "unidentifiable); the tanh network 1-2-1 loses rank where a unit's outgoing weight "
        "vanishes, where its input weight vanishes, and where two units coincide or are "
        "negatives of each other.",
        "",
        _markdown_table(fisher_table),
        "",
        *[figure(text=FIGURES[name], name=name) for name in FIGURES if name.startswith("fisher")],
        "",
    ]
    return "\n".join(lines)


def _evidence_section(evidence: dict) -> list[str]:
    """Section 1 of report.md: the model classes by free energy, the choices, the
    assessment of each criterion, the figures, and the estimators' warnings."""
    choices = ", ".join(f"{criterion} → {name}" for criterion, name in evidence["choices"].items())
    figure = "![{text}]({name})".format
    lines = [
        "## 1. Which model class does the data support?",
        "",
        f"{evidence['data']}, Gaussian mixtures with K = 1 … 3 components "
        "(`slt.models.gaussian_mixture`). Free energies F = −log Z in nats on one scale, "
        "F ≈ n L_n(w₀) + λ log n: lower is better, ± one standard error. `bic` = "
        "n L_n(ŵ) + (d/2) log n at the MAP ŵ; `laplace` = −log Z of the Laplace "
        "approximation; `free_energy` = the reference F: importance and bridge sampling "
        "from proposals fitted to NUTS draws (symmetrised over the K! label orders), "
        "checked, with adaptive tempered SMC as the fallback where a check fails; `wbic` = "
        "E_β[n L_n] at β = 1/log n, `rlct` = λ̂ from the NUTS chains at β = 1/log n and 1 "
        "(Watanabe's two-temperature estimate, m = 1), or with its integer multiplicity `m` "
        "from five temperatures where the tempered fallback ran, and `singular_bic` = "
        "n L_n(ŵ) + λ̂ log n − (m − 1) log log n, all from the chains (or particles) of the "
        "same run. A criterion whose standard errors "
        "cannot separate the best models reports a tie.",
        "",
        _markdown_table(pd.DataFrame(evidence["compact"])),
        "",
        f"Selected: {choices}.",
        "",
        "How far to trust each criterion here:",
        "",
        *[f"- {line}" for line in evidence["assessment"]],
        "",
        figure(text=FIGURES["evidence_data.png"], name="evidence_data.png"),
        figure(text=FIGURES["evidence_comparison.png"], name="evidence_comparison.png"),
        "",
    ]
    if evidence["warnings"]:
        lines += ["Diagnostics raised by the estimators:", ""]
        lines += [f"- {message}" for message in evidence["warnings"]] + [""]
    return lines


def _summary(results: dict) -> str:
    evidence = pd.DataFrame(results["evidence"]["compact"])
    networks = pd.DataFrame(results["llc"])[_LLC_COLUMNS]
    fisher = pd.DataFrame(results["fisher"])
    float_format = "{:.4g}".format
    with pd.option_context("display.width", 200, "display.max_columns", 30,
                           "display.max_colwidth", 70):
        return "\n".join([
            "1. Model classes by free energy (Old Faithful eruptions; lower is better)",
            evidence.to_string(index=False, float_format=float_format),
            "   selected: " + ", ".join(f"{c} -> {m}" for c, m in
                                        results["evidence"]["choices"].items()),
            *[f"   - {line}" for line in results["evidence"]["assessment"]],
            "",
            "2. Learning coefficient of trained two-layer networks",
            networks.to_string(index=False, float_format=float_format),
            "",
            "3. Fisher information landscapes",
            fisher.to_string(index=False),
        ])


# --------------------------------------------------------------------------- command


def add_parser(subparsers, common: argparse.ArgumentParser) -> None:
    parser = add_command(
        subparsers, common, "demo", run,
        help="run the end-to-end example on bundled data and write a report",
        description=(
            "Compare Gaussian mixtures on the Old Faithful eruptions by evidence, estimate the "
            "learning coefficient of trained two-layer networks beside d/2 and the exact "
            "value, and draw Fisher information landscapes; write report.md with the figures "
            "(PNG) and every number (results.json), and print a summary. A few minutes on "
            "2 CPU cores."
        ),
    )
    add_output_options(parser, OUTPUT_FILES, default=DEFAULT_OUT)


def run(args: argparse.Namespace) -> int:
    """Run the three parts, write the report into --out, print the summary."""
    out = OutputFolder(args.out, OUTPUT_FILES, force=args.force)
    start = time.perf_counter()
    key = jax.random.key(args.seed)
    print("1/3 comparing Gaussian mixtures K = 1..3 on the Old Faithful eruptions", flush=True)
    evidence, comparison, figures = _evidence(jax.random.fold_in(key, 1), args.progress)
    print(format_comparison(comparison), flush=True)
    networks = []
    for index, network in enumerate(NETWORKS):
        print(f"\n2/3 training and estimating λ̂: {network.label}", flush=True)
        row, figure = _network_llc(network, jax.random.fold_in(key, 10 + index), args.progress)
        networks.append(row)
        figures[f"llc_{network.name}.png"] = figure
        print(f"λ̂ = {row['λ̂']:.4g} ± {row['se']:.2g}; exact λ = {row['exact λ']:.4g}; "
              f"d/2 = {row['d/2 (BIC)']:g}", flush=True)
    print("\n3/3 Fisher information landscapes", flush=True)
    fisher, fisher_figures = _fisher_landscapes(args.progress)
    figures.update(fisher_figures)
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    results = {
        "run": {"slt": _version(), "seconds": time.perf_counter() - start,
                "backend": f"{jax.default_backend()} ({platform.machine()})",
                "cpus": os.cpu_count(), "load_average": load, "seed": args.seed},
        "evidence": evidence, "llc": networks, "fisher": fisher,
    }
    for name, figure in figures.items():
        out.write_figure(name, figure)
    out.save("evidence_comparison.nc", comparison)
    out.write_json("results.json", results)
    out.write_text("report.md", _report(results))
    print("\n" + _summary(results))
    print(f"\nreport: {out.path('report.md')} ({results['run']['seconds']:.0f} s)")
    return 0


def _version() -> str:
    from slt import __version__

    return __version__
