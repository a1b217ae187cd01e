"""Samplers: the samplers of the local posterior as values (`SGLD`, and the exact full-batch
`MALA` and `HMC`; `Calibration` of SGLD's step size; `RunPlan`, how long and how many chains),
SGLD's pure init/step functions (returning (state, info)) and the vectorised chain runner; NUTS at per-chain inverse temperatures; adaptive tempered SMC; the one unit loop they
all run on (`slt.samplers.runner`: progress, checkpoints, interrupts); checkpoints that let a
stopped run resume."""

from slt.samplers.checkpoint import CheckpointError, Interrupted
from slt.samplers.config import HMC, MALA, SGLD, Calibration, RunPlan
from slt.samplers.local_chains import ChainTargets, ChainTrace, run_chains
from slt.samplers.nuts import NUTSDraws, sample_nuts
from slt.samplers.sgld import SGLDInfo, SGLDKernel, SGLDState, mala_log_acceptance, sgld
from slt.samplers.tempering import SMCRun, sample_prior, tempered_smc

__all__ = [
    "HMC",
    "MALA",
    "SGLD",
    "Calibration",
    "ChainTargets",
    "ChainTrace",
    "CheckpointError",
    "Interrupted",
    "NUTSDraws",
    "RunPlan",
    "SGLDInfo",
    "SGLDKernel",
    "SGLDState",
    "SMCRun",
    "mala_log_acceptance",
    "run_chains",
    "sample_nuts",
    "sample_prior",
    "sgld",
    "tempered_smc",
]
