"""slt: singular learning theory and Bayesian model selection on JAX and NumPyro.

The public API, flat: `Problem` (model + data as pure JAX functions), `fit_map`, the local
learning coefficient `llc` and its calibration `llc_calibrate`, evidence and model-class
comparison (`bic`, `laplace`, `wbic`, `free_energy`, `rlct`, `compare`), Fisher geometry
(`fisher_information`, `fisher_scan`, `kl_divergence`, `slt.geometry`), the model library
`slt.models`, and the exact answers `slt.truth`.
"""

from slt import geometry, models, truth
from slt.estimators import (
    BICResult,
    ComparisonResult,
    FreeEnergyResult,
    LaplaceResult,
    RLCTResult,
    WBICResult,
    bic,
    compare,
    free_energy,
    laplace,
    rlct,
    wbic,
)
from slt.estimators.llc import LLCResult, llc
from slt.estimators.llc_calibration import CalibrationResult, llc_calibrate
from slt.fit import FitResult, fit_map
from slt.geometry import FisherResult, FisherScan, fisher_information, fisher_scan, kl_divergence
from slt.problem import Problem

__all__ = [
    "BICResult",
    "CalibrationResult",
    "ComparisonResult",
    "FreeEnergyResult",
    "LaplaceResult",
    "RLCTResult",
    "WBICResult",
    "bic",
    "compare",
    "free_energy",
    "laplace",
    "rlct",
    "wbic",
    "FisherResult",
    "FisherScan",
    "FitResult",
    "LLCResult",
    "Problem",
    "fisher_information",
    "fisher_scan",
    "fit_map",
    "geometry",
    "kl_divergence",
    "llc",
    "llc_calibrate",
    "models",
    "truth",
]
__version__ = "0.1.0"
