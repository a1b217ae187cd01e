"""`slt fisher-scan`: Fisher information rank and log det over a 1-D or 2-D parameter grid.

The model is a `ModelSpec` (a built-in, or ``module:attribute`` naming one). The base point
is given by ``--at NAME=VALUE`` (and/or ``--params FILE.npz``); one or two ``--axis
NAME=START:STOP:NUM`` vary coordinates around it (`slt.fisher_scan`). A regression model
averages the Fisher over inputs x: those of ``--data``, or, for a model with one scalar input
and no ``--data``, x ~ N(0, 1) by 40-point Gauss-Hermite quadrature (the population Fisher).
Prints how many grid points have each rank; with ``--out DIR`` writes fisher_scan.png (log det
I and rank, singular set outlined), fisher_scan.csv (every grid point), fisher_scan.json (the
rank table and settings) and fisher_scan.nc (the full result).
"""

from __future__ import annotations

import argparse

import jax
import numpy as np

from slt.cli.inputs import OutputFolder, UsageError, load_data, parse_model, parse_point
from slt.cli.options import add_command, add_data_options, add_output_options, positive_int
from slt.geometry.fisher import KINDS, FisherRequest, gauss_hermite_inputs
from slt.geometry.observation import observation_model
from slt.geometry.scan import fisher_scan

__all__ = ["add_parser", "run", "OUTPUT_FILES", "parse_axis"]

OUTPUT_FILES = ("fisher_scan.png", "fisher_scan.csv", "fisher_scan.json", "fisher_scan.nc")


def parse_axis(text: str) -> tuple[str, np.ndarray]:
    """``NAME=START:STOP:NUM`` as (NAME, NUM points from START to STOP inclusive)."""
    name, equals, grid = text.partition("=")
    parts = grid.split(":")
    try:
        if not equals or not name.strip() or len(parts) != 3:
            raise ValueError
        start, stop, num = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"write NAME=START:STOP:NUM, e.g. mu=-3:3:121, got {text!r}") from None
    if num < 1 or not (np.isfinite(start) and np.isfinite(stop)):
        raise argparse.ArgumentTypeError(f"NUM must be >= 1 and the bounds finite in {text!r}")
    return name.strip(), np.linspace(start, stop, num)


def add_parser(subparsers, common: argparse.ArgumentParser) -> None:
    parser = add_command(
        subparsers, common, "fisher-scan", run,
        help="map the Fisher information's rank and log det over a parameter grid",
        description=(
            "Compute the Fisher information I(θ) of a model over a 1-D or 2-D grid of "
            "parameter values: its rank and log det show where the model is regular "
            "(rank = d) and where it is singular."
        ),
        epilog=(
            "Examples:\n"
            "  slt fisher-scan -m fixed_component_mixture --at pi=0.5 --at mu=1 --at sigma=1 \\\n"
            "      --axis pi=0:1:101 --axis mu=-3:3:121 --out scan/\n"
            "  slt fisher-scan -m 'two_layer_network(1, 2, 1)' --params point.npz "
            "--axis 'U[0,1]=-1:1:201'\n"
            "Coordinates are named as in slt.fisher_information: a scalar site ('mu') or an "
            "entry of an array site ('V[1,0]')."
        ),
    )
    parser.add_argument("-m", "--model", required=True, metavar="MODEL",
                        help="a built-in with arguments, e.g. fixed_component_mixture, or "
                             "module:attribute naming an slt.models.ModelSpec")
    parser.add_argument("--at", action="append", default=[], metavar="NAME=VALUE",
                        help="the base point: a site's constrained value, a number or a JSON "
                             "list (repeat for every site)")
    parser.add_argument("--params", metavar="NPZ",
                        help="the base point as an .npz of site values (--at overrides)")
    parser.add_argument("--axis", action="append", required=True, type=parse_axis,
                        metavar="NAME=START:STOP:NUM",
                        help="a scanned coordinate and its grid; give one or two")
    parser.add_argument("--kind", choices=KINDS, default="exact",
                        help="exact (default), monte_carlo or empirical (gradients at --data)")
    parser.add_argument("--num-draws", "--num-samples", dest="num_draws", type=positive_int,
                        default=None, help="replicates for --kind monte_carlo (--num-samples: "
                                           "its older name)")
    parser.add_argument("--coordinates", choices=("natural", "unconstrained"), default="natural",
                        help="coordinates of the grid and of the matrix (default: natural)")
    add_data_options(parser, required=False)
    add_output_options(parser, OUTPUT_FILES)


def _inputs(args, choice, values):
    """The fields `x`, `x_weights`, `data` of the scan's `FisherRequest`."""
    try:
        observation, _ = observation_model(choice.spec, values)
    except ValueError as error:
        raise UsageError(str(error)) from None
    if args.data is not None:
        data = load_data(args.data, choice, x_columns=args.x, y_columns=args.y)
        if args.kind == "empirical":
            return {"data": data}
        return {"x": data.get("x")} if observation.has_inputs else {}
    if args.kind == "empirical":
        raise UsageError("--kind empirical needs --data")
    if not observation.has_inputs:
        return {}
    if int(np.prod(observation.input_shape)) != 1:
        raise UsageError(f"{choice.label} takes inputs of shape {observation.input_shape}: "
                         "give them with --data")
    nodes, weights = gauss_hermite_inputs()
    return {"x": nodes.reshape((-1, *observation.input_shape)), "x_weights": weights}


def run(args: argparse.Namespace) -> int:
    """Parse the point and grid, scan, print and (with --out) write the result."""
    if len(args.axis) > 2:
        raise UsageError("give one or two --axis options")
    out = None if args.out is None else OutputFolder(args.out, OUTPUT_FILES, force=args.force)
    choice = parse_model(args.model)
    if choice.spec is None:
        raise UsageError(f"fisher-scan needs a ModelSpec; {args.model!r} is a plain NumPyro "
                         "model (wrap it in slt.models.ModelSpec with a simulate function)")
    values = parse_point(args.at, args.params)
    monte_carlo = args.kind == "monte_carlo"
    if monte_carlo and args.num_draws is None:
        raise UsageError("--kind monte_carlo needs --num-draws (e.g. 200)")
    try:
        request = FisherRequest(kind=args.kind, coordinates=args.coordinates,
                                num_draws=args.num_draws, **_inputs(args, choice, values))
        scan = fisher_scan(
            choice.spec, values, dict(args.axis),
            key=jax.random.key(args.seed) if monte_carlo else None, request=request,
            progress=args.progress,
        )
    except ValueError as error:  # every ValueError of fisher_scan is about its arguments
        raise UsageError(str(error)) from None
    print(scan)
    print()
    print(scan.summary().to_string(float_format=lambda v: f"{v:.4g}"))
    if out is not None:
        write_scan(out, scan, "fisher_scan")
        print(f"\nwrote {', '.join(str(out.path(name)) for name in OUTPUT_FILES)}")
    return 0


def write_scan(out: OutputFolder, scan, stem: str) -> None:
    """Write `<stem>.png`, `.csv`, `.json` and `.nc` of a `FisherScan` into `out`."""
    out.write_figure(f"{stem}.png", scan.plot())
    out.write(f"{stem}.csv", lambda path: scan.dataset.to_dataframe().to_csv(path))
    out.write_json(f"{stem}.json", {
        "model": scan.model_name, "axes": list(scan.axes), "d": scan.dim, "kind": scan.kind,
        "coordinates": scan.coordinates, "rank_tol": scan.rank_tol, "base": scan.base,
        "ranks": scan.summary().reset_index().to_dict(orient="records"),
    })
    out.save(f"{stem}.nc", scan)
