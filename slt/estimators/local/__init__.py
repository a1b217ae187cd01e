"""The local posterior around trained parameters w* and what its draws say.

pi(w) ∝ exp(-n beta L_n(w) - (gamma / 2) ||w - w*||^2), configured by values
(`posterior.LocalPosterior`; the sampler and `RunPlan` from `slt.samplers`): the local learning
coefficient `llc` and its step-size calibration `llc_calibrate`, the weight-refined LLC of
parts (`llc_table`) and along training (`llc_trajectory`), and, from one observed local run
(`observed`), the loss kernel, Bayesian influence functions and susceptibilities.
"""

from slt.estimators.local.bif import BIFResult, bif
from slt.estimators.local.calibration import CalibrationResult, llc_calibrate
from slt.estimators.local.check import LLCCheck, llc_check
from slt.estimators.local.llc import LLCResult, llc
from slt.estimators.local.loss_kernel import LossKernelResult, loss_kernel
from slt.estimators.local.parts import LLCTable, leaf_parts, llc_table
from slt.estimators.local.posterior import LocalPosterior, default_nbeta
from slt.estimators.local.susceptibilities import (
    DataShifts,
    SusceptibilityResult,
    susceptibilities,
)
from slt.estimators.local.trajectory import LLCTrajectory, PartsTrajectory, llc_trajectory

__all__ = [
    "BIFResult",
    "CalibrationResult",
    "DataShifts",
    "LLCCheck",
    "LLCResult",
    "LLCTable",
    "LLCTrajectory",
    "PartsTrajectory",
    "LocalPosterior",
    "LossKernelResult",
    "SusceptibilityResult",
    "bif",
    "default_nbeta",
    "leaf_parts",
    "llc",
    "llc_calibrate",
    "llc_check",
    "llc_table",
    "llc_trajectory",
    "loss_kernel",
    "susceptibilities",
]
