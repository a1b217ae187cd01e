"""slt: singular learning theory and Bayesian model selection on JAX and NumPyro.

The public API, flat: `Problem` (model + data as pure JAX functions), `fit_map`, the local
learning coefficient `llc` and its calibration `llc_calibrate`, configured by values (the local
posterior `LocalPosterior`, the sampler from `slt.samplers`: `SGLD`, `MALA`, `HMC`, and the
`RunPlan`), what the local posterior says
about the data (`loss_kernel`, `bif`, `susceptibilities`), evidence and model-class
comparison (`bic`, `laplace`, `wbic`, `free_energy`, `rlct`, `sbic`, `compare`; configured by
`MAPFit`, `FromDraws`, `Tempering`, `NUTS`, `TemperedSGLD`, `NestedSampling`,
`ComparisonPlan`), Fisher geometry
(`fisher_information`, `fisher_scan`, `fisher_summary`, `kl_divergence`, `slt.geometry`), the
model library `slt.models`, the exact answers `slt.truth`, natural-gradient training
(`natural_gradient_fit`), training with checkpoints (`train_checkpoints`), and the errors
users meet: `InputError` (bad input, from `slt.validation`), `Interrupted` and
`CheckpointError` (stopped and resumed runs).
"""

from slt import compile_cache, geometry, models, parts, samplers, tokens, truth, validation
from slt.estimators import (
    BICResult,
    BIFResult,
    ComparisonPlan,
    ComparisonResult,
    FreeEnergyResult,
    FromDraws,
    LaplaceResult,
    LossKernelResult,
    RLCTResult,
    SBICResult,
    SusceptibilityResult,
    TemperedSGLD,
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
from slt.estimators.local.calibration import CalibrationResult, llc_calibrate
from slt.estimators.local.check import DisagreesWithExact, LLCCheck, llc_check
from slt.estimators.local.diagnostics import (
    BelowMinimum,
    ChainsDidNotMove,
    ChainsDisagree,
    ColdChains,
    DivergedChains,
    HotChains,
    LargeStandardError,
    LocalRunWarning,
    LowAcceptance,
    NotSettled,
    NotSpread,
    RunNote,
    TooFewDraws,
)
from slt.estimators.local.llc import LLCResult, llc
from slt.estimators.local.parts import LLCTable, leaf_parts, llc_table
from slt.estimators.local.posterior import LocalPosterior
from slt.estimators.local.susceptibilities import DataShifts
from slt.estimators.local.trajectory import LLCTrajectory, PartsTrajectory, llc_trajectory
from slt.fit import FitResult, MAPFit, fit_map, train_checkpoints
from slt.fit.natural_gradient import NaturalGradientResult, natural_gradient_fit
from slt.geometry import (
    FisherRequest,
    FisherResult,
    FisherScan,
    FisherSummary,
    fisher_information,
    fisher_scan,
    fisher_slice,
    fisher_summary,
    kl_divergence,
)
from slt.problem import Problem
from slt.samplers.checkpoint import CheckpointError, Interrupted
from slt.samplers.config import RunPlan
from slt.samplers.nested import NestedSampling
from slt.samplers.nuts import NUTS
from slt.samplers.tempering import Tempering
from slt.tokens import nbeta_from_devinterp, nbeta_to_devinterp
from slt.validation import InputError

compile_cache.enable_persistent_cache()  # JAX's on-disk cache, unless the user set their own

__all__ = [
    "ComparisonPlan",
    "FromDraws",
    "MAPFit",
    "NUTS",
    "NestedSampling",
    "TemperedSGLD",
    "Tempering",
    "DataShifts",
    "LocalPosterior",
    "RunPlan",
    "samplers",
    "parts",
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
    "FisherRequest",
    "FisherResult",
    "FisherScan",
    "FisherSummary",
    "FitResult",
    "LLCCheck",
    "LLCResult",
    "LLCTable",
    "LLCTrajectory",
    "PartsTrajectory",
    "Problem",
    "fisher_information",
    "fisher_scan",
    "fisher_slice",
    "fisher_summary",
    "fit_map",
    "train_checkpoints",
    "geometry",
    "kl_divergence",
    "llc",
    "llc_calibrate",
    "llc_check",
    "BelowMinimum",
    "ChainsDidNotMove",
    "ChainsDisagree",
    "ColdChains",
    "DisagreesWithExact",
    "DivergedChains",
    "HotChains",
    "LargeStandardError",
    "LocalRunWarning",
    "LowAcceptance",
    "NotSettled",
    "NotSpread",
    "RunNote",
    "TooFewDraws",
    "llc_table",
    "llc_trajectory",
    "loss_kernel",
    "models",
    "nbeta_from_devinterp",
    "nbeta_to_devinterp",
    "tokens",
    "truth",
]
# The version, written here only: pyproject.toml reads it ([tool.setuptools.dynamic]), and so
# does the wheel's metadata (`importlib.metadata.version("singular-learning")`). CHANGELOG.md
# says what each version changed.
__version__ = "0.1.0"
