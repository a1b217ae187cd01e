"""The `slt` command: model comparison, learning coefficients and Fisher landscapes from a shell.

    slt demo [--out DIR]                       the end-to-end example on bundled data
    slt compare DATA --model M --model M ...   compare model classes by free energy
    slt llc DATA --model M                     lambda_hat of a trained (or fitted) model
    slt fisher-scan --model M --axis ...       log det I and rank over a parameter grid
    slt validate [--quick]                     the estimators against exact answers
    slt cache [--clear]                        where slt keeps its programs, and clearing it

`main(argv)` runs one command and returns its exit status: 0 success, 1 a run that failed
(an estimator gave up, a numerical breakdown, a validation case outside its tolerance,
a file that could not be written), 2 a usage error (bad option, missing or malformed file,
unknown model, an option the estimators refuse, existing output without --force),
130 interrupted (Ctrl-C or SIGTERM: `slt.cli.signals`). Errors are one line on
stderr, ``slt: error: ...``; ``--debug`` shows the traceback instead. Exceptions of other
types are bugs and propagate with their traceback.

Each subcommand lives in its own module (`slt.cli.compare`, ...) with `add_parser(subparsers,
common)` and `run(args) -> int`; data, model and output handling is in `slt.cli.inputs`.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence

from slt.cli.inputs import UsageError
from slt.cli.signals import sigterm_as_interrupt
from slt.samplers.checkpoint import Interrupted
from slt.validation import InputError

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class _Parser(argparse.ArgumentParser):
    """argparse with its errors raised as `UsageError` (one line) instead of exiting."""

    def error(self, message: str):
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _common_options() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    group = common.add_argument_group("common options")
    group.add_argument("--seed", type=int, default=0,
                       help="seed of the PRNG key; same seed, same result (default: 0)")
    group.add_argument("--float32", action="store_true",
                       help="compute in float32 (default: float64; Fisher geometry is always "
                            "float64)")
    group.add_argument("--no-progress", dest="progress", action="store_false",
                       help="hide the progress bars (they go to stderr)")
    group.add_argument("--debug", action="store_true",
                       help="show the full traceback of an error")
    return common


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the `slt` command, with every subcommand."""
    from slt.cli import cache, compare, demo, fisher_scan, llc, validate

    parser = _Parser(
        prog="slt",
        description=(
            "slt, of the singular-learning package (pip install singular-learning). "
            "Singular learning theory and Bayesian model selection on JAX and NumPyro: "
            "compare model classes by free energy, estimate the learning coefficient of a "
            "trained model, map where its Fisher information is singular."
        ),
        epilog=(
            "Run 'slt COMMAND --help' for a command's options. Exit status: 0 success, "
            "1 failed run (or a validation case out of tolerance), 2 usage error, "
            "130 interrupted."
        ),
    )
    from slt import __version__

    parser.add_argument("--version", action="version",
                        version=f"slt {__version__} (singular-learning)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    common = _common_options()
    for module in (demo, compare, llc, fisher_scan, validate, cache):
        module.add_parser(subparsers, common)
    return parser


def _configure(args: argparse.Namespace) -> None:
    """Precision and warnings before any JAX work."""
    import jax

    jax.config.update("jax_enable_x64", not args.float32)
    if not args.debug:
        # Estimators record their diagnostics on the results, which the commands print.
        warnings.simplefilter("ignore")


def _one_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `slt` command with `argv` (default: sys.argv[1:]); return the exit status."""
    args = None
    try:
        args = build_parser().parse_args(argv)
        _configure(args)
        with sigterm_as_interrupt():
            return args.run(args)
    except SystemExit as exit_:  # --help and --version
        return int(exit_.code or 0)
    except Interrupted as interrupted:
        print(f"slt: interrupted: {interrupted}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except KeyboardInterrupt:  # Ctrl-C, or SIGTERM (slt.cli.signals)
        print("slt: interrupted (no partial output was written)", file=sys.stderr)
        return EXIT_INTERRUPTED
    except (UsageError, InputError) as error:
        if args is not None and args.debug:
            raise
        print(f"slt: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_USAGE
    except (ValueError, FloatingPointError, OSError) as error:
        if args is not None and args.debug:
            raise
        print(f"slt: error: {_one_line(error)}", file=sys.stderr)
        return EXIT_FAILED
