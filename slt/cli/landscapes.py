"""The Fisher landscapes of the seed slides and notes: part 3 of `slt demo`, as scans and figures.

The slides (seed 001, "Neural networks and information geometry") plot det I(theta) of the
mixture pi N(mu, sigma^2) + (1 - pi) N(0, 1) against mu (pi = 0.5, sigma = 1) and against pi
(mu = 1, sigma = 1); the notes (seed 000) discuss the two-layer network's singular sets.
`seed_scans` computes, with the exact (quadrature / population) Fisher:

* "mixture_mu": mu in [-3, 3] at pi = 0.5, sigma = 1. Singular at mu = 0 (rank 2: both
  components are N(0, 1), pi is unidentifiable).
* "mixture_pi": pi in [0, 1] at mu = 1, sigma = 1. Singular at pi = 0 (rank 1: mu and sigma
  are unidentifiable).
* "mixture_pi_mu": the 2-D map over (pi, mu), sigma = 1: singular along mu = 0 (rank 2) and
  pi = 0 (rank 1), rank 0 at the corner (0, 0).
* "tanh_outgoing": the 1-2-1 tanh network with biases, unit 1's outgoing weight U[0,1] in
  [-1, 1]: rank drops by n + 1 = 2 at U[0,1] = 0.
* "tanh_units": the 2-D map over unit 1's (V[1,0], b[1]) with unit 0 at (1.5, 0.5):
  singular where the units coincide (1.5, 0.5) or are negatives (-1.5, -0.5) (tanh is odd),
  and along V[1,0] = 0, where unit 1 is a constant, confounded with the output bias.

The networks' Fisher is the population one, x ~ N(0, 1), by 40-point Gauss-Hermite
quadrature over x (`slt.geometry.fisher.gauss_hermite_inputs`). `seed_figures` draws the
scans (`FisherScan.plot`): log det and rank, not det, which depends on the coordinates.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from slt import models
from slt.geometry.fisher import FisherRequest, gauss_hermite_inputs
from slt.geometry.scan import FisherScan, fisher_scan

__all__ = ["MIXTURE_BASE", "POINTS", "POINTS_2D", "TANH_BASE", "seed_figures", "seed_scans"]

MIXTURE_BASE = {"pi": 0.5, "mu": 1.0, "sigma": 1.0}
TANH_BASE = {
    "V": np.array([[1.5], [-1.0]]),
    "b": np.array([0.5, 1.0]),
    "U": np.array([[1.0, 0.8]]),
    "c": np.array([0.2]),
}
# grid points of the 1-D scans, and per axis of the 2-D maps (odd: 0 is on the grid)
POINTS, POINTS_2D = 241, 121


def _symmetric_grid(half_width: float, half_count: int) -> np.ndarray:
    """2 half_count + 1 points on [-half_width, half_width], with 0 exactly in the middle."""
    return half_width * np.arange(-half_count, half_count + 1) / half_count


def seed_scans(
    *, points: int = POINTS, points_2d: int = POINTS_2D, progress: bool = False
) -> dict[str, FisherScan]:
    """The five scans described in the module docstring, as {name: FisherScan}.

    Args:
      points: grid points of the 1-D scans (odd values put 0 on the grid).
      points_2d: grid points per axis of the 2-D maps.
      progress: show progress bars.

    Returns:
      {"mixture_mu", "mixture_pi", "mixture_pi_mu", "tanh_outgoing", "tanh_units"} ->
      `FisherScan`.
    """
    half, half_2d = max(points // 2, 1), max(points_2d // 2, 1)
    mixture = models.fixed_component_mixture()
    tanh = models.two_layer_network(1, 2, 1, activation="tanh")
    x, weights = gauss_hermite_inputs()
    network = {"request": FisherRequest(x=x, x_weights=weights), "progress": progress}
    return {
        "mixture_mu": fisher_scan(
            mixture, MIXTURE_BASE, {"mu": _symmetric_grid(3.0, half)}, progress=progress
        ),
        "mixture_pi": fisher_scan(
            mixture, MIXTURE_BASE, {"pi": np.linspace(0.0, 1.0, points)}, progress=progress
        ),
        "mixture_pi_mu": fisher_scan(
            mixture,
            MIXTURE_BASE,
            {"pi": np.linspace(0.0, 1.0, points_2d), "mu": _symmetric_grid(3.0, half_2d)},
            progress=progress,
        ),
        "tanh_outgoing": fisher_scan(
            tanh, TANH_BASE, {"U[0,1]": _symmetric_grid(1.0, half)}, **network
        ),
        "tanh_units": fisher_scan(
            tanh,
            TANH_BASE,
            {"V[1,0]": _symmetric_grid(2.5, half_2d), "b[1]": _symmetric_grid(2.5, half_2d)},
            **network,
        ),
    }


def seed_figures(directory=None, *, scans=None, points: int = POINTS, points_2d: int = POINTS_2D):
    """The seed slides' Fisher landscapes as figures, one per scan of `seed_scans`.

    Args:
      directory: if given, each figure is also saved there as `<name>.png`.
      scans: precomputed `seed_scans()`; computed here otherwise.
      points, points_2d: grid sizes passed to `seed_scans`.

    Returns:
      {name: matplotlib Figure} for "mixture_mu", "mixture_pi", "mixture_pi_mu",
      "tanh_outgoing" and "tanh_units".
    """
    scans = seed_scans(points=points, points_2d=points_2d) if scans is None else scans
    figures = {name: scan.plot() for name, scan in scans.items()}
    if directory is not None:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        for name, figure in figures.items():
            figure.savefig(path / f"{name}.png", dpi=120)
    return figures
