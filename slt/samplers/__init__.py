"""Samplers: SGLD (pure init/step functions) and the vectorised chain runner."""

from slt.samplers.local_chains import ChainTrace, run_chains
from slt.samplers.sgld import SGLD, SGLDState, mala_log_acceptance, sgld

__all__ = ["SGLD", "ChainTrace", "SGLDState", "mala_log_acceptance", "run_chains", "sgld"]
