"""`slt llc`: the local learning coefficient λ̂(w*) of a model at trained parameters.

w* is read from ``--params FILE.npz`` (constrained site values, one array per site, e.g. a
network trained elsewhere) or, without it, fitted by maximum likelihood (`slt.fit_map` with
``prior=False``). λ̂ comes from `slt.llc` (localized SGLD, step size calibrated unless
``--step-size`` is given) and is printed beside d/2, BIC's complexity, with the run's
diagnostics. With ``--out DIR``: llc.json (estimate, diagnostics, configuration), llc.png
(traces) and llc.nc (the full result).
"""

from __future__ import annotations

import argparse

import jax
import numpy as np
import pandas as pd

from slt.cli.inputs import OutputFolder, UsageError, load_data, parse_model, parse_point
from slt.cli.options import (
    add_data_options,
    add_output_options,
    nonnegative_int,
    positive_float,
    positive_int,
)
from slt.estimators.llc import llc
from slt.fit import fit_map
from slt.problem import Problem

__all__ = ["add_parser", "run", "OUTPUT_FILES"]

OUTPUT_FILES = ("llc.json", "llc.png", "llc.nc")


def _step_size(text: str) -> float | str:
    return text if text == "auto" else positive_float(text)


def add_parser(subparsers, common: argparse.ArgumentParser) -> None:
    parser = subparsers.add_parser(
        "llc",
        parents=[common],
        help="estimate the learning coefficient λ̂ of a trained model on your data",
        description=(
            "Estimate the local learning coefficient λ̂(w*) = nβ (E[L_n(w)] - L_n(w*)) by "
            "localized SGLD at trained parameters w* (from --params, else the maximum-"
            "likelihood fit), and set it beside d/2, the complexity BIC assumes."
        ),
        epilog=(
            "Examples:\n"
            "  slt llc data.csv --y target -m 'two_layer_network(3, 8, 1)'\n"
            "  slt llc data.npz -m mymodels:model --params trained.npz --out llc/"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_data_options(parser, required=True)
    parser.add_argument("-m", "--model", required=True, metavar="MODEL",
                        help="a built-in with arguments, e.g. 'two_layer_network(1, 3, 1)', or "
                             "module:function for your NumPyro model")
    parser.add_argument("--params", metavar="NPZ",
                        help="trained parameters w*: one array per latent site, constrained "
                             "values (default: fit the maximum-likelihood w*)")
    sampler = parser.add_argument_group("sampler")
    sampler.add_argument("--num-chains", type=positive_int, default=4,
                         help="independent chains (default: 4)")
    sampler.add_argument("--num-samples", type=positive_int, default=1000,
                         help="draws per chain kept for the estimate (default: 1000)")
    sampler.add_argument("--num-warmup", type=nonnegative_int, default=1000,
                         help="steps per chain discarded first (default: 1000)")
    sampler.add_argument("--step-size", type=_step_size, default="auto",
                         help="SGLD step size, or 'auto' to calibrate it (default: auto)")
    sampler.add_argument("--gamma", type=positive_float, default=1.0,
                         help="localization strength γ (default: 1)")
    sampler.add_argument("--batch-size", type=positive_int, default=256,
                         help="minibatch size (default: 256)")
    sampler.add_argument("--num-restarts", type=positive_int, default=32,
                         help="random restarts of the maximum-likelihood fit (default: 32)")
    add_output_options(parser, OUTPUT_FILES)
    parser.set_defaults(run=run)


def _center(problem: Problem, args: argparse.Namespace):
    """w* in unconstrained coordinates, and a line saying where it came from."""
    if args.params is None:
        fit = fit_map(problem, jax.random.key(args.seed + 1), prior=False,
                      num_restarts=args.num_restarts)
        return fit.params, (f"w*: maximum-likelihood fit, n L_n(w*) = {-fit.loglik:.6g}, "
                            f"{fit.num_agree}/{fit.num_restarts} restarts agree")
    values = parse_point([], args.params)
    unknown = sorted(set(values) - set(problem.site_names))
    missing = sorted(set(problem.site_names) - set(values))
    if unknown or missing:
        raise UsageError(
            f"{args.params}: the model's sites are {list(problem.site_names)}"
            + (f"; missing {missing}" if missing else "")
            + (f"; unknown {unknown}" if unknown else "")
        )
    try:
        params = problem.unconstrain(values)
        if not np.isfinite(float(problem.loss(params))):
            raise ValueError("L_n is not finite there")
    except (TypeError, ValueError) as error:
        raise UsageError(f"{args.params}: not a valid w* for this model: {error}") from None
    return params, f"w*: from {args.params}"


def run(args: argparse.Namespace) -> int:
    """Load, fit or read w*, estimate λ̂, print and (with --out) write the result."""
    out = None if args.out is None else OutputFolder(args.out, OUTPUT_FILES, force=args.force)
    choice = parse_model(args.model)
    problem = choice.problem(load_data(args.data, choice, x_columns=args.x, y_columns=args.y))
    params, origin = _center(problem, args)
    result = llc(
        problem, params, jax.random.key(args.seed), num_chains=args.num_chains,
        num_samples=args.num_samples, num_warmup=args.num_warmup, step_size=args.step_size,
        gamma=args.gamma, batch_size=args.batch_size, progress=args.progress,
    )
    print(f"{choice.label}: n = {problem.n}, d = {problem.dim}; {origin}")
    print(f"\nλ̂ = {result.llc_mean:.4g} ± {result.std_error:.2g} (d/2 = {problem.dim / 2:g})\n")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(result.summary().to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for message in result.warnings:
        print(f"warning: {message}")
    if out is not None:
        out.write_json("llc.json", {
            "model": choice.label, "n": problem.n, "d": problem.dim, "half_d": problem.dim / 2,
            "w_star": origin, "summary": result.summary().iloc[0].to_dict(),
            "llc_per_chain": result.llc_per_chain, "warnings": list(result.warnings),
        })
        out.write_figure("llc.png", result.plot())
        out.save("llc.nc", result)
        print(f"\nwrote {', '.join(str(out.path(name)) for name in OUTPUT_FILES)}")
    return 0
