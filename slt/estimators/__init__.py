"""Estimators: the local learning coefficient and its calibration; what the local posterior says
about the data (loss kernel, Bayesian influence functions, susceptibilities); evidence and model
selection (BIC, Laplace, WBIC, a reference free energy, lambda from temperatures, sBIC,
compare)."""

from slt.estimators.bic import BICResult, bic
from slt.estimators.bif import BIFResult, bif
from slt.estimators.compare import ComparisonResult, compare
from slt.estimators.free_energy import FreeEnergyResult, free_energy
from slt.estimators.laplace import LaplaceResult, laplace
from slt.estimators.llc import LLCResult, llc
from slt.estimators.llc_calibration import CalibrationResult, llc_calibrate
from slt.estimators.llc_parts import LLCTable, leaf_parts, llc_table
from slt.estimators.llc_trajectory import LLCTrajectory, llc_trajectory
from slt.estimators.local_run import default_nbeta
from slt.estimators.loss_kernel import LossKernelResult, loss_kernel
from slt.estimators.rlct import RLCTResult, rlct
from slt.estimators.sbic import SBICResult, sbic, sbic_gaussian_mixtures, sbic_reduced_rank
from slt.estimators.susceptibilities import SusceptibilityResult, susceptibilities
from slt.estimators.wbic import WBICResult, wbic

__all__ = [
    "BICResult",
    "BIFResult",
    "CalibrationResult",
    "ComparisonResult",
    "FreeEnergyResult",
    "LLCResult",
    "LLCTable",
    "LLCTrajectory",
    "LaplaceResult",
    "LossKernelResult",
    "RLCTResult",
    "SBICResult",
    "SusceptibilityResult",
    "WBICResult",
    "bic",
    "bif",
    "compare",
    "default_nbeta",
    "free_energy",
    "laplace",
    "leaf_parts",
    "llc",
    "llc_calibrate",
    "llc_table",
    "llc_trajectory",
    "loss_kernel",
    "rlct",
    "sbic",
    "sbic_gaussian_mixtures",
    "sbic_reduced_rank",
    "susceptibilities",
    "wbic",
]
