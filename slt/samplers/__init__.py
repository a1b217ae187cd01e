"""Samplers: the samplers of the local posterior as values (`SGLD`, `SGHMC`, and the exact
full-batch `MALA` and `HMC`; `Calibration` of their step size; `RunPlan`, how long and how
many chains), SGLD's and SGHMC's pure init/step functions (returning (state, info)) and the
vectorised chain runner; NUTS at several inverse temperatures (`NUTS`); adaptive tempered SMC
(`Tempering`); nested sampling (`NestedSampling`); the one unit loop they all run on
(`slt.samplers.runner`: progress, checkpoints, interrupts); checkpoints that let a stopped run
resume."""

from slt.samplers.checkpoint import CheckpointError, Interrupted
from slt.samplers.config import HMC, MALA, SGHMC, SGLD, Calibration, RunPlan
from slt.samplers.local_chains import ChainTargets, ChainTrace, run_chains
from slt.samplers.nested import NestedRun, NestedSampling, nested_sampling
from slt.samplers.nuts import NUTS, NUTSDraws, sample_nuts
from slt.samplers.sghmc import SGHMCState, sghmc
from slt.samplers.sgld import SGLDInfo, SGLDKernel, SGLDState, mala_log_acceptance, sgld
from slt.samplers.tempering import SMCRun, Tempering, sample_prior, tempered_smc

__all__ = [
    "HMC",
    "MALA",
    "NUTS",
    "SGHMC",
    "SGLD",
    "Calibration",
    "ChainTargets",
    "ChainTrace",
    "CheckpointError",
    "Interrupted",
    "NestedRun",
    "NestedSampling",
    "NUTSDraws",
    "RunPlan",
    "SGHMCState",
    "SGLDInfo",
    "SGLDKernel",
    "SGLDState",
    "SMCRun",
    "Tempering",
    "mala_log_acceptance",
    "nested_sampling",
    "run_chains",
    "sample_nuts",
    "sample_prior",
    "sghmc",
    "sgld",
    "tempered_smc",
]
