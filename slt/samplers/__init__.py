"""Samplers: SGLD (pure init/step functions returning (state, info)) and the vectorised chain
runner; NUTS at per-chain inverse temperatures; adaptive tempered SMC; the one unit loop they
all run on (`slt.samplers.runner`: progress, checkpoints, interrupts); checkpoints that let a
stopped run resume."""

from slt.samplers.checkpoint import CheckpointError, Interrupted
from slt.samplers.local_chains import ChainTrace, run_chains
from slt.samplers.nuts import NUTSDraws, sample_nuts
from slt.samplers.sgld import SGLD, SGLDInfo, SGLDState, mala_log_acceptance, sgld
from slt.samplers.tempering import SMCRun, sample_prior, tempered_smc

__all__ = [
    "SGLD",
    "ChainTrace",
    "CheckpointError",
    "Interrupted",
    "NUTSDraws",
    "SGLDInfo",
    "SGLDState",
    "SMCRun",
    "mala_log_acceptance",
    "run_chains",
    "sample_nuts",
    "sample_prior",
    "sgld",
    "tempered_smc",
]
