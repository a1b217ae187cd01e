"""`slt cache`: where slt keeps its programs between runs, how much is there, and clearing it.

slt keeps compiled programs in JAX's persistent compilation cache and the evidence path's
programs traced, in that folder's `slt-traced/` (`slt.compile_cache`), so that a second run
of the same comparison starts warm. This command prints the folder in use and what it holds;
``--clear`` empties it. A folder the user gave JAX (``jax_compilation_cache_dir``,
``JAX_COMPILATION_CACHE_DIR``) rather than slt is the user's: only slt's traced programs are
removed from it.
"""

from __future__ import annotations

import argparse
import os
import shutil

from slt import compile_cache
from slt.cli.options import add_command


def add_parser(subparsers, common: argparse.ArgumentParser) -> None:
    parser = add_command(
        subparsers, common, "cache", run,
        help="show (or clear) the folder where slt keeps compiled and traced programs",
        description=(
            "Print the folder where slt keeps its compiled programs (JAX's persistent "
            "compilation cache) and its traced ones (slt-traced/), with their counts and sizes. "
            "SLT_COMPILATION_CACHE names the folder, or turns the cache off."
        ),
    )
    parser.add_argument("--clear", action="store_true",
                        help="remove the programs (from a folder of your own given to JAX: "
                             "only slt's traced ones)")


def run(args: argparse.Namespace) -> int:
    """Print the cache's folder and contents; empty it with --clear."""
    directory = compile_cache.enable_persistent_cache()
    if directory is None:
        print(f"the cache is off ({compile_cache.CACHE_ENVIRONMENT}="
              f"{os.environ.get(compile_cache.CACHE_ENVIRONMENT, '')})")
        return 0
    own = os.path.abspath(directory) == os.path.abspath(
        compile_cache.slt_cache_directory() or "")
    traced = os.path.join(directory, compile_cache.TRACED_FOLDER)
    compiled = [os.path.join(directory, name) for name in _names(directory)
                if name != compile_cache.TRACED_FOLDER]
    print(f"folder: {directory}" + ("" if own else " (set for JAX, not by slt)"))
    print(f"compiled programs: {_summary(compiled)}")
    print(f"traced programs:   {_summary([os.path.join(traced, n) for n in _names(traced)])}")
    if args.clear:
        shutil.rmtree(traced, ignore_errors=True)
        if own:
            for path in compiled:
                if os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.remove(path)
        print("cleared" + ("" if own else " slt's traced programs (the compiled ones are "
                                         "JAX's, in a folder you gave it)"))
    return 0


def _names(folder: str) -> list[str]:
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def _summary(paths: list[str]) -> str:
    size = sum(_size(path) for path in paths)
    return f"{len(paths)} files, {size / 2**20:.1f} MB"


def _size(path: str) -> int:
    if not os.path.isdir(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(folder, name))
               for folder, _, names in os.walk(path) for name in names)
