"""`slt compare`: rank model classes on one data set by their free energy F = -log Z.

Runs `slt.compare` on one `Problem` per ``--model``, prints its table (BIC, Laplace, WBIC, the
reference F, n L_n(ŵ) + λ̂ log n: all on the scale F ≈ n L_n + λ log n, lower is better; and
PSIS-LOO's elpd, higher is better) and the model each criterion picks; with ``--out DIR`` also
writes comparison.csv (the table), comparison.json (table, choices, diagnostics),
comparison.png (the plot) and comparison.nc (the full result, `slt.results.load` reads it back).
The reference F comes from posterior draws, checked (`slt.FromDraws`: NUTS from the MAP fit's
optima, importance and bridge sampling), with adaptive tempered SMC as the fallback for a model
whose checks fail, or for every model with ``--tempered``. The columns and their defaults are
the library's (`slt.estimators.evidence.compare.DEFAULT_METHODS`).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

import jax
import pandas as pd

from slt.cli.inputs import OutputFolder, UsageError, load_problem, parse_model
from slt.cli.options import add_command, add_data_options, add_output_options, positive_int
from slt.estimators.evidence.compare import DEFAULT_METHODS, METHODS, ComparisonPlan, compare
from slt.problem import Problem
from slt.samplers.nuts import NUTS
from slt.samplers.tempering import Tempering

__all__ = ["add_parser", "run", "OUTPUT_FILES", "DEFAULT_METHODS"]

OUTPUT_FILES = ("comparison.csv", "comparison.json", "comparison.png", "comparison.nc")
# What --methods offers: compare's methods but "sbic", which needs the models' family
# (`compare(..., sbic_family=...)`), something a command line cannot name.
CLI_METHODS = tuple(method for method in METHODS if method != "sbic")
SAMPLERS = ("shared", "nuts")  # --sampler: where wbic, rlct and loo draw from
# --sampler's names before the fast path, accepted one release with a note on stderr
RENAMED_SAMPLERS = {"smc": "shared"}


def add_parser(subparsers, common: argparse.ArgumentParser) -> None:
    parser = add_command(
        subparsers, common, "compare", run,
        help="compare model classes on your data by free energy",
        description=(
            "Compare model classes on one data set by free energy F = -log Z (lower is "
            "better): BIC, Laplace, WBIC, the reference F (from posterior draws, checked, "
            "with tempered SMC as the fallback), n L_n(ŵ) + λ̂ log n and PSIS-LOO side by "
            "side, and the model each criterion selects."
        ),
        epilog=(
            "Examples:\n"
            "  slt compare faithful.csv --y eruptions -m 'gaussian_mixture(1)' "
            "-m 'gaussian_mixture(2)'\n"
            "  slt compare data.npz -m mymodels:small -m mymodels:large --out results/"
        ),
    )
    add_data_options(parser, required=True)
    parser.add_argument(
        "-m", "--model", action="append", required=True, metavar="MODEL",
        help="a model class; repeat for each class to compare (at least two). A built-in "
             "with arguments, e.g. 'gaussian_mixture(2)', or module:function for your NumPyro "
             "model",
    )
    parser.add_argument(
        "--methods", default=",".join(DEFAULT_METHODS),
        help=f"comma-separated estimators, any of {','.join(CLI_METHODS)} "
             f"(default: {','.join(DEFAULT_METHODS)})",
    )
    parser.add_argument("--sampler", type=_sampler, choices=SAMPLERS, default="shared",
                        help="where wbic, rlct and loo draw from. shared: the reference F's "
                             "own draws (its NUTS chains at beta = 1 and 1/log n; its tempered "
                             "path for a model that falls back to it); nuts: NUTS chains of "
                             "their own at their temperatures (default: shared)")
    parser.add_argument("--num-samples", type=positive_int, default=None,
                        help="with --sampler nuts: NUTS draws per chain and temperature for "
                             f"wbic, rlct and loo (default: {NUTS().num_samples})")
    parser.add_argument("--num-warmup", type=positive_int, default=None,
                        help="with --sampler nuts: NUTS warm-up steps (default: "
                             f"{NUTS().num_warmup})")
    parser.add_argument("--tempered", action="store_true",
                        help="the reference F by adaptive tempered SMC for every model, "
                             "without the fast path from posterior draws (slower)")
    parser.add_argument("--num-particles", type=positive_int, default=1000,
                        help="SMC particles per copy of the tempered path: run for a model "
                             "whose fast-path checks fail, or for every model with --tempered "
                             "(default: 1000)")
    add_output_options(parser, OUTPUT_FILES)


def _sampler(text: str) -> str:
    """--sampler's value, an old name replaced by its new one with a note on stderr."""
    if text in RENAMED_SAMPLERS:
        print(f"slt: note: --sampler {text} is now called {RENAMED_SAMPLERS[text]!r}; the old "
              "name goes in the next release", file=sys.stderr)
        return RENAMED_SAMPLERS[text]
    return text


def _methods(text: str) -> tuple[str, ...]:
    methods = tuple(name.strip() for name in text.split(",") if name.strip())
    if "sbic" in methods:
        raise UsageError("--methods: sbic needs the models' nested family and its learning "
                         "coefficients, which the command line cannot give; call "
                         "slt.compare(..., sbic_family=...) from Python (e.g. "
                         "functools.partial(slt.estimators.sbic_gaussian_mixtures, dim=1))")
    unknown = [name for name in methods if name not in CLI_METHODS]
    if not methods or unknown:
        raise UsageError(f"--methods {text!r}: unknown {unknown or text!r}; "
                         f"choose from {', '.join(CLI_METHODS)}")
    return methods


def _problems(args: argparse.Namespace) -> dict[str, Problem]:
    if len(args.model) < 2:
        raise UsageError("give at least two --model options to compare")
    if len(set(args.model)) != len(args.model):
        raise UsageError("the same --model is given twice")
    problems = {}
    for text in args.model:
        choice = parse_model(text)
        problems[text] = load_problem(args.data, choice, x_columns=args.x, y_columns=args.y)
    return problems


def run(args: argparse.Namespace) -> int:
    """Build the problems, compare them, print and (with --out) write the result."""
    methods = _methods(args.methods)
    out = None if args.out is None else OutputFolder(args.out, OUTPUT_FILES, force=args.force)
    sampling = {name: value for name, value in
                (("num_samples", args.num_samples), ("num_warmup", args.num_warmup))
                if value is not None}
    if sampling and args.sampler != "nuts":
        raise UsageError("--num-samples and --num-warmup set NUTS chains: add --sampler nuts")
    problems = _problems(args)
    plan = ComparisonPlan(free_energy=Tempering(num_particles=args.num_particles))
    if args.tempered:
        plan = replace(plan, draws=None)
    if args.sampler == "nuts":  # WBIC from the rlct chains at 1 / log n where rlct runs
        nuts = NUTS(**sampling)
        plan = replace(plan, wbic=nuts if "rlct" not in methods else None, rlct=nuts, loo=nuts)
    result = compare(problems, jax.random.key(args.seed), methods, plan,
                     progress=args.progress)
    print(format_comparison(result))
    if out is not None:
        write_comparison(out, result, "comparison")
        print(f"\nwrote {', '.join(str(out.path(name)) for name in OUTPUT_FILES)}")
    return 0


def format_comparison(result) -> str:
    """The compact comparison table (each estimate ± its standard error; every column is in
    the CSV), each criterion's choice and how far to trust it, as text for the terminal."""
    with pd.option_context("display.width", 200, "display.max_columns", 40):
        table = result.compact().to_string()
    choices = "\n".join(f"  {criterion:<12} -> {name}" for criterion, name in
                        result.choices.items())
    lines = [table, "", "selected (lowest free energy; highest elpd for loo):", choices]
    if assessment := result.assessment():
        lines += ["", "how far to trust each criterion here:"]
        lines += [f"  - {line}" for line in assessment]
    if result.warnings:
        lines += ["", f"{len(result.warnings)} diagnostic(s):"]
        lines += [f"  {message}" for message in result.warnings]
    return "\n".join(lines)


def write_comparison(out: OutputFolder, result, stem: str) -> None:
    """Write `<stem>.csv`, `.json`, `.png` and `.nc` of a `ComparisonResult` into `out`."""
    out.write(f"{stem}.csv", lambda path: result.table.to_csv(path, index_label="model"))
    out.write_json(f"{stem}.json", {
        "table": result.table.reset_index(names="model").to_dict(orient="records"),
        "choices": result.choices,
        "methods": list(result.methods),
        "warnings": list(result.warnings),
    })
    out.write_figure(f"{stem}.png", result.plot())
    out.save(f"{stem}.nc", result)
