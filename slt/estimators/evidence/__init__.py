"""The evidence of a model class, F = -log Z, and the comparison of classes by it.

BIC and Laplace (from the MAP), F from posterior draws (`FromDraws`: NUTS, importance and
bridge sampling, checked, the default of `free_energy` and `compare`), WBIC (the tempered
posterior at beta = 1 / log n), a reference free energy (tempered SMC / thermodynamic
integration, nested sampling), lambda and its multiplicity from several temperatures
(`rlct`), the singular BIC of a nested family (`sbic`), and `compare`, which puts them side
by side.
"""

from slt.estimators.evidence.bic import BICResult, bic
from slt.estimators.evidence.compare import ComparisonPlan, ComparisonResult, compare
from slt.estimators.evidence.draws import FromDraws
from slt.estimators.evidence.free_energy import FreeEnergyResult, free_energy
from slt.estimators.evidence.laplace import LaplaceResult, laplace
from slt.estimators.evidence.rlct import RLCTResult, inverse_temperatures, rlct
from slt.estimators.evidence.sbic import (
    SBICResult,
    sbic,
    sbic_gaussian_mixtures,
    sbic_reduced_rank,
)
from slt.estimators.evidence.wbic import TemperedSGLD, WBICResult, tempered_draws, wbic

__all__ = [
    "BICResult",
    "ComparisonPlan",
    "ComparisonResult",
    "FreeEnergyResult",
    "FromDraws",
    "LaplaceResult",
    "RLCTResult",
    "SBICResult",
    "TemperedSGLD",
    "WBICResult",
    "bic",
    "compare",
    "free_energy",
    "inverse_temperatures",
    "laplace",
    "rlct",
    "sbic",
    "sbic_gaussian_mixtures",
    "sbic_reduced_rank",
    "tempered_draws",
    "wbic",
]
