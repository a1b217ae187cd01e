"""What a Fisher computation is asked for, as one frozen value: `FisherRequest`.

Every Fisher function of `slt.geometry` (`fisher_information`, `fisher_scan`, `fisher_slice`,
`fisher_spectrum`, `fisher_summary`, `fisher_vector_product`) takes the model, the point,
the PRNG key where it needs one, and a `FisherRequest`: which estimator, over which inputs
or data, how many Monte Carlo draws, in which coordinates, with which rank tolerance. The
request is built and checked once, its defaults live in its definition, and the same value
serves a point, a scan and a slice.

Example:
  >>> FisherRequest(kind="monte_carlo", num_draws=200, x=np.zeros((50, 2)))
  FisherRequest(kind='monte_carlo', x=<50x2 array>, x_weights=None, data=None, num_draws=200, \
coordinates='natural', rank_tol=1e-10)
  >>> FisherRequest(num_draws=200)
  Traceback (most recent call last):
  slt.validation.InputError: num_draws is for kind='monte_carlo' (its replicates), not 'exact'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from slt.geometry.coordinates import COORDINATE_SYSTEMS
from slt.geometry.spectrum import DEFAULT_RANK_TOL, check_rank_tol
from slt.validation import InputError, require_int, require_one_of, set_field

__all__ = ["KINDS", "FisherRequest"]

KINDS = ("exact", "monte_carlo", "empirical")



def _short(value: Any) -> str:
    """An array as its shape (<50x2 array>), a dict of arrays entry by entry, else repr."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{key!r}: {_short(item)}" for key, item in value.items()) + "}"
    if value is None or isinstance(value, str | bool | int | float):
        return repr(value)
    shape = np.shape(value)
    return f"<{'x'.join(map(str, shape)) or 'scalar'} array>"


@dataclass(frozen=True, eq=False)
class FisherRequest:
    """A Fisher information computation: which estimator, over which inputs, in which coordinates.

    The Fisher information of a model p(y | x, theta) at theta is

        I(theta) = E_x E_{y ~ p(y | x, theta)} [ s s^T ],   s = grad_theta log p(y | x, theta),

    with E_x the weighted average over the inputs x_1, ..., x_n (weights w_j >= 0, normalised
    to sum 1; uniform by default):

        I(theta) = sum_j w_j E_{y ~ p(y | x_j, theta)} [ s_j s_j^T ].

    `kind` says how the inner expectation is computed (`slt.geometry.kernels`):

    * "exact": in closed form (Gaussian noise with a known or learned scale, Bernoulli,
      Binomial, Poisson, Categorical, multivariate normal with a fixed covariance), or by
      quadrature over y (scalar mixtures of normals);
    * "monte_carlo": by R = `num_draws` replicates, replicate r drawing one y_jr ~
      p(y | x_j, theta) for every input: I_r = sum_j w_j s_jr s_jr^T, the estimate is the mean
      of the I_r and its entry-wise standard error their standard deviation / sqrt(R);
    * "empirical": at the observed data instead of draws from the model,
      (1/n) sum_i g_i g_i^T with g_i = grad_theta log p(y_i | x_i, theta). This is not the
      Fisher information away from the truth (Kunstner et al. 2019), and is labelled so.

    The PRNG key of "monte_carlo" (and of Lanczos) is not part of the request: the functions
    take it as `key=`, as everywhere in slt. A request holds arrays, so it compares by
    identity; its repr shows arrays by their shape.

    Attributes:
      kind: "exact" (default), "monte_carlo" or "empirical".
      x: the inputs x_j, shape (n, ...), of a regression model (None: a `Problem`'s own
        inputs; required for a regression `ModelSpec`; refused by density models). Not used
        by "empirical", which takes its inputs from `data`.
      x_weights: the weights w_j of the inputs, n finite non-negative numbers with a positive
        sum (normalised to 1), e.g. Gauss-Hermite weights so that the average is a population
        expectation (`slt.geometry.fisher.gauss_hermite_inputs`); None: uniform.
      data: the observed {"x": ..., "y": ...} (or {"y": ...}) of kind="empirical" (None: a
        `Problem`'s data); refused by the other kinds.
      num_draws: R >= 2, the replicates of kind="monte_carlo" (required there, refused by the
        other kinds). Not `num_samples`, which in slt counts a sampler's draws per chain
        (docs/glossary.md).
      coordinates: "natural" (the site values themselves) or "unconstrained" (the
        coordinates of `slt.Problem`), see `slt.geometry.coordinates`: the coordinates of the
        matrix, of a scan's grid and of a slice's directions.
      rank_tol: the relative tolerance in (0, 1) of the numerical rank: eigenvalues at most
        rank_tol times the largest count as zero (`slt.geometry.spectrum`, which explains the
        default 1e-10).

    Raises:
      InputError (a ValueError): a field out of its range, named in the message: an unknown
        kind or coordinate system, num_draws missing or below 2 for "monte_carlo" or given
        for another kind, data given for a kind other than "empirical" or not a dict, x or
        x_weights given with "empirical", x_weights not finite, negative, summing to 0 or
        not one per input, rank_tol outside (0, 1).

    Example:
      >>> spec = slt.models.fixed_component_mixture()
      >>> request = FisherRequest(kind="monte_carlo", num_draws=400)
      >>> fisher = slt.fisher_information(spec, {"pi": 0.5, "mu": 1.0, "sigma": 1.0},
      ...                                 key=jax.random.key(0), request=request)
      >>> fisher.num_draws, fisher.std_error.shape
      (400, (3, 3))
    """

    kind: str = "exact"
    x: Any = None
    x_weights: Any = None
    data: Mapping[str, Any] | None = None
    num_draws: int | None = None
    coordinates: str = "natural"
    rank_tol: float = DEFAULT_RANK_TOL

    def __post_init__(self):
        require_one_of("kind", self.kind, KINDS)
        if self.kind == "monte_carlo":
            if self.num_draws is None:
                raise InputError(
                    "kind='monte_carlo' needs num_draws, its replicates: an integer >= 2 "
                    "(e.g. num_draws=200)"
                )
            set_field(self, "num_draws", require_int("num_draws", self.num_draws, minimum=2))
        elif self.num_draws is not None:
            raise InputError(
                f"num_draws is for kind='monte_carlo' (its replicates), not {self.kind!r}"
            )
        if self.kind == "empirical":
            if self.data is not None and not isinstance(self.data, Mapping):
                raise InputError(
                    "data must be a dict {'x': ..., 'y': ...} (or {'y': ...}), got "
                    f"{type(self.data).__name__}"
                )
            if self.x is not None or self.x_weights is not None:
                raise InputError("kind='empirical' takes its inputs from data; leave x and "
                                 "x_weights None")
        elif self.data is not None:
            raise InputError(
                f"data is for kind='empirical'; kind={self.kind!r} uses x (inputs) only"
            )
        if self.x_weights is not None:
            self._check_x_weights()
        require_one_of("coordinates", self.coordinates, COORDINATE_SYSTEMS)
        set_field(self, "rank_tol", check_rank_tol(self.rank_tol))

    def _check_x_weights(self) -> None:
        """x_weights: one finite non-negative number per input (when x is given here; a
        Problem's inputs are counted by `prepare`), with a positive sum."""
        try:
            weights = np.asarray(self.x_weights, dtype=np.float64)
        except (TypeError, ValueError):
            weights = None
        n = np.shape(self.x)[0] if self.x is not None and np.ndim(self.x) > 0 else None
        if (weights is None or weights.ndim != 1 or (n is not None and weights.shape[0] != n)
                or not np.all(np.isfinite(weights)) or np.any(weights < 0)):
            count = "" if n is None else f"{n} "
            raise InputError(
                f"x_weights must be {count}finite non-negative numbers (one per input x), got "
                f"{self.x_weights!r}"
            )
        if not weights.sum() > 0:
            raise InputError("x_weights sum to 0: give at least one input a positive weight")

    def __repr__(self) -> str:
        return (
            f"FisherRequest(kind={self.kind!r}, x={_short(self.x)}, "
            f"x_weights={_short(self.x_weights)}, data={_short(self.data)}, "
            f"num_draws={self.num_draws!r}, coordinates={self.coordinates!r}, "
            f"rank_tol={self.rank_tol:g})"
        )
