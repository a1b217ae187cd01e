"""Fitting parameters: the point estimates the estimators start from, two ways.

* `slt.fit.map`: MAP and maximum-likelihood fits with random restarts (`fit_map`, configured
  by `MAPFit`; optax: Adam, then L-BFGS), returning a `FitResult`. The global search: it is
  what `slt.wbic`, `slt.compare` and the CLI fit before they sample.
* `slt.fit.natural_gradient`: natural-gradient fitting, steepest descent in the Fisher metric,
  damped or pseudo-inverted, from one start (`natural_gradient_fit`, configured by
  `NaturalGradientOptions`), returning a `NaturalGradientResult`; `natural_gradient` builds
  the pure (init, step) optimiser. It uses the Fisher of `slt.geometry`.

* `slt.fit.training`: Adam on L_n keeping log-spaced checkpoints (`train_checkpoints`), the
  checkpoints `slt.llc_trajectory` reads λ̂ along training from.

Both results are an `Optimum` (`slt.fit.map`). The public names of both modules are
re-exported here, except the optimiser builder `natural_gradient`, whose name is its module's:
call it as `slt.fit.natural_gradient.natural_gradient`.
"""

from slt.fit.map import FitResult, MAPFit, Optimum, fit_map
from slt.fit.natural_gradient import (
    FISHER_KINDS,
    SOLVERS,
    NaturalGradient,
    NaturalGradientDirection,
    NaturalGradientInfo,
    NaturalGradientOptions,
    NaturalGradientResult,
    NaturalGradientState,
    natural_gradient_direction,
    natural_gradient_fit,
)
from slt.fit.training import train_checkpoints

__all__ = [
    "FitResult",
    "MAPFit",
    "Optimum",
    "fit_map",
    "FISHER_KINDS",
    "SOLVERS",
    "NaturalGradient",
    "NaturalGradientDirection",
    "NaturalGradientInfo",
    "NaturalGradientOptions",
    "NaturalGradientResult",
    "NaturalGradientState",
    "natural_gradient_direction",
    "natural_gradient_fit",
    "train_checkpoints",
]
