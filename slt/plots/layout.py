"""What every figure function does first: draw on the axes its caller gave, or on new ones."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

__all__ = ["figure_and_axes"]


def figure_and_axes(given, *grid, **options):
    """`given` (an Axes, or a sequence of them) with its figure; when `given` is None, a new
    figure and its axes, ``plt.subplots(*grid, **options)``.

    Returns:
      (figure, axes): the axes as given, or as `plt.subplots` returns them.

    Example:
      >>> import matplotlib
      >>> matplotlib.use("Agg")
      >>> import matplotlib.pyplot as plt
      >>> fig, pair = plt.subplots(1, 2)
      >>> figure_and_axes(pair)[0] is fig, figure_and_axes(tuple(pair))[0] is fig
      (True, True)
      >>> figure_and_axes(pair[1]) == (fig, pair[1])
      True
      >>> new, ax = figure_and_axes(None, figsize=(3, 2))
      >>> new is fig, new.get_size_inches().tolist()
      (False, [3.0, 2.0])
    """
    if given is None:
        return plt.subplots(*grid, **options)
    first = given[0] if isinstance(given, list | tuple | np.ndarray) else given
    return first.figure, given
