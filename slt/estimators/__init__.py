"""Estimators, two families, a folder each: `slt.estimators.local`, the local posterior around
trained parameters (the local learning coefficient and its calibration, parts, trajectories;
what the posterior says about the data: loss kernel, Bayesian influence functions,
susceptibilities), and `slt.estimators.evidence`, the evidence and model selection (BIC,
Laplace, WBIC, a reference free energy, lambda from temperatures, sBIC, compare)."""

from slt.estimators import evidence, local
from slt.estimators.evidence import *  # noqa: F403  (the evidence family's public names)
from slt.estimators.local import *  # noqa: F403  (the local family's public names)

__all__ = sorted([*evidence.__all__, *local.__all__])
