"""Estimators: the local learning coefficient and its calibration; evidence and model selection
(BIC, Laplace, WBIC, a reference free energy, lambda from temperatures, sBIC, compare)."""

from slt.estimators.bic import BICResult, bic
from slt.estimators.compare import ComparisonResult, compare
from slt.estimators.free_energy import FreeEnergyResult, free_energy
from slt.estimators.laplace import LaplaceResult, laplace
from slt.estimators.llc import LLCResult, llc
from slt.estimators.llc_calibration import CalibrationResult, llc_calibrate
from slt.estimators.llc_parts import LLCTable, leaf_parts, llc_table
from slt.estimators.llc_trajectory import LLCTrajectory, llc_trajectory
from slt.estimators.local_run import default_nbeta
from slt.estimators.rlct import RLCTResult, rlct
from slt.estimators.sbic import SBICResult, sbic, sbic_gaussian_mixtures, sbic_reduced_rank
from slt.estimators.wbic import WBICResult, wbic

__all__ = [
    "BICResult",
    "CalibrationResult",
    "ComparisonResult",
    "FreeEnergyResult",
    "LLCResult",
    "LLCTable",
    "LLCTrajectory",
    "LaplaceResult",
    "RLCTResult",
    "SBICResult",
    "WBICResult",
    "bic",
    "compare",
    "default_nbeta",
    "free_energy",
    "laplace",
    "leaf_parts",
    "llc",
    "llc_calibrate",
    "llc_table",
    "llc_trajectory",
    "rlct",
    "sbic",
    "sbic_gaussian_mixtures",
    "sbic_reduced_rank",
    "wbic",
]
