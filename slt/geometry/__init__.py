"""Fisher geometry: where a model is regular and where it is singular.

`model` is a `Problem` built from any NumPyro model (its data give the default inputs x and
the empirical data) or a `ModelSpec` of `slt.models`; points are constrained site values.
Exact Fisher and KL cover Gaussian noise, the exponential families of `families`
(Bernoulli, Binomial, Poisson, Categorical) and scalar mixtures of normals.

* `fisher_information(model, params, kind=...)`: the Fisher matrix I(theta) at one point
  ("exact", "monte_carlo", or the "empirical" gradient outer product), with its spectrum,
  numerical rank, log det and log pseudo-det, in float64 (`FisherResult`).
* `kl_divergence(model, w0, w1)`: KL between two parameter points (its Hessian is I).
* `fisher_scan(model, params, axes={...})`: the spectrum over a 1-D or 2-D grid, in compiled
  chunks (`FisherScan`, an xarray Dataset with `plot()`).
* `fisher_vector_product`, `fisher_spectrum`: matrix-free products and Lanczos for large d.
* `fisher_summary`: trace, rank and log pseudo-det of a large Fisher by stochastic Lanczos
  quadrature and Hutchinson's estimator (`FisherSummary`); `stochastic_trace.spectral_summary`
  is its pure, vmappable core.
* `symmetry`: symmetry generators of two-layer networks, expected nullities, the split of
  the null space into symmetry and excess, conserved quantities, moves along orbits.
* `relative_fisher`: closed-form relative Fisher matrices of single neurons and layers
  (Sun & Nielsen 2016): cheap per-layer metrics, not identifiability tests.
"""

from slt.geometry import relative_fisher, symmetry
from slt.geometry.fisher import KINDS, FisherResult, fisher_information
from slt.geometry.kl import kl_divergence
from slt.geometry.matrix_free import LanczosSpectrum, fisher_spectrum, fisher_vector_product
from slt.geometry.scan import FisherScan, fisher_scan
from slt.geometry.spectrum import DEFAULT_RANK_TOL
from slt.geometry.stochastic_trace import FisherSummary, fisher_summary

__all__ = [
    "DEFAULT_RANK_TOL",
    "KINDS",
    "FisherResult",
    "FisherScan",
    "FisherSummary",
    "LanczosSpectrum",
    "fisher_information",
    "fisher_scan",
    "fisher_spectrum",
    "fisher_summary",
    "fisher_vector_product",
    "kl_divergence",
    "relative_fisher",
    "symmetry",
]
