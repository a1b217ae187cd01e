"""Fisher geometry: where a model is regular and where it is singular.

`model` is a `Problem` built from any NumPyro model (its data give the default inputs x and
the empirical data), a `Problem.from_predict` of a network trained elsewhere (its points are
the network's parameter pytrees), a NumPyro model function with its inputs
(`FisherRequest(x=...)`), or a `ModelSpec` of `slt.models`; points are constrained site
values. Exact Fisher and KL cover
Gaussian noise (known or learned scale, per output), the exponential families of `families`
(Bernoulli, Binomial, Poisson, Categorical, multivariate normal with a fixed covariance) and
scalar mixtures of normals; Monte Carlo covers any family NumPyro can sample.

* `FisherRequest(kind=..., x=..., ...)`: what a Fisher computation is asked for, one frozen
  value that every Fisher function below takes as `request=`: the kind ("exact",
  "monte_carlo", or the "empirical" gradient outer product), the inputs x and their weights,
  the empirical data, the Monte Carlo draws, the coordinates and the rank tolerance.
* `fisher_information(model, params, key=..., request=...)`: the Fisher matrix I(theta) at
  one point, with its spectrum, numerical rank, log det and log pseudo-det, in float64
  (`FisherResult`).
* `kl_divergence(model, w0, w1)`: KL between two parameter points (its Hessian is I).
* `fisher_scan(model, params, axes={...})`: the spectrum over a 1-D or 2-D grid, in compiled
  chunks (`FisherScan`, an xarray Dataset with `plot()`).
* `fisher_slice(model, params, directions={"s": (u, grid), ...})`: the spectrum and the loss
  along one or two directions through params (random, Fisher eigenvectors, the segment to
  another point: `random_directions`, `direction_between`), dense or matrix-free
  (`MatrixFree(num_steps=...)`).
* `fisher_vector_product`, `fisher_spectrum`: matrix-free products and Lanczos for large d.
* `fisher_summary`: trace, rank and log pseudo-det of a large Fisher by stochastic Lanczos
  quadrature and Hutchinson's estimator (`FisherSummary`); `stochastic_trace.spectral_summary`
  is its pure, vmappable core.
* `symmetry`: symmetry generators of two-layer networks, expected nullities, the split of
  the null space into symmetry and excess, conserved quantities, moves along orbits.
* `relative_fisher`: closed-form relative Fisher matrices of single neurons and layers
  (Sun & Nielsen 2016), each taking a neuron's response model as one frozen
  `relative_fisher.Response`: cheap per-layer metrics, not identifiability tests.
"""

from slt.geometry import relative_fisher, symmetry
from slt.geometry.fisher import KINDS, FisherResult, fisher_information
from slt.geometry.kl import kl_divergence
from slt.geometry.matrix_free import LanczosSpectrum, fisher_spectrum, fisher_vector_product
from slt.geometry.request import FisherRequest
from slt.geometry.scan import FisherScan, fisher_scan
from slt.geometry.slices import (
    Direction,
    MatrixFree,
    direction_between,
    fisher_slice,
    random_directions,
)
from slt.geometry.spectrum import DEFAULT_RANK_TOL
from slt.geometry.stochastic_trace import FisherSummary, fisher_summary

__all__ = [
    "DEFAULT_RANK_TOL",
    "Direction",
    "KINDS",
    "FisherRequest",
    "FisherResult",
    "FisherScan",
    "FisherSummary",
    "LanczosSpectrum",
    "MatrixFree",
    "direction_between",
    "fisher_information",
    "fisher_scan",
    "fisher_slice",
    "fisher_spectrum",
    "fisher_summary",
    "fisher_vector_product",
    "kl_divergence",
    "random_directions",
    "relative_fisher",
    "symmetry",
]
