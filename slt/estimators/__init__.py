"""Estimators: the local learning coefficient and its calibration."""

from slt.estimators.llc import LLCResult, default_nbeta, llc
from slt.estimators.llc_calibration import CalibrationResult, llc_calibrate

__all__ = ["CalibrationResult", "LLCResult", "default_nbeta", "llc", "llc_calibrate"]
