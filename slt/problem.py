"""`Problem`: a NumPyro model (or a loss) plus data, as pure JAX functions of the parameters.

Every estimator in slt takes a `Problem`. It fixes the conventions once:

* Parameters are a pytree (a dict of arrays, one per latent site) in **unconstrained** space:
  a positive scale is stored as its log, a simplex by NumPyro's stick-breaking transform, and so
  on (`numpyro.distributions.biject_to`). `constrain` / `unconstrain` move between spaces.
* `loglik(params, batch)` is the per-example log-likelihood log p(y_i | x_i, w), shape (b,),
  summed over the observed sites and over every non-data axis, with all normalising constants.
  Handlers such as `numpyro.handlers.scale` do not change it.
* `log_prior(params)` is the log prior density **of the unconstrained parameters**: the model's
  prior at constrain(params) plus log |det d constrain / d params|.
* L_n(w) = -(1/n) sum_i log p(y_i | x_i, w) is `loss(params)`; the log joint over the full data
  is `log_joint(params)` = log_prior + sum_i loglik.

Data are a dict of arrays sharing their leading (example) axis of length n; they are passed to
the model as keyword arguments, so an observed site is written `numpyro.sample("y", ..., obs=y)`
with `y` one of the data keys, inside a plate sized from the data (`x.shape[0]`), and a batch is
any index slice of the data along that axis.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.flatten_util import ravel_pytree
from numpyro import handlers
from numpyro.distributions import biject_to
from numpyro.distributions.distribution import validation_enabled

from slt import compile_cache
from slt import tokens as token_problems
from slt.chunks import default_chunk_size, per_example_in_chunks
from slt.fingerprint import digest
from slt.modules import FixedLeaves, held_fixed, sampled_part, whole
from slt.precision import at_full_precision
from slt.prediction import LIKELIHOODS, Prediction, leaf_names
from slt.validation import (
    InputError,
    call_naming_shapes,
    require_callable,
    require_data,
    require_finite_tree,
    require_instance,
    require_int,
)

Params = Any  # a pytree of arrays
Batch = dict[str, jax.Array]

__all__ = ["Problem", "require_problem"]


def _validate_data(data: Mapping[str, Any], x64: Any) -> tuple[dict[str, jax.Array], int]:
    """Check `data` (`slt.validation.require_data`) and `x64`; store floats in the asked dtype."""
    if x64 is not None and not isinstance(x64, bool):
        raise InputError(f"x64 must be None, True or False, got {x64!r}")
    if x64 and not jax.config.jax_enable_x64:
        raise InputError(
            "x64=True needs 64-bit JAX: call jax.config.update('jax_enable_x64', True) "
            "before building the Problem"
        )
    arrays, n = require_data(data)
    if x64 is not None:
        dtype = np.float64 if x64 else np.float32
        arrays = {k: a.astype(dtype) if a.dtype.kind == "f" else a for k, a in arrays.items()}
    return {key: jnp.asarray(array) for key, array in arrays.items()}, n


class Problem:
    """A model plus data, as pure, jittable functions of unconstrained parameters.

    Build one from a NumPyro model with `Problem(model, data)`, or from a loss of a network
    trained elsewhere with `Problem.from_loss(nll_fn, params, data)`.

    Args:
      model: a NumPyro model. It is called as `model(**data, **model_kwargs)`; its observed
        sites (`obs=` one of the data arrays) make the likelihood, its other sample sites are
        the parameters. Mixtures must be written with `MixtureSameFamily` (marginalised), not
        with discrete latent sites.
      data: dict of arrays sharing a leading example axis of length n >= 1, all finite.
      model_kwargs: further keyword arguments for the model that are not per-example data
        (hyperparameters, fixed sizes).
      x64: None keeps JAX's default float dtype; True stores float data and parameters as
        float64 (64-bit JAX must be enabled); False stores them as float32, so that samplers
        run in float32 even when 64-bit JAX is on (geometry and Laplace still compute in
        float64).
      exchangeable: latent sites whose leading axis indexes K interchangeable components
        (a mixture's weights, means and scales): permuting that axis of all of them together
        leaves likelihood and prior unchanged, so the posterior has K! label-switched copies.
        Declaring them lets the reference free energy cover every copy
        (`slt.samplers.importance`); the first site's first coordinate orders the labels.
        Default: none.
      chunk_size: how many examples one evaluation of the log-likelihood takes: a full-data
        evaluation (L_n, a validation, a full-data gradient) runs over the data in chunks of
        this size (`slt.chunks`: memory bounded by a chunk, not by n). Default (None): from
        memory, as many examples as keep one chunk's intermediate values within
        `slt.chunks.CHUNK_BYTES` (256 MiB); small models evaluate all n at once.

    Raises:
      InputError (a ValueError, `slt.validation`): data not a dict of finite real arrays
        sharing a leading axis, x64 not None/bool, or the model fails on the data's shapes.
      ValueError: the model cannot be represented (discrete latent sites, no observed site,
        `numpyro.param`), or a site is not finite at the initial point.

    Attributes:
      n: number of examples.
      dim: number of unconstrained parameters (after constraints: a K-simplex counts K - 1).
      data: the validated data.
      site_names: latent site names; for `from_loss` / `from_predict` the parameter pytree's
        paths (`slt.prediction.leaf_names`: "W1", "params/Dense_0/kernel").
      exchangeable: the declared exchangeable sites (() for none, and for `from_loss`).
      prediction: the `slt.prediction.Prediction` of `from_predict` (None otherwise).
      chunk_size: the examples per evaluation (`chunk_size` above, resolved).

    Example:
      >>> import numpyro, numpyro.distributions as dist
      >>> def model(x, y=None):
      ...     w = numpyro.sample("w", dist.Normal(0.0, 1.0))
      ...     with numpyro.plate("data", x.shape[0]):
      ...         numpyro.sample("y", dist.Normal(w * x, 1.0), obs=y)
      >>> x = jnp.linspace(-1.0, 1.0, 5)
      >>> problem = Problem(model, {"x": x, "y": 2.0 * x})
      >>> problem
      Problem(model, n=5, dim=1, sites=['w'], dtype=float64)
      >>> problem.loglik({"w": jnp.array(2.0)}, problem.data).round(4)   # log N(0; 0, 1) each
      Array([-0.9189, -0.9189, -0.9189, -0.9189, -0.9189], dtype=float64)
    """

    def __init__(
        self,
        model: Callable[..., Any],
        data: Mapping[str, Any],
        *,
        model_kwargs: Mapping[str, Any] | None = None,
        x64: bool | None = None,
        exchangeable: Sequence[str] = (),
        chunk_size: int | None = None,
    ) -> None:
        arrays, n = _validate_data(data, x64)
        model_kwargs = dict(model_kwargs or {})
        _check_signature(model, arrays, model_kwargs)
        self.model = model
        self.model_kwargs = model_kwargs
        self.prediction = None
        try:
            prior_trace, self._transforms, template = _abstract_prior_trace(
                model, arrays, model_kwargs
            )
        except Exception:  # noqa: BLE001 - the eager trace below raises the error that names it
            prior_trace = call_naming_shapes(
                lambda: _trace_naming_invalid_sites(
                    lambda: handlers.trace(handlers.seed(model, 0)).get_trace(
                        **arrays, **model_kwargs)
                ),
                f"model {getattr(model, '__name__', model)!r}",
                arrays,
            )
            self._transforms = {
                name: biject_to(site["fn"].support) for name, site in _latent_sites(prior_trace)
            }
            template = {
                name: jnp.zeros_like(self._transforms[name].inv(site["value"]))
                for name, site in _latent_sites(prior_trace)
            }
        latent, observed = _split_sites(prior_trace)
        self._setup(template, arrays, n, x64)
        self.site_names = tuple(latent)
        self.observed_site_names = tuple(observed)
        self.exchangeable = _exchangeable_sites(exchangeable, prior_trace, latent)
        self._example_plates = {name: _example_plate(prior_trace[name], n) for name in observed}
        self._set_chunk_size(chunk_size, template)
        self._fingerprinted = ("Problem", model, model_kwargs, self.exchangeable,
                               self.chunk_size, self.data, self._template)
        self._check_initial_point()

    # ------------------------------------------------------------------ construction helpers

    def _set_chunk_size(self, chunk_size: Any, template: Params) -> None:
        """Store the examples per evaluation: `chunk_size`, or from memory when None."""
        if chunk_size is None:
            chunk_size = default_chunk_size(self._per_example_loglik, template, self.data)
        self.chunk_size = require_int("chunk_size", chunk_size, minimum=1)

    def _setup(self, template: Params, data: dict[str, jax.Array], n: int, x64) -> None:
        # `loglik` and `log_prior` go through jitted functions: inside any compiled program the
        # model is then traced once per argument shape, not once per call site (an L-BFGS fit
        # traces its objective in several places: lowering its program 1.9 -> 0.8 s). Their
        # matrix products are float32-exact on GPUs too (slt.precision).
        self._traced_evaluate = jax.jit(at_full_precision(self._evaluate))
        self._traced_loglik = jax.jit(
            lambda params, batch, chunk_size: per_example_in_chunks(
                at_full_precision(self._per_example_loglik), params, batch, chunk_size),
            static_argnames="chunk_size")
        self._traced_constrain = jax.jit(at_full_precision(self._constrain_sites))
        self._fixed: FixedLeaves | None = None  # an Equinox module's non-weights (`_from_loss`)
        self.data = data
        self.n = n
        if x64 is not None:
            dtype = jnp.float64 if x64 else jnp.float32
            template = jax.tree_util.tree_map(lambda leaf: leaf.astype(dtype), template)
        self._template = template
        flat, self._unravel = ravel_pytree(template)
        self.dim = int(flat.size)
        # every leaf of one dtype: `unravel` keeps the flat vector's dtype (as JAX's does)
        self._one_dtype = len({leaf.dtype for leaf in jax.tree_util.tree_leaves(template)}) <= 1

    @classmethod
    def from_loss(
        cls,
        nll_fn: Callable[[Params, Batch], jax.Array],
        params: Params,
        data: Mapping[str, Any],
        *,
        log_prior: Callable[[Params], jax.Array] | None = None,
        x64: bool | None = None,
        chunk_size: int | None = None,
    ) -> Problem:
        """A Problem from a per-example negative log-likelihood (Flax, Equinox, plain JAX).

        The parameters are unconstrained as given: `constrain` and `unconstrain` are the
        identity.

        Low-precision parameters (bfloat16, float16: a model trained in mixed precision) are
        accepted. The Problem then holds a float32 master copy (`reference_params`, and the
        dtype of every chain, noise and gradient sum), and casts the parameters to the
        model's own dtypes inside every evaluation of `nll_fn` and `log_prior`: the model
        computes as it was trained, the sampler in float32 (a bfloat16 weight has 8 bits of
        mantissa: a Langevin step of 1e-5 relative to it would round to nothing).

        Args:
          nll_fn: `nll_fn(params, batch) -> (b,)`, the per-example negative log-likelihood
            -log p(y_i | x_i, w) **with** its constants (for Gaussian noise of scale s:
            (y - f(x))^2 / (2 s^2) + log(s) + log(2 pi)/2). Must be pure and jittable.
          params: the trained parameters (any pytree of float arrays); fixes the structure.
            An Equinox module is taken whole: its float arrays are the parameters, its other
            leaves (activations, flags, integer buffers) held fixed, and `nll_fn` and every
            estimator receive modules (`slt.modules`).
          data: dict of arrays with a shared leading example axis.
          log_prior: optional `log_prior(params) -> scalar`. Without it the prior is flat
            (`log_prior` returns 0 and `has_prior` is False).
          x64, chunk_size: as in `Problem`.

        Returns:
          A Problem whose `reference_params` are `params` (bfloat16 and float16 leaves as
          float32).

        Raises:
          InputError (a ValueError): bad data (as in `Problem`), nll_fn or log_prior not a
            function, params not finite floats, nll_fn failing on the data or not returning n
            finite values.
          ValueError: log_prior not finite at params.
        """
        arrays, n = _validate_data(data, x64)
        require_callable("nll_fn", nll_fn)
        require_callable("log_prior", log_prior, optional=True)
        require_finite_tree(sampled_part(params, held_fixed(params)), "params", low_precision=True)
        return cls._from_validated_loss(nll_fn, params, arrays, n, log_prior, x64,
                                        chunk_size=chunk_size)

    @classmethod
    def _from_validated_loss(cls, nll_fn, params, arrays, n, log_prior, x64,
                             prediction=None, chunk_size=None) -> Problem:
        """`from_loss` on data validated by `_validate_data`, functions and params checked
        (low-precision parameters: a float32 master copy, cast back inside evaluations)."""
        self = cls.__new__(cls)
        self.model = None
        self.model_kwargs = {}
        self.prediction = prediction
        fixed = held_fixed(params)
        sampled = sampled_part(params, fixed)
        in_model_dtypes = _to_model_dtypes(sampled)
        # functions of the sampled leaves only: a module's functions and flags are constants
        self._nll_fn = lambda weights, batch: nll_fn(whole(in_model_dtypes(weights), fixed),
                                                     batch)
        self._log_prior_fn = (None if log_prior is None else lambda weights: log_prior(
            whole(in_model_dtypes(weights), fixed)))
        self._traced_log_prior = (None if self._log_prior_fn is None
                                  else jax.jit(at_full_precision(self._log_prior_fn)))
        self._transforms = None
        promoted = jax.tree_util.tree_map(_at_least_float32, sampled)
        self._setup(jax.tree_util.tree_map(jnp.zeros_like, promoted), arrays, n, x64)
        self._fixed = fixed
        low_precision = any(jnp.result_type(leaf) != jnp.result_type(kept) for leaf, kept in zip(
            jax.tree_util.tree_leaves(sampled), jax.tree_util.tree_leaves(promoted), strict=True))
        self.reference_params = whole(promoted, fixed) if low_precision else params
        self.site_names = leaf_names(sampled)
        self.observed_site_names = ()
        self.exchangeable = ()
        self._fingerprinted = None  # a loss's closures are not read
        params = self.reference_params
        returned = call_naming_shapes(lambda: jax.eval_shape(self._nll_fn, promoted, arrays),
                                      "nll_fn(params, data)", arrays)
        if getattr(returned, "shape", None) != (n,):
            raise InputError(f"nll_fn must return one value per example, shape ({n},); got "
                             f"{getattr(returned, 'shape', type(returned).__name__)}")
        self._set_chunk_size(chunk_size, self._template)
        values = -self.loglik(params, arrays)
        bad = ~np.isfinite(np.asarray(values))
        if bad.any():
            raise InputError(
                f"nll_fn is not finite at params for {int(bad.sum())} example(s), "
                f"the first at index {int(np.argmax(bad))}"
            )
        if log_prior is not None and not np.isfinite(float(self.log_prior(params))):
            raise ValueError("log_prior is not finite at params")
        return self

    @classmethod
    def from_tokens(
        cls,
        logits_fn: Callable[[Params, jax.Array], jax.Array],
        params: Params,
        tokens: Any,
        loss_mask: Any = None,
        *,
        log_prior: Callable[[Params], jax.Array] | None = None,
        x64: bool | None = None,
        chunk_size: int | None = None,
    ) -> Problem:
        """A Problem from a language model: next-token cross-entropy over n sequences.

        The examples are the sequences (`slt.tokens`): with m = `loss_mask`,

            NLL_i(w) = sum_{t=1}^{T-1} m[i, t] * (-log softmax(logits_fn(w, tokens)[i, t-1])
                                                    [tokens[i, t]]),

        L_n(w) = (1/n) sum_i NLL_i(w): summed token losses per sequence, mean over sequences.
        The data are {"tokens": (n, T) int32, "loss_mask": (n, T) bool}; an SGLD minibatch is
        a batch of sequences; full-data evaluations run `chunk_size` sequences at a time (the
        logits of all n sequences at once would take n T V floats).

        devinterp's `n_beta` multiplies the mean per-token loss: slt's nbeta is n_beta / (T - 1)
        for the same posterior and the same lambda_hat (`slt.nbeta_from_devinterp`; the
        derivation and the mapping lr = step_size, localization = gamma are in `slt.tokens`).

        Args:
          logits_fn: `logits_fn(params, tokens) -> logits`, tokens (b, T) int32, logits
            (b, T, V) floats; position t's logits predict token t + 1. Pure and jittable
            (wrap a transformer block in `jax.checkpoint` inside it to save memory in
            gradients: docs/large-models.md).
          params: the trained parameters (any pytree of float arrays; bfloat16 / float16 as in
            `from_loss`: a float32 master copy, cast to the model's dtypes inside).
          tokens: integer array (n, T) of n >= 1 sequences of T >= 2 tokens in [0, V).
          loss_mask: booleans (n, T) marking the **target** positions that count (token t,
            predicted from position t - 1); column 0 must be False. Default: every position
            1 ... T - 1.
          log_prior, x64, chunk_size: as in `from_loss`.

        Returns:
          A Problem whose `reference_params` are `params`.

        Raises:
          InputError (a ValueError): tokens not integers, not (n, T) with T >= 2, or outside
            [0, V); a loss_mask of another shape, not boolean, marking column 0 or nothing;
            logits_fn not a function, failing on the tokens or not returning (b, T, V) float
            logits; and what `from_loss` refuses.

        Example:
          >>> def logits_fn(params, tokens):             # a bigram model: logits = E[token]
          ...     return params["table"][tokens]
          >>> tokens = jnp.array([[0, 1, 2, 0], [1, 2, 0, 1]])
          >>> problem = Problem.from_tokens(logits_fn, {"table": jnp.zeros((3, 3))}, tokens)
          >>> problem
          Problem(from_tokens, n=2, dim=9, sites=['table'], dtype=float64)
          >>> round(float(problem.loss(problem.reference_params)), 4)   # 3 tokens of log 3
          3.2958
        """
        require_callable("logits_fn", logits_fn)
        require_finite_tree(sampled_part(params, held_fixed(params)), "params", low_precision=True)
        arrays, n = _validate_data(token_problems.token_data(tokens, loss_mask), x64)
        token_problems.check_logits(logits_fn, params, arrays)
        require_callable("log_prior", log_prior, optional=True)
        problem = cls._from_validated_loss(token_problems.next_token_nll(logits_fn), params,
                                           arrays, n, log_prior, x64, chunk_size=chunk_size)
        problem._source = "from_tokens"
        return problem

    @classmethod
    def from_predict(
        cls,
        predict_fn: Callable[[Params, jax.Array], jax.Array],
        params: Params,
        data: Mapping[str, Any],
        likelihood: str,
        *,
        scale: Any = 1.0,
        x: str = "x",
        y: str = "y",
        log_prior: Callable[[Params], jax.Array] | None = None,
        x64: bool | None = None,
    ) -> Problem:
        """A Problem from a network's prediction function and its likelihood family.

        Like `from_loss`, but the loss is named rather than written: -log p(y | x, w) with
        p the `likelihood` family of the network outputs `predict_fn(params, x)`
        (`slt.prediction`: "gaussian" means with noise sd `scale`, "bernoulli" logits,
        "categorical" logits, "poisson" log rates). Knowing the family, slt's geometry can
        compute the true Fisher information of the network (= its generalised Gauss-Newton
        matrix for these families), matrix-free; every estimator works as for `from_loss`.

        Args:
          predict_fn: `predict_fn(params, x) -> outputs` for a batch x, pure and jittable.
          params: the trained parameters (any pytree of float arrays).
          data: dict of arrays with a shared leading example axis, holding x and y.
          likelihood: "gaussian", "bernoulli", "categorical" or "poisson".
          scale: the Gaussian noise sd, a float or one per output (broadcasting against an
            example's outputs); ignored by the other families.
          x, y: the data keys of the inputs and the observations.
          log_prior, x64: as in `from_loss`.

        Returns:
          A Problem whose `prediction` describes the observation model and whose
          `reference_params` are `params`.

        Raises:
          InputError (a ValueError): an unknown likelihood, data without x or y, outputs not
            shaped like y (plus a class axis for "categorical") or not finite at params, y
            outside what the family observes (0/1, integer labels in [0, K), counts), a
            scale that is not finite and > 0 or not one per output (a scale that broadcasts
            an example's outputs to a larger shape), and what `from_loss` refuses.

        Example:
          >>> def predict(params, x):
          ...     return x @ params["w"] + params["b"]
          >>> x = jnp.linspace(-1.0, 1.0, 8)[:, None]
          >>> labels = (x[:, 0] > 0).astype(jnp.int32)
          >>> problem = Problem.from_predict(
          ...     predict, {"w": jnp.ones(1), "b": jnp.zeros(())}, {"x": x, "y": labels},
          ...     "bernoulli")
          >>> problem
          Problem(from_predict: bernoulli, n=8, dim=2, sites=['b', 'w'], dtype=float64)
          >>> round(float(problem.loss(problem.reference_params)), 4)  # mean log(1 + e^-|x|)
          0.4594
        """
        if likelihood not in LIKELIHOODS:
            raise InputError(f"likelihood must be one of {LIKELIHOODS}, got {likelihood!r}")
        require_callable("predict_fn", predict_fn)
        prediction = Prediction(predict_fn, likelihood, scale if likelihood == "gaussian"
                                else 1.0, x, y)
        arrays, n = _validate_data(data, x64)
        require_callable("log_prior", log_prior, optional=True)
        require_finite_tree(sampled_part(params, held_fixed(params)), "params")
        prediction.check(params, arrays)
        return cls._from_validated_loss(prediction.nll, params, arrays, n, log_prior, x64,
                                        prediction)

    # ------------------------------------------------------------------ public functions

    @functools.cached_property
    def fingerprint(self) -> str | None:
        """A digest of what this problem computes (`slt.fingerprint`: its model's code and
        closure, its settings, its data), the same in another process for the same model and
        data; None where the model's meaning cannot be read off it (a class of the user's, a
        problem built from a loss). Keys the programs slt keeps on disk
        (`slt.compile_cache.program_for`). Computed on first use (the data are read once)."""
        return None if self._fingerprinted is None else digest(self._fingerprinted)

    @property
    def has_prior(self) -> bool:
        """Whether the problem has a proper prior (always, for a NumPyro model)."""
        return self.model is not None or self._log_prior_fn is not None

    @property
    def dtype(self) -> jnp.dtype:
        """The float dtype the parameters live in."""
        return ravel_pytree(self._template)[0].dtype

    def loglik(self, params: Params, batch: Batch) -> jax.Array:
        """Per-example log-likelihood log p(y_i | x_i, w), shape (b,) for a batch of b examples.

        A batch larger than `chunk_size` (the full data, typically) is evaluated a chunk at a
        time (`slt.chunks.per_example_in_chunks`): memory is bounded by a chunk, for the values
        and for their derivatives.

        It has the float dtype of `params` (float32 parameters give float32 values even when
        64-bit JAX is on and the model holds float64 constants; float64 parameters give
        float64 values from float32 data, as Laplace and the geometry need).
        """
        params = self.sampled_part(params)
        self._check_params(params)
        value = self._traced_loglik(params, batch, chunk_size=self.chunk_size)
        return value.astype(_float_dtype(params))

    def _per_example_loglik(self, params: Params, batch: Batch) -> jax.Array:
        """The per-example log-likelihood on `batch`, in one evaluation (unchunked)."""
        if self.model is None:
            return -self._nll_fn(params, batch)
        return self._evaluate(params, batch)[0]

    def log_prior(self, params: Params) -> jax.Array:
        """log prior density of the unconstrained parameters, log-Jacobian included (in the
        float dtype of `params`, as `loglik`)."""
        params = self.sampled_part(params)
        self._check_params(params)
        if self.model is None:
            if self._log_prior_fn is None:
                return jnp.zeros((), _float_dtype(params))
            value = self._traced_log_prior(params)
        else:
            value = self._traced_evaluate(params, self.data)[1]
        return jnp.asarray(value).astype(_float_dtype(params))

    def log_joint(self, params: Params) -> jax.Array:
        """log prior + sum of the log-likelihood over the full data."""
        return self.log_prior(params) + jnp.sum(self.loglik(params, self.data))

    def loss(self, params: Params, batch: Batch | None = None) -> jax.Array:
        """L(w) = -(1/b) sum_i log p(y_i | x_i, w) over `batch` (the full data L_n by default)."""
        return -jnp.mean(self.loglik(params, self.data if batch is None else batch))

    def constrain(self, params: Params) -> Params:
        """Map unconstrained parameters to the model's support (identity for `from_loss`)."""
        if self._transforms is None:
            return params
        return self._traced_constrain(params)

    def _constrain_sites(self, params: Params) -> Params:
        return {name: self._transforms[name](value) for name, value in params.items()}

    def unconstrain(self, values: Mapping[str, Any]) -> Params:
        """Inverse of `constrain`: values on the support -> unconstrained parameters."""
        if self._transforms is None:
            return values
        missing = set(self._transforms) - set(values)
        if missing:
            raise ValueError(f"unconstrain: missing values for site(s) {sorted(missing)}")
        return {
            name: jnp.asarray(self._transforms[name].inv(jnp.asarray(values[name])), self.dtype)
            for name in self._transforms
        }

    def constrained_shapes(self) -> dict[str, tuple[int, ...]]:
        """{latent site (a parameter for `from_loss`): the shape of its value on the support},
        read from a trace of `constrain` on shapes (`jax.eval_shape`), nothing compiled."""
        shapes = jax.eval_shape(lambda flat: self.constrain(self.unravel(flat)),
                                jax.ShapeDtypeStruct((self.dim,), self.dtype))
        return {name: tuple(value.shape) for name, value in shapes.items()}

    def transform(self, name: str):
        """The constraining transform of latent site `name` (NumPyro's `biject_to` of its
        support): unconstrained value -> value on the support."""
        if self._transforms is None or name not in self._transforms:
            raise ValueError(f"{name!r} is not a latent site of the model "
                             f"({', '.join(self.site_names)})")
        return self._transforms[name]

    def prior_distributions(self, params: Params) -> dict[str, Any]:
        """{latent site: its prior distribution (a NumPyro `Distribution`)} with the other
        latent sites at the unconstrained `params`; the model is run on one example (its
        likelihood is not needed). Callable inside `jit`."""
        if self.model is None:
            raise ValueError("a problem built from a loss has no NumPyro prior distributions")
        trace, _ = self._trace(self.sampled_part(params), self.take(jnp.arange(1)))
        return {name: site["fn"] for name, site in _latent_sites(trace)}

    def init(self, key: jax.Array, radius: float = 2.0) -> Params:
        """A random starting point: every unconstrained coordinate uniform on (-radius, radius).

        This is NumPyro's `init_to_uniform` rule; for `from_loss` it is a fresh random point, not
        the trained parameters (those are `reference_params`).
        """
        flat = jax.random.uniform(key, (self.dim,), self.dtype, -radius, radius)
        return self.unravel(flat)

    def random_starts(self, key: jax.Array, num: int, radius: float = 2.0) -> jax.Array:
        """`num` starting points by `init`'s rule, flat, shape (num, dim): row i is
        `ravel(init(k_i, radius))` for k_i the i-th key of `jax.random.split(key, num)`.

        Drawn by one program compiled once per problem, key type, number and radius
        (`slt.compile_cache`), where drawing them op by op compiled a key split, a batched
        uniform draw and the unravelling and ravelling of the points (0.3-0.5 s a problem).
        """
        dim, dtype = self.dim, self.dtype

        def draw(key):
            keys = jax.random.split(key, num)
            return jax.vmap(lambda k: jax.random.uniform(k, (dim,), dtype, -radius, radius))(keys)

        program = compile_cache.program_for(
            self, ("random starts", key.shape, key.dtype, num, radius), draw, key,
            compile="brief")
        return _at_least_float32(program(key))

    def ravel(self, params: Params) -> jax.Array:
        """Flatten a parameter pytree into a vector of length `dim` (an Equinox module: its
        float arrays, `slt.modules`; bfloat16 and float16 parameters as float32: chains move in
        at least float32)."""
        return _at_least_float32(ravel_pytree(self.sampled_part(params))[0])

    def unravel(self, flat: jax.Array) -> Params:
        """Inverse of `ravel` (an Equinox module comes back whole, its other leaves fixed).

        A concrete vector in host memory (a NumPy array, a JAX array on a CPU) is cut with
        NumPy, the same values without compiling a split and a reshape per leaf; a traced one
        (inside `jit`, `grad`, `vmap`) by JAX."""
        if _in_host_memory(flat) and np.shape(flat) == (self.dim,) and self._one_dtype:
            flat = np.asarray(flat)
            leaves, treedef = jax.tree_util.tree_flatten(self._template)
            ends = np.cumsum([leaf.size for leaf in leaves])[:-1]
            params = jax.tree_util.tree_unflatten(treedef, [
                jnp.asarray(piece.reshape(leaf.shape))
                for piece, leaf in zip(np.split(flat, ends), leaves, strict=True)])
        else:
            params = self._unravel(flat)
        return whole(params, self._fixed)

    def sampled_part(self, params: Params) -> Params:
        """The leaves of `params` that are parameters: all of them, but for a problem built
        from an Equinox module only its float arrays (the others None, `slt.modules`).

        Raises:
          InputError: a module's params not shaped like the module the problem holds.
        """
        return sampled_part(params, self._fixed)

    def take(self, indices: jax.Array, data: Batch | None = None) -> Batch:
        """The batch of examples at `indices` (along the example axis) of `data` (default:
        the problem's own). Jitted programs pass the data in as an argument and take from it,
        so that the arrays are not compiled into the program as constants."""
        data = self.data if data is None else data
        return {key: value[indices] for key, value in data.items()}

    def minibatch(self, key: jax.Array, size: int) -> Batch:
        """A batch of `size` distinct examples drawn uniformly without replacement."""
        if not 1 <= size <= self.n:
            raise ValueError(f"minibatch size must be in [1, n={self.n}], got {size}")
        return self.take(jax.random.choice(key, self.n, (size,), replace=False))

    def __repr__(self) -> str:
        source = getattr(self.model, "__name__", "model")
        if self.model is None:
            source = (getattr(self, "_source", "from_loss") if self.prediction is None
                      else f"from_predict: {self.prediction.likelihood}")
        return (
            f"Problem({source}, n={self.n}, dim={self.dim}, "
            f"sites={list(self.site_names)}, dtype={self.dtype})"
        )

    def _check_params(self, params: Params) -> None:
        """Raise InputError unless every parameter has the shape of its site.

        NumPyro would broadcast a misshapen value silently: w of shape (2, 1) where the site is
        (2,) turns n per-example terms into n x n, and L_n comes out 300 log 2 instead of log 2.
        Shapes are static, so under `jit` this check costs nothing at run time (under `vmap`
        each parameter has its unbatched shape).
        """
        if self.model is None:
            expected = jax.tree_util.tree_structure(self._template)
            if jax.tree_util.tree_structure(params) != expected:
                raise InputError(
                    f"params must have the structure of the trained parameters, {expected}; "
                    f"got {jax.tree_util.tree_structure(params)}"
                )
            pairs = zip(self.site_names, jax.tree_util.tree_leaves(params),
                        jax.tree_util.tree_leaves(self._template), strict=True)
        else:
            if not isinstance(params, Mapping):
                raise InputError(f"params must be a dict of the sites {list(self.site_names)}")
            pairs = ((name, params[name], self._template[name])
                     for name in self.site_names if name in params)
        for name, value, template in pairs:
            if jnp.shape(value) != template.shape:
                raise InputError(
                    f"parameter {name!r} has shape {jnp.shape(value)}; the model's site has "
                    f"shape {template.shape} (unconstrained)"
                )

    # ------------------------------------------------------------------ NumPyro plumbing

    def _trace(self, params: Params, batch: Batch) -> tuple[dict, jax.Array]:
        """Run the model on `batch` with latent sites set from unconstrained `params`.

        Returns the trace and the summed log |det Jacobian| of the constraining transforms.
        """
        log_dets = []

        def substitute_fn(site):
            name = site["name"]
            if site["type"] != "sample" or site["is_observed"] or name not in params:
                return None
            transform = biject_to(site["fn"].support)
            unconstrained = params[name]
            value = transform(unconstrained)
            log_dets.append(jnp.sum(transform.log_abs_det_jacobian(unconstrained, value)))
            return value

        model = handlers.substitute(handlers.seed(self.model, 0), substitute_fn=substitute_fn)
        trace = handlers.trace(model).get_trace(**batch, **self.model_kwargs)
        missing = set(self.site_names) - set(params)
        if missing:
            raise ValueError(f"params lack the site(s) {sorted(missing)}")
        return trace, sum(log_dets, jnp.zeros((), self.dtype))

    def _evaluate(self, params: Params, batch: Batch) -> tuple[jax.Array, jax.Array]:
        """(per-example log-likelihood, log prior incl. Jacobian) at `params` on `batch`."""
        trace, log_det = self._trace(params, batch)
        size = next(iter(batch.values())).shape[0]
        loglik = jnp.zeros((size,), self.dtype)
        log_prior = log_det
        for name, site in trace.items():
            if site["type"] != "sample":
                continue
            log_prob = _masked_log_prob(site)
            if site["is_observed"]:
                loglik = loglik + _per_example(site, self._example_plates[name], log_prob, size)
            else:
                log_prior = log_prior + jnp.sum(log_prob)
        return loglik, log_prior

    def _check_initial_point(self) -> None:
        """Every latent value and site log-density must be finite at a default initial point.

        Checked in one compiled evaluation; where that finds a fault (or fails), the checks are
        redone eagerly, which names the site.
        """
        key = jax.random.key(0)
        if self._initial_point_is_finite(key):
            return
        params = self.init(key)
        trace = _trace_naming_invalid_sites(lambda: self._trace(params, self.data)[0])
        for name, site in trace.items():
            if site["type"] != "sample":
                continue
            role = "observed site" if site["is_observed"] else "parameter"
            if not site["is_observed"] and not np.all(np.isfinite(np.asarray(site["value"]))):
                raise ValueError(f"{role} {name!r} is not finite at the initial point")
            log_prob = np.asarray(_masked_log_prob(site))
            if not np.all(np.isfinite(log_prob)):
                raise ValueError(
                    f"{role} {name!r} has a non-finite log-density at the initial point "
                    f"(check the data lie in its support and its parameters are valid)"
                )
        self._evaluate(params, self.data)  # checks every observed site has an example axis

    def _initial_point_is_finite(self, key: jax.Array) -> bool:
        """Whether every site's value and log-density is finite at `init(key)` and every
        observed site has an example axis, from one program that draws the point and evaluates
        it, compiled quickly (`slt.compile_cache`; False where it raises)."""

        def finite(key, data):
            params = self.init(key)
            trace = self._trace(params, data)[0]
            self._evaluate(params, data)
            checks = [jnp.all(jnp.isfinite(site["value"])) for _, site in _latent_sites(trace)]
            checks += [jnp.all(jnp.isfinite(_masked_log_prob(site)))
                       for site in trace.values() if site["type"] == "sample"]
            return jnp.all(jnp.stack(checks))

        try:
            program = compile_cache.program_for(self, ("initial point check", key.dtype),
                                                 finite, key, self.data, compile="brief",
                                                 keep=False)
            return bool(program(key, self.data))
        except Exception:  # noqa: BLE001 - the eager checks raise the error that names it
            return False


def require_problem(problem: Any, name: str = "problem") -> Problem:
    """`problem` if it is an `slt.Problem` (the argument check every estimator starts with).

    Raises:
      InputError: otherwise (the message says how to build one).
    """
    what = "an slt.Problem (Problem(model, data) or Problem.from_loss(...))"
    return require_instance(name, problem, Problem, what)


def _float_dtype(params: Params) -> jnp.dtype:
    """The float dtype of a parameter pytree (JAX's default float if it holds no float leaf),
    at least float32 (values of bfloat16 / float16 parameters are float32)."""
    leaves = [leaf for leaf in jax.tree_util.tree_leaves(params) if jnp.issubdtype(
        jnp.result_type(leaf), jnp.floating)]
    dtype = jnp.result_type(*leaves) if leaves else jnp.result_type(float)
    return jnp.promote_types(dtype, jnp.float32)


def _in_host_memory(array: Any) -> bool:
    """Whether `array` is a concrete NumPy array or a JAX array held by CPU devices (not a
    tracer), which NumPy reads without a copy."""
    if isinstance(array, np.ndarray):
        return True
    return (isinstance(array, jax.Array) and not isinstance(array, jax.core.Tracer)
            and all(device.platform == "cpu" for device in array.devices()))


def _at_least_float32(leaf: Any) -> jax.Array:
    """`leaf` as an array, a bfloat16 / float16 one as float32 (the sampler's precision)."""
    leaf = jnp.asarray(leaf)
    if jnp.issubdtype(leaf.dtype, jnp.floating) and leaf.dtype.itemsize < 4:
        return leaf.astype(jnp.float32)
    return leaf


def _to_model_dtypes(params: Params) -> Callable[[Params], Params]:
    """The cast of parameters (float32 master copies) to the dtypes of `params`, the model's
    own, for the leaves of low precision (bfloat16, float16); the identity where there are
    none (the traced programs are then unchanged)."""
    dtypes = [jnp.result_type(leaf) for leaf in jax.tree_util.tree_leaves(params)]
    if not any(jnp.issubdtype(dtype, jnp.floating) and dtype.itemsize < 4 for dtype in dtypes):
        return lambda values: values

    def cast(values: Params) -> Params:
        leaves, structure = jax.tree_util.tree_flatten(values)
        return jax.tree_util.tree_unflatten(structure, [
            leaf.astype(dtype) if dtype.itemsize < 4 and jnp.issubdtype(dtype, jnp.floating)
            else leaf for leaf, dtype in zip(leaves, dtypes, strict=True)])

    return cast


def _latent_sites(trace: dict):
    """(name, site) of the continuous latent sample sites (discrete ones: `_split_sites`)."""
    return [
        (name, site) for name, site in trace.items()
        if site["type"] == "sample" and not site["is_observed"]
        and not site["fn"].support.is_discrete
    ]


def _abstract_prior_trace(model, arrays: dict, model_kwargs: dict):
    """(trace, {latent: constraining transform}, {latent: unconstrained zeros}) of the model
    at a prior draw, traced on shapes (`jax.eval_shape`), not run.

    Only the trace's static facts are read afterwards (site names and types, plates, shapes,
    supports). Run eagerly, the model compiled each of its operations on its own: 4 s to build
    the Problem of a two-component mixture (sampling its Dirichlet weights) against 0.1 s.
    Supports with array parameters (an interval with array bounds) are taken from one jitted
    run, concrete.
    """
    captured = {}

    def trace_prior(data):
        trace = handlers.trace(handlers.seed(model, 0)).get_trace(**data, **model_kwargs)
        captured["trace"] = trace
        latent = _latent_sites(trace)
        supports = {name: site["fn"].support for name, site in latent}
        unconstrained = {name: biject_to(site["fn"].support).inv(site["value"])
                         for name, site in latent}
        return supports, unconstrained

    supports, unconstrained = jax.eval_shape(trace_prior, arrays)
    if jax.tree_util.tree_leaves(supports):
        supports, unconstrained = jax.jit(trace_prior)(arrays)
    template = {name: jnp.asarray(np.zeros(value.shape, value.dtype))  # made on the host
                for name, value in unconstrained.items()}
    transforms = {name: biject_to(support) for name, support in supports.items()}
    return captured["trace"], transforms, template


def _trace_naming_invalid_sites(run_trace: Callable[[], dict]) -> dict:
    """Run a model trace; if NumPyro rejects a distribution's parameters, name the site.

    NumPyro's own error ("Normal distribution got invalid scale parameter.") does not say which
    site failed: on such an error the trace is repeated without validation and the first site
    whose value or log-density is not finite is named.
    """
    try:
        return run_trace()
    except ValueError as error:
        with validation_enabled(False):
            trace = run_trace()
        for name, site in trace.items():
            if site["type"] != "sample":
                continue
            finite = np.all(np.isfinite(np.asarray(site["value"]))) and np.all(
                np.isfinite(np.asarray(site["fn"].log_prob(site["value"])))
            )
            if not finite:
                raise ValueError(
                    f"site {name!r} is not finite at the initial point: {error}"
                ) from None
        raise


def _check_signature(model: Callable, data: dict, model_kwargs: dict) -> None:
    if not callable(model):
        raise ValueError(f"model must be a callable NumPyro model, got {type(model).__name__}")
    overlap = set(data) & set(model_kwargs)
    if overlap:
        raise ValueError(f"{sorted(overlap)} given both as data and as model_kwargs")
    try:
        inspect.signature(model).bind(**data, **model_kwargs)
    except TypeError as error:
        raise ValueError(
            f"model {getattr(model, '__name__', model)!r} cannot be called with data keys "
            f"{sorted(data)} and model_kwargs {sorted(model_kwargs)}: {error}"
        ) from None
    except ValueError:  # builtins without a signature: let the trace speak
        pass


def _exchangeable_sites(names: Sequence[str], trace: dict, latent: list[str]) -> tuple[str, ...]:
    """Validate `exchangeable`: distinct latent sites sharing a leading axis of length >= 2."""
    if isinstance(names, str):
        names = (names,)
    names = tuple(names)
    unknown = [name for name in names if name not in latent]
    if unknown or len(set(names)) != len(names):
        raise InputError(
            f"exchangeable must name distinct latent sites of the model ({', '.join(latent)}); "
            f"got {list(names)}"
        )
    lengths = {name: (jnp.shape(trace[name]["value"]) or (0,))[0] for name in names}
    if names and (len(set(lengths.values())) != 1 or min(lengths.values()) < 2):
        raise InputError(
            "exchangeable sites must share a leading (component) axis of length >= 2; their "
            f"leading lengths are {lengths}"
        )
    return names


def _split_sites(trace: dict) -> tuple[list[str], list[str]]:
    """Latent and observed sample-site names; rejects what a Problem cannot represent."""
    latent, observed = [], []
    for name, site in trace.items():
        if site["type"] == "param":
            raise ValueError(
                f"site {name!r} is a numpyro.param; give it a prior with numpyro.sample"
            )
        if site["type"] != "sample":
            continue
        if site["is_observed"]:
            observed.append(name)
        elif site["fn"].support.is_discrete:
            raise ValueError(
                f"latent site {name!r} is discrete; marginalise it (write mixtures with "
                f"dist.MixtureSameFamily)"
            )
        else:
            latent.append(name)
    if not observed:
        raise ValueError("the model has no observed site: pass the data as obs= in numpyro.sample")
    return latent, observed


def _masked_log_prob(site: dict) -> jax.Array:
    log_prob = site["fn"].log_prob(site["value"])
    if site.get("mask") is not None:
        log_prob = jnp.where(site["mask"], log_prob, 0.0)
    return log_prob


def _example_plate(site: dict, n: int) -> str | None:
    """The name of the plate that indexes examples at an observed site (None: leading axis).

    It is the one plate of size n around the site; without such a plate the leading axis of the
    site's log-density must be the example axis.
    """
    plates = [frame.name for frame in site["cond_indep_stack"] if frame.size == n]
    if len(plates) > 1:
        raise ValueError(
            f"observed site {site['name']!r} sits in several plates of size n={n} ({plates}); "
            f"cannot tell which one indexes the examples"
        )
    return plates[0] if plates else None


def _per_example(site: dict, plate: str | None, log_prob: jax.Array, size: int) -> jax.Array:
    """Sum a site's log-density over every axis but the example axis, giving shape (size,)."""
    if plate is not None:
        dim = next(frame.dim for frame in site["cond_indep_stack"] if frame.name == plate)
        log_prob = jnp.moveaxis(jnp.broadcast_to(log_prob, jnp.shape(log_prob)), dim, 0)
    if jnp.ndim(log_prob) == 0 or jnp.shape(log_prob)[0] != size:
        raise ValueError(
            f"observed site {site['name']!r} has log-density shape {jnp.shape(log_prob)}, which "
            f"has no example axis of length {size}: observe per-example data inside a plate "
            f"sized from the data (numpyro.plate('data', x.shape[0]))"
        )
    return jnp.reshape(log_prob, (size, -1)).sum(axis=1)
