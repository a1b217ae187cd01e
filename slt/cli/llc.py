"""`slt llc`: the local learning coefficient λ̂(w*) of a model at trained parameters.

w* is read from ``--params FILE.npz`` (constrained site values, one array per site, e.g. a
network trained elsewhere) or, without it, fitted by maximum likelihood (`slt.fit_map` with
``prior=False``). λ̂ comes from `slt.llc` (localized SGLD, step size calibrated unless
``--step-size`` is given; SGHMC with ``--sampler sghmc``; or an exact sampler,
``--sampler mala|hmc``) and is printed
beside d/2, BIC's complexity, with the run's diagnostics. With ``--out DIR``: llc.json
(estimate, diagnostics, configuration), llc.png (traces) and llc.nc (the full result).

The options build the three values `slt.llc` takes (`local_values`): the local posterior
(`slt.LocalPosterior`: ``--gamma``), the sampler (``--sampler``: `slt.samplers.SGLD`,
`slt.samplers.SGHMC`, or an exact full-batch `slt.samplers.MALA` / `slt.samplers.HMC`;
``--step-size``, ``--batch-size``)
and the run plan (`slt.RunPlan`: ``--num-chains``, ``--num-samples``, ``--num-warmup``). Every
default is the value's own (read from its definition), never a copy of it.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import jax
import numpy as np
import pandas as pd

from slt.cli.inputs import OutputFolder, UsageError, load_problem, parse_model, parse_point
from slt.cli.options import (
    add_command,
    add_data_options,
    add_output_options,
    positive_float,
    positive_int,
    run_length,
)
from slt.estimators.local.llc import llc
from slt.estimators.local.posterior import LocalPosterior
from slt.fit import MAPFit, fit_map
from slt.problem import Problem
from slt.samplers.config import HMC, MALA, SGHMC, SGLD, RunPlan, Sampler, StochasticGradient

__all__ = ["add_parser", "local_values", "run", "DEFAULTS", "OUTPUT_FILES", "SAMPLERS"]

OUTPUT_FILES = ("llc.json", "llc.png", "llc.nc")

# --sampler NAME: the sampler value it builds.
SAMPLERS = {"sgld": SGLD, "sghmc": SGHMC, "mala": MALA, "hmc": HMC}


# The values `slt.llc` takes by default, built from their definitions: the options' defaults
# are read from them, so that `slt llc` without options makes the call `slt.llc` makes.
DEFAULTS = {"posterior": LocalPosterior(), "sampler": SGLD(), "plan": RunPlan()}


def _step_size(text: str) -> float | str:
    return text if text == "auto" else positive_float(text)


def _sampler_name(sampler: Sampler) -> str:
    (name,) = [name for name, kind in SAMPLERS.items() if type(sampler) is kind]
    return name


def add_parser(subparsers, common: argparse.ArgumentParser) -> None:
    parser = add_command(
        subparsers, common, "llc", run,
        help="estimate the learning coefficient λ̂ of a trained model on your data",
        description=(
            "Estimate the local learning coefficient λ̂(w*) = nβ (E[L_n(w)] - L_n(w*)) by "
            "localized SGLD (or an exact sampler, --sampler mala|hmc) at trained "
            "parameters w* (from --params, else the maximum-likelihood fit), and set it "
            "beside d/2, the complexity BIC assumes."
        ),
        epilog=(
            "Examples:\n"
            "  slt llc data.csv --y target -m 'two_layer_network(3, 8, 1)'\n"
            "  slt llc data.npz -m mymodels:model --params trained.npz --out llc/\n"
            "  slt llc data.csv --y target -m 'linear_regression(3)' --sampler mala"
        ),
    )
    add_data_options(parser, required=True)
    parser.add_argument("-m", "--model", required=True, metavar="MODEL",
                        help="a built-in with arguments, e.g. 'two_layer_network(1, 3, 1)', or "
                             "module:function for your NumPyro model")
    parser.add_argument("--params", metavar="NPZ",
                        help="trained parameters w*: one array per latent site, constrained "
                             "values (default: fit the maximum-likelihood w*)")
    posterior, default_sampler, plan = (DEFAULTS[name] for name in
                                        ("posterior", "sampler", "plan"))
    step_sizes = sorted({str(kind().step_size) for kind in SAMPLERS.values()})
    sampler = parser.add_argument_group("sampler")
    sampler.add_argument("--sampler", choices=list(SAMPLERS),
                         default=_sampler_name(default_sampler),
                         help="sgld: stochastic-gradient Langevin dynamics on minibatches; "
                              "sghmc: stochastic-gradient HMC with control variates; "
                              "mala, hmc: exact full-batch samplers of the same local posterior "
                              "(Metropolis-adjusted, step size adapted during the warmup), to "
                              "check SGLD's answer (default: %(default)s)")
    sampler.add_argument("--num-chains", type=positive_int, default=plan.num_chains,
                         help="independent chains (default: %(default)s)")
    sampler.add_argument("--num-samples", type=run_length(1), default=plan.num_samples,
                         help="draws per chain kept for the estimate, or 'auto': until the "
                              "standard error is --target-se of λ̂ (default: %(default)s)")
    sampler.add_argument("--num-warmup", type=run_length(0), default=plan.num_warmup,
                         help="steps per chain discarded first, or 'auto': until the chains "
                              "look stationary (default: %(default)s)")
    sampler.add_argument("--target-se", type=positive_float, default=plan.target_se,
                         help="with --num-samples auto, the standard error to reach, as a "
                              "fraction of λ̂ (default: %(default)s)")
    sampler.add_argument("--max-steps", type=positive_int, default=plan.max_steps,
                         help="with an 'auto' length, the most steps a chain runs "
                              "(default: %(default)s)")
    sampler.add_argument("--step-size", type=_step_size, default=None,
                         help="the sampler's step size, or 'auto': SGLD's and SGHMC's "
                              "calibrated, MALA's "
                              "and HMC's adapted during the warmup (default: "
                              f"{' / '.join(step_sizes)})")
    sampler.add_argument("--gamma", type=positive_float, default=posterior.gamma,
                         help="localization strength γ (default: %(default)s)")
    sampler.add_argument("--batch-size", type=positive_int, default=None,
                         help=f"SGLD's and SGHMC's minibatch size (default: "
                              f"{SGLD().batch_size}; the "
                              "exact samplers use all the data)")
    sampler.add_argument("--num-restarts", type=positive_int, default=MAPFit().num_restarts,
                         help="random restarts of the maximum-likelihood fit "
                              "(default: %(default)s)")
    add_output_options(parser, OUTPUT_FILES)


def local_values(args: argparse.Namespace) -> tuple[LocalPosterior, Sampler, RunPlan]:
    """The local posterior, the sampler and the run plan the options describe.

    An option not given leaves the value's own default (a sampler's step size and batch size,
    every field without an option); ``--batch-size`` sets SGLD's or SGHMC's minibatches and
    needs ``--sampler sgld`` or ``sghmc``.

    Raises:
      UsageError: ``--batch-size`` with an exact sampler.
      InputError: a value refusing a field (`slt.samplers.config`).
    """
    kind = SAMPLERS[args.sampler]
    fields = {} if args.step_size is None else {"step_size": args.step_size}
    if args.batch_size is not None:
        if not issubclass(kind, StochasticGradient):
            raise UsageError(f"--batch-size sets SGLD's and SGHMC's minibatches; --sampler "
                             f"{args.sampler} uses all the data: drop --batch-size or use "
                             "--sampler sgld or sghmc")
        fields["batch_size"] = args.batch_size
    return (
        replace(DEFAULTS["posterior"], gamma=args.gamma),
        kind(**fields),
        replace(DEFAULTS["plan"], num_chains=args.num_chains, num_samples=args.num_samples,
                num_warmup=args.num_warmup, target_se=args.target_se,
                max_steps=args.max_steps, progress=args.progress),
    )


def _center(problem: Problem, args: argparse.Namespace):
    """w* in unconstrained coordinates, and a line saying where it came from."""
    if args.params is None:
        fit = fit_map(problem, jax.random.key(args.seed + 1),
                      MAPFit(num_restarts=args.num_restarts), prior=False)
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
    problem = load_problem(args.data, choice, x_columns=args.x, y_columns=args.y)
    posterior, sampler, plan = local_values(args)
    params, origin = _center(problem, args)
    result = llc(problem, params, jax.random.key(args.seed), posterior=posterior,
                 sampler=sampler, plan=plan)
    print(f"{choice.label}: n = {problem.n}, d = {problem.dim}; {origin}; "
          f"sampler {result.sampler}")
    print(f"\nλ̂ = {result.llc_mean:.4g} ± {result.std_error:.2g} (d/2 = {problem.dim / 2:g})")
    print(f"{result.num_warmup} warmup steps and {result.num_samples} draws per chain, "
          f"{result.gradients:,} per-example gradients: {result.stop_reason}\n")
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(result.summary().to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    for message in result.warnings:
        print(f"warning: {message}")
    if out is not None:
        out.write_json("llc.json", {
            "model": choice.label, "n": problem.n, "d": problem.dim, "half_d": problem.dim / 2,
            "w_star": origin, "sampler": result.sampler,
            "summary": result.summary().iloc[0].to_dict(),
            "llc_per_chain": result.llc_per_chain, "warnings": list(result.warnings),
        })
        out.write_figure("llc.png", result.plot())
        out.save("llc.nc", result)
        print(f"\nwrote {', '.join(str(out.path(name)) for name in OUTPUT_FILES)}")
    return 0
