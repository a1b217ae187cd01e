"""Exact answers: learning coefficients and log evidences in closed form.

Everything here is a plain reference: exact rationals (:class:`fractions.Fraction`)
for learning coefficients, numpy float64 for log evidences, and no dependency on JAX,
so that the estimators elsewhere in :mod:`slt` can be tested against it.

Conventions (shared with the rest of the package):

* ``L_n(w) = -(1/n) sum_i log p(y_i | x_i, w)`` is the per-example negative
  log-likelihood **with** its constants.
* ``Z = ∫ prod_i p(y_i | x_i, w) φ(w) dw`` is the evidence (marginal likelihood) and
  ``F = -log Z`` the free energy. Every ``*_log_evidence`` function returns ``log Z``.
* ``λ`` is the learning coefficient (real log canonical threshold, RLCT) and ``m`` its
  multiplicity, so that (Watanabe 2009)::

      F_n = n L_n(w0) + λ log n - (m - 1) log log n + O_p(1).

Learning coefficients are returned as :class:`RLCT` (``value``, ``multiplicity``);
``str(rlct_value)`` reads ``"λ = 67/2 (multiplicity 3)"``.

Every public name is defined in one of the modules below and re-exported here: use it as
``slt.truth.X``.

* `slt.truth.learning_coefficients`: the :class:`RLCT` type, the exact learning
  coefficients (``*_rlct``, `dln_layer_rlct` for one layer of a deep linear network), the
  upper bound `gaussian_mixture_rlct_bound` of the singular BIC's table, and
  `watanabe_wbic_experiment` (the constants and λ of Watanabe's WBIC experiment);
* `slt.truth.evidences`: the exact log evidences (``*_log_evidence``) and, for linear
  regression, the tempered expected NLL (`linear_regression_tempered_expected_nll`) and
  WBIC (`linear_regression_wbic`);
* `slt.truth.expected_llc`: the exact expectations of λ̂ at finite ``nβ``
  (`normal_crossing_expected_llc`, `crossing_expected_llc`, `linear_regression_expected_llc`);
* `slt.truth.quadrature` (private): the one-dimensional log-integral engine behind the
  evidences of singular models;
* `slt.truth._checks` (private): the argument checks the others share.

The modules import only `_checks` and (the evidences) `quadrature`, never each other.

References:
  Watanabe, *Algebraic Geometry and Statistical Learning Theory*, Cambridge University
  Press, 2009.
  Watanabe, "A widely applicable Bayesian information criterion", JMLR 14:867–897, 2013.
  Aoyagi & Watanabe, "Stochastic complexities of reduced rank regression in Bayesian
  estimation", Neural Networks 18:924–933, 2005.
  Aoyagi, "Consideration on the learning efficiency of multiple-layered neural networks
  with linear units", Neural Networks 172:106132, 2024.
"""

from slt.truth import evidences, expected_llc, learning_coefficients
from slt.truth.evidences import *  # noqa: F403  (each module's public names, its __all__)
from slt.truth.expected_llc import *  # noqa: F403
from slt.truth.learning_coefficients import *  # noqa: F403

__all__ = [*learning_coefficients.__all__, *evidences.__all__, *expected_llc.__all__]
