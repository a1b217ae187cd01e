"""slt: singular learning theory and Bayesian model selection on JAX and NumPyro.

The public API, flat: `Problem` (model + data as pure JAX functions), `fit_map`, the model
library `slt.models`, and the exact answers `slt.truth`.
"""

from slt import models, truth
from slt.fit import FitResult, fit_map
from slt.problem import Problem

__all__ = ["FitResult", "Problem", "fit_map", "models", "truth"]
__version__ = "0.1.0"
