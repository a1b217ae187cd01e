"""Options shared by several `slt` subcommands, and argparse types that check numbers."""

from __future__ import annotations

import argparse

__all__ = [
    "add_command",
    "add_data_options",
    "add_output_options",
    "positive_float",
    "positive_int",
    "run_length",
]


def _number(text: str, convert, minimum, inclusive: bool, what: str):
    try:
        value = convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} expected, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")) or (
        value < minimum if inclusive else value <= minimum
    ):
        bound = f">= {minimum}" if inclusive else f"> {minimum}"
        raise argparse.ArgumentTypeError(f"must be {bound}, got {text}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1."""
    return _number(text, int, 1, True, "an integer")


def run_length(minimum: int):
    """An argparse type: "auto" or an integer >= `minimum` (a `slt.RunPlan` length)."""
    def convert(text: str) -> int | str:
        return "auto" if text == "auto" else _number(text, int, minimum, True,
                                                     "an integer or 'auto'")

    return convert


def positive_float(text: str) -> float:
    """A finite number > 0."""
    return _number(text, float, 0.0, False, "a number")


def add_command(subparsers, common: argparse.ArgumentParser, name: str, run, *, help: str,
                description: str, epilog: str | None = None) -> argparse.ArgumentParser:
    """The parser of subcommand `name`: the common options (`common`) as its parent, `run`
    (``run(args) -> int``) as what it runs (``args.run``), and an `epilog` (its examples)
    printed with its line breaks as written (argparse rewraps the description otherwise)."""
    formatter = argparse.HelpFormatter if epilog is None else argparse.RawDescriptionHelpFormatter
    parser = subparsers.add_parser(name, parents=[common], help=help, description=description,
                                   epilog=epilog, formatter_class=formatter)
    parser.set_defaults(run=run)
    return parser


def add_data_options(parser: argparse.ArgumentParser, *, required: bool) -> None:
    """DATA (positional when required, else --data) and the CSV column options --x, --y."""
    group = parser.add_argument_group("data")
    help_text = ("a .csv file with a header row, or a .npz file whose arrays are passed to the "
                 "model by name")
    if required:
        group.add_argument("data", metavar="DATA", help=help_text)
    else:
        group.add_argument("--data", metavar="DATA", help=help_text)
    group.add_argument("--y", metavar="COLS",
                       help="comma-separated CSV columns of the outputs y (default: every column "
                            "for a density model, the last column for a regression model)")
    group.add_argument("--x", metavar="COLS",
                       help="comma-separated CSV columns of the inputs x (default: the columns "
                            "not in y)")


def add_output_options(parser: argparse.ArgumentParser, files, *, default=None) -> None:
    """--out DIR and --force; `files` are listed in the help."""
    group = parser.add_argument_group("output")
    where = f" (default: {default})" if default else " (default: print only)"
    group.add_argument("--out", metavar="DIR", default=default,
                       help=f"write {', '.join(files)} into DIR{where}")
    group.add_argument("--force", action="store_true",
                       help="overwrite existing output files (refused otherwise)")
