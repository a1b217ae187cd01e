"""slt: singular learning theory and Bayesian model selection on JAX and NumPyro.

The public API, flat: `Problem` (model + data as pure JAX functions), `fit_map`, the local
learning coefficient `llc` and its calibration `llc_calibrate`, what the local posterior says
about the data (`loss_kernel`, `bif`, `susceptibilities`), evidence and model-class
comparison (`bic`, `laplace`, `wbic`, `free_energy`, `rlct`, `sbic`, `compare`), Fisher geometry
(`fisher_information`, `fisher_scan`, `fisher_summary`, `kl_divergence`, `slt.geometry`), the
model library `slt.models`, the exact answers `slt.truth`, natural-gradient training
(`natural_gradient_fit`), and the errors users meet: `InputError` (bad input, from
`slt.validation`), `Interrupted` and `CheckpointError` (stopped and resumed runs).
"""

from slt import geometry, models, truth, validation
from slt.estimators import (
    BICResult,
    BIFResult,
    ComparisonResult,
    FreeEnergyResult,
    LaplaceResult,
    LossKernelResult,
    RLCTResult,
    SBICResult,
    SusceptibilityResult,
    WBICResult,
    bic,
    bif,
    compare,
    free_energy,
    laplace,
    loss_kernel,
    rlct,
    sbic,
    susceptibilities,
    wbic,
)
from slt.estimators.llc import LLCResult, llc
from slt.estimators.llc_calibration import CalibrationResult, llc_calibrate
from slt.estimators.llc_parts import LLCTable, leaf_parts, llc_table
from slt.estimators.llc_trajectory import LLCTrajectory, llc_trajectory
from slt.fit import FitResult, fit_map
from slt.geometry import (
    FisherResult,
    FisherScan,
    FisherSummary,
    fisher_information,
    fisher_scan,
    fisher_slice,
    fisher_summary,
    kl_divergence,
)
from slt.natural_gradient import NaturalGradientResult, natural_gradient_fit
from slt.problem import Problem
from slt.samplers.checkpoint import CheckpointError, Interrupted
from slt.validation import InputError

__all__ = [
    "BICResult",
    "BIFResult",
    "CheckpointError",
    "InputError",
    "Interrupted",
    "NaturalGradientResult",
    "natural_gradient_fit",
    "validation",
    "CalibrationResult",
    "ComparisonResult",
    "FreeEnergyResult",
    "LaplaceResult",
    "LossKernelResult",
    "RLCTResult",
    "SBICResult",
    "SusceptibilityResult",
    "WBICResult",
    "bic",
    "bif",
    "compare",
    "free_energy",
    "laplace",
    "leaf_parts",
    "rlct",
    "sbic",
    "susceptibilities",
    "wbic",
    "FisherResult",
    "FisherScan",
    "FisherSummary",
    "FitResult",
    "LLCResult",
    "LLCTable",
    "LLCTrajectory",
    "Problem",
    "fisher_information",
    "fisher_scan",
    "fisher_slice",
    "fisher_summary",
    "fit_map",
    "geometry",
    "kl_divergence",
    "llc",
    "llc_calibrate",
    "llc_table",
    "llc_trajectory",
    "loss_kernel",
    "models",
    "truth",
]
__version__ = "0.1.0"
