"""slt: singular learning theory and Bayesian model selection on JAX and NumPyro.

The public API, flat: `Problem` (model + data as pure JAX functions), `fit_map`, the local
learning coefficient `llc` and its calibration `llc_calibrate`, the model library `slt.models`,
and the exact answers `slt.truth`.
"""

from slt import models, truth
from slt.estimators.llc import LLCResult, llc
from slt.estimators.llc_calibration import CalibrationResult, llc_calibrate
from slt.fit import FitResult, fit_map
from slt.problem import Problem

__all__ = [
    "CalibrationResult",
    "FitResult",
    "LLCResult",
    "Problem",
    "fit_map",
    "llc",
    "llc_calibrate",
    "models",
    "truth",
]
__version__ = "0.1.0"
