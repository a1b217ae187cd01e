"""What a model says about one observation: p(y | x, w) as a NumPyro distribution.

Fisher information needs the model's observation density as a function of the parameters,
for inputs x it is given (regression) or for no inputs at all (density models such as
mixtures). `observation_model(model, params)` takes a `ModelSpec` of `slt.models` or a
`Problem` built from any NumPyro model (`as_model_spec`: its data give the shapes, nothing is
simulated and no data are kept), validates a parameter point, traces the NumPyro model once
with NumPyro's effect handlers (`substitute`, `trace`) and returns an `ObservationModel`
whose methods are pure JAX functions of the constrained site values:

* `distribution(values, inputs)`: the observed site's distribution for a batch of examples;
* `log_density(values, inputs, outputs)`: per-example log p(y_i | x_i, w), shape (b,);
* `sample(key, values, inputs, shape)`: draws of y from the model.

Mixture log-densities are evaluated from the mixing weights themselves,
log sum_k w_k p_k(y) (`jax.nn.logsumexp` with weights `b=w`), not from NumPyro's clamped
logits, so that scores stay exact at a zero weight (pi = 0), where NumPyro's gradient
with respect to the vanishing weight is 0 instead of p_k(y)/p(y) - 1.
"""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.extend.core import Literal
from numpyro import handlers

from slt.geometry.coordinates import Coordinates, in_support
from slt.geometry.families import EXPONENTIAL_FAMILIES, family_of
from slt.models.base import ModelSpec
from slt.precision import at_full_precision
from slt.problem import Problem, _split_sites
from slt.validation import InputError, call_naming_shapes, require_data, require_float_array

__all__ = ["ObservationModel", "as_model_spec", "observation_model", "resolve_model",
           "site_values", "unwrap"]

# The families with an exact Fisher in the "whitened outputs" form J^T R^T R J
# (`slt.geometry.kernels.whitened_outputs`): Gaussian noise and the exponential families.
WHITENED_FAMILIES = ("normal", *EXPONENTIAL_FAMILIES)

_TEMPLATE_SIZE = 2  # examples simulated once to learn the data's keys and per-example shapes


def unwrap(fn: dist.Distribution) -> dist.Distribution:
    """Strip `Independent` and `ExpandedDistribution` wrappers (batch/event bookkeeping)."""
    while isinstance(fn, (dist.Independent, dist.ExpandedDistribution)):
        fn = fn.base_dist
    return fn


def _is_weighted_mixture(fn) -> bool:
    return isinstance(fn, dist.MixtureSameFamily) and isinstance(
        fn.mixing_distribution, dist.CategoricalProbs
    )


def safe_log_prob(base: dist.Distribution, y: jax.Array) -> jax.Array:
    """log p(y) of an unwrapped distribution; a mixture as log sum_k w_k p_k(y), exact at w_k = 0.

    The sum is shifted by the largest component log-density m (held constant for
    differentiation), so every term w_k exp(a_k - m) is at most w_k and the gradient with
    respect to a weight, exp(a_k - m) / sum, is finite also where w_k = 0 (NumPyro's and
    `jax.nn.logsumexp`'s gradients are 0 there).
    """
    if not _is_weighted_mixture(base):
        return base.log_prob(y)
    components = base.component_distribution.log_prob(jnp.expand_dims(y, -base.event_dim - 1))
    shift = jax.lax.stop_gradient(jnp.max(components, axis=-1, keepdims=True))
    total = jnp.sum(base.mixing_distribution.probs * jnp.exp(components - shift), axis=-1)
    return jnp.log(jnp.maximum(total, jnp.finfo(total.dtype).tiny)) + shift[..., 0]


def _validated_values(spec: ModelSpec, params: Any) -> dict[str, np.ndarray]:
    if not isinstance(params, Mapping):
        raise InputError(
            f"params must be a dict of constrained site values {list(spec.site_names)}, "
            f"got {type(params).__name__}"
        )
    unknown = sorted(set(params) - set(spec.site_names))
    missing = [name for name in spec.site_names if name not in params]
    if unknown or missing:
        raise InputError(
            f"{spec.name}: params must have exactly the sites {list(spec.site_names)}"
            + (f"; unknown: {unknown}" if unknown else "")
            + (f"; missing: {missing}" if missing else "")
        )
    values = {}
    for name in spec.site_names:
        value = require_float_array(f"params[{name!r}]", params[name])
        if not np.all(np.isfinite(value)):
            raise InputError(f"{spec.name}: params[{name!r}] is not finite: {value}")
        values[name] = value
    return values


def _finite_examples(what: str, array: Any, example_shape: tuple[int, ...]) -> np.ndarray:
    array = require_float_array(what, array, allow_bool=True)
    if array.ndim == 0 or array.shape[1:] != tuple(example_shape) or array.shape[0] == 0:
        shape = ", ".join(["n"] + [str(s) for s in example_shape])
        raise InputError(f"{what} must have shape ({shape}) with n >= 1, got {array.shape}")
    if not np.all(np.isfinite(array)):
        raise InputError(f"{what} has {int(np.sum(~np.isfinite(array)))} non-finite value(s)")
    return array


@dataclass(frozen=True)
class ObservationModel:
    """The observation density of a `ModelSpec`, as pure functions of constrained values.

    Attributes:
      spec: the model.
      site_shapes: each latent site's shape, in `spec.site_names` order.
      input_shape: the per-example shape of the inputs x; None for a density model.
      output_name: the observed site (and data key) y.
      output_shape: the per-example shape of y (() for a scalar observation).
      input_name: the data key of the inputs (None for a density model).
      supports: each latent site's support.
      family: "normal" (Gaussian y, possibly with learned scale), "normal_mixture" (a
        mixture of normals), "bernoulli", "binomial", "poisson", "categorical"
        (`slt.geometry.families`), or "other": decides how the exact Fisher is computed.
      learned_scale: for "normal", whether the noise sd depends on the parameters (read off
        the traced computation: False for a fixed noise_scale, which halves the work).
      distribution_name: the observation distribution's class name (for messages).
      output_dtype: the dtype of y (integer for counts and class labels).
      num_classes: K for "categorical", else None.

    Its coordinate systems (`coordinates`) are built once and kept with it.
    """

    spec: ModelSpec
    site_shapes: tuple[tuple[int, ...], ...]
    input_shape: tuple[int, ...] | None
    output_name: str
    output_shape: tuple[int, ...]
    input_name: str | None = field(compare=False)
    supports: tuple[Any, ...] = field(compare=False, repr=False)
    family: str = field(compare=False)
    learned_scale: bool = field(compare=False, default=True)
    distribution_name: str = field(compare=False, default="")
    output_dtype: Any = field(compare=False, default=np.float64)
    num_classes: int | None = field(compare=False, default=None)
    _coordinate_systems: dict[str, Coordinates] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    @property
    def has_inputs(self) -> bool:
        return self.input_name is not None

    def coordinates(self, system: str) -> Coordinates:
        """The latent sites' `Coordinates` in `system` ("natural" or "unconstrained")."""
        if system not in self._coordinate_systems:
            self._coordinate_systems[system] = Coordinates.build(
                system, self.spec.site_names, self.site_shapes, self.supports
            )
        return self._coordinate_systems[system]

    def check_inputs(self, x: Any) -> np.ndarray | None:
        """x as float64 (n, *input_shape), or ValueError; None (and must be None) without inputs."""
        name = self.spec.name
        if self.input_name is None:
            if x is not None:
                raise InputError(f"{name} is a density model with no inputs; leave x=None")
            return None
        shape = ", ".join(map(str, self.input_shape))
        if x is None:
            raise InputError(
                f"{name} is a regression model: give its inputs x, shape (n, {shape}), "
                "over which the Fisher is averaged"
            )
        return _finite_examples(f"{name}: x", x, self.input_shape)

    def check_outputs(self, y: Any, n: int | None) -> np.ndarray:
        """Observed y (n, *output_shape) in the model's dtype (float64, or integer counts and
        labels), or ValueError."""
        y = _finite_examples(f"{self.spec.name}: {self.output_name}", y, self.output_shape)
        if n is not None and y.shape[0] != n:
            raise InputError(f"{self.spec.name}: {y.shape[0]} outputs for {n} inputs")
        if np.issubdtype(self.output_dtype, np.integer):
            if not np.all(y == np.round(y)):
                raise InputError(
                    f"{self.spec.name}: {self.output_name} must hold whole numbers for "
                    f"{self.distribution_name} observations"
                )
            return y.astype(self.output_dtype)
        return y

    def _data(self, inputs: jax.Array | None) -> dict[str, jax.Array]:
        size = 1 if inputs is None else inputs.shape[0]
        data = {self.output_name: jnp.zeros((size,) + self.output_shape, self.output_dtype)}
        if inputs is not None:
            data[self.input_name] = inputs
        return data

    @at_full_precision
    def distribution(self, values: Mapping[str, jax.Array], inputs: jax.Array | None):
        """The observed site's distribution for the b examples of `inputs` (b = 1 without x);
        the model's matrix products at full float32 precision (`slt.precision`)."""
        model = handlers.substitute(handlers.seed(self.spec.model, 0), data=dict(values))
        trace = handlers.trace(model).get_trace(**self._data(inputs))
        return trace[self.output_name]["fn"]

    def log_density(self, values, inputs, outputs: jax.Array) -> jax.Array:
        """Per-example log p(y_i | x_i, w), shape (b,), summed over each example's entries."""
        fn = self.distribution(values, inputs)
        log_prob = safe_log_prob(unwrap(fn), outputs)
        return jnp.reshape(log_prob, (outputs.shape[0], -1)).sum(axis=1)

    def sample(self, key: jax.Array, values, inputs, sample_shape=()) -> jax.Array:
        """Draws y ~ p(y | x, w), shape sample_shape + (b,) + output_shape."""
        return self.distribution(values, inputs).sample(key, sample_shape)

    def normal_moments(self, values, inputs) -> tuple[jax.Array, jax.Array]:
        """Mean and standard deviation of a Gaussian observation, each (b,) + output_shape."""
        base = unwrap(self.distribution(values, inputs))
        size = 1 if inputs is None else inputs.shape[0]
        shape = (size,) + self.output_shape
        return jnp.broadcast_to(base.loc, shape), jnp.broadcast_to(base.scale, shape)


class _Described(NamedTuple):
    """What geometry keeps of a model: its spec and its observation models by site shapes."""

    spec: ModelSpec
    observations: dict[tuple, ObservationModel]


# Per model object given to geometry (a Problem or a ModelSpec), while that object lives. The
# keys are weak and no entry references its key, so a model the user drops is released with
# what was traced for it (and `slt.compile_cache` releases its programs).
_DESCRIBED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def as_model_spec(model: ModelSpec | Problem) -> ModelSpec:
    """The `ModelSpec` geometry works with: a copy of `model`, or one describing a `Problem`.

    For a Problem built from a NumPyro model the spec's model is that model (with the
    Problem's `model_kwargs` bound) and its "simulator" only returns zeros of the data's
    per-example shapes and dtypes: geometry needs the data's layout, never new data, and
    the spec holds no array of the Problem. A ModelSpec is copied (the copy is equal to it),
    so that nothing geometry keeps references the object the user holds. The same model
    gives the same spec while it lives, and its observation models and compiled Fisher
    functions are reused.

    Raises:
      InputError: neither a ModelSpec nor a Problem, or a `Problem.from_loss` (it has a
        loss but no observation distribution, which the Fisher information needs).
    """
    return _described(model).spec


def _described(model: ModelSpec | Problem) -> _Described:
    if not isinstance(model, (ModelSpec, Problem)):
        raise InputError(
            "model must be a Problem, a NumPyro model function (with its inputs x) or a "
            f"ModelSpec from slt.models, got {type(model).__name__}"
        )
    if isinstance(model, Problem) and model.model is None and model.prediction is None:
        raise InputError(
            "this Problem was built by Problem.from_loss: it has a loss but no observation "
            "distribution p(y | x, w), which the Fisher information needs; name the "
            "likelihood with Problem.from_predict(predict_fn, params, data, likelihood), or "
            "build the Problem from a NumPyro model (Problem(model, data))"
        )
    if model not in _DESCRIBED:
        spec = replace(model) if isinstance(model, ModelSpec) else _spec_of_problem(model)
        _DESCRIBED[model] = _Described(spec, {})
    return _DESCRIBED[model]


def _spec_of_problem(problem: Problem) -> ModelSpec:
    data = problem.data
    if problem.prediction is not None:  # its observation model, written as a NumPyro model
        prediction = problem.prediction
        model = prediction.numpyro_model(problem.reference_params)
        data = {key: data[key] for key in (prediction.input_name, prediction.output_name)}
    else:
        kwargs = dict(problem.model_kwargs)
        model = functools.partial(problem.model, **kwargs) if kwargs else problem.model
    layout = {key: (tuple(value.shape[1:]), value.dtype) for key, value in data.items()}

    def zeros_like_data(key, values, n):
        return {name: jnp.zeros((n,) + shape, dtype) for name, (shape, dtype) in layout.items()}

    return ModelSpec(
        name=getattr(model, "__name__", "model"), model=model, dim=problem.dim,
        prior="the Problem's", site_names=problem.site_names, simulate_fn=zeros_like_data,
    )


def resolve_model(model: Any, params: Any, *, x: Any = None,
                  data: Mapping[str, Any] | None = None) -> ModelSpec | Problem:
    """The model geometry works with: a `Problem` or `ModelSpec` as given; a NumPyro model
    function, with its inputs, as a `Problem`.

    A model function `model(x, y=None)` is called with its inputs as the first argument and
    observes the site named after another of its arguments. With `data` (the empirical
    Fisher) the Problem is `Problem(model, data)`. With only inputs `x` the observations'
    shapes are read off one draw of the model at `params` (NumPyro's predictive: the site is
    sampled where no y is given); only their shapes are used, the Fisher averages over x.
    Each call builds a new Problem: for repeated calls build one `Problem` and pass it
    (compiled programs are kept with it).

    Raises:
      InputError: not a Problem, ModelSpec or function; a function without x or data; no
        sampled site named after one of the function's arguments.
    """
    if isinstance(model, (ModelSpec, Problem)) or not callable(model):
        return model
    name = getattr(model, "__name__", "model")
    if data is not None:
        return Problem(model, data)
    if x is None:
        raise InputError(
            f"a NumPyro model function ({name}) needs its inputs: x=... (FisherRequest(x=...) "
            "for the Fisher functions; or data={...} for kind='empirical'); for a density model "
            "without inputs build a Problem(model, data)"
        )
    arguments = list(inspect.signature(model).parameters)
    inputs = jnp.asarray(require_data({arguments[0]: x})[0][arguments[0]], jnp.float64)
    _require_finite_values(params)
    seeded = handlers.substitute(handlers.seed(model, 0), data=dict(params))
    with jax.enable_x64(True):
        trace = call_naming_shapes(
            lambda: handlers.trace(seeded).get_trace(**{arguments[0]: inputs}),
            f"{name}({arguments[0]}) at params of shapes "
            f"{ {site: np.shape(value) for site, value in params.items()} }",
            {arguments[0]: inputs})
    drawn = [site for site in arguments[1:] if site in trace and site not in params
             and trace[site]["type"] == "sample"]
    if len(drawn) != 1:
        raise InputError(
            f"{name}: geometry needs one observed site named after an argument of the model "
            f"(model(x, y=None) with numpyro.sample('y', ..., obs=y)); the arguments are "
            f"{arguments}, the sampled sites {[k for k in trace if k not in params]}"
        )
    return Problem(model, {arguments[0]: inputs, drawn[0]: trace[drawn[0]]["value"]})


def _require_finite_values(params: Any) -> None:
    """Constrained site values as `observation_model` takes them: a dict of finite numbers."""
    if not isinstance(params, Mapping):
        raise InputError(f"params must be a dict of constrained site values, got "
                         f"{type(params).__name__}")
    for site, value in params.items():
        array = np.asarray(value)
        if array.dtype.kind not in "iuf" or not np.all(np.isfinite(array)):
            raise InputError(f"params[{site!r}] must hold finite numbers, got {value!r}")


def site_values(model: ModelSpec | Problem, params: Any) -> Any:
    """`params` as {site: value}: a `from_predict` Problem's parameter pytree becomes one
    entry per leaf (named as its `site_names`); anything else is returned as given."""
    if not (isinstance(model, Problem) and model.prediction is not None):
        return params
    if isinstance(params, Mapping) and set(params) == set(model.site_names):
        return params
    structure = jax.tree_util.tree_structure(model.reference_params)
    if jax.tree_util.tree_structure(params) != structure:
        raise InputError(
            f"params must have the structure of the network's parameters {structure}, "
            f"got {jax.tree_util.tree_structure(params)}"
        )
    return dict(zip(model.site_names, jax.tree_util.tree_leaves(params), strict=True))


def observation_model(
    model: ModelSpec | Problem, params: Mapping[str, Any]
) -> tuple[ObservationModel, dict[str, np.ndarray]]:
    """Validate a parameter point of `model` and describe its observation density.

    Args:
      model: a `ModelSpec` (any with one observed site) or a `Problem` built from a NumPyro
        model (`as_model_spec`).
      params: {site: constrained value} for every latent site, finite, in the site's support
        or on its boundary (pi = 0 is allowed).

    Returns:
      (observation model, values as float64 numpy arrays). The observation model is kept
      per model and site shapes while the model lives: repeated calls trace the NumPyro
      model once.

    Raises:
      ValueError: unknown or missing sites, non-finite values, wrong shapes, values outside
        the support; InputError: what `as_model_spec` refuses.
    """
    described = _described(model)
    spec = described.spec
    values = _validated_values(spec, site_values(model, params))
    shapes = tuple(value.shape for value in values.values())
    if shapes not in described.observations:
        described.observations[shapes] = _build(spec, values)
    observation = described.observations[shapes]
    for name, support in zip(spec.site_names, observation.supports, strict=True):
        if not in_support(values[name], support):
            raise InputError(
                f"{spec.name}: params[{name!r}] = {values[name]} is outside its support {support}"
            )
    return observation, values


def _build(spec: ModelSpec, values: dict[str, np.ndarray]) -> ObservationModel:
    trace, template = _abstract_trace(spec, values)
    latent, observed = _split_sites(trace)
    if tuple(latent) != tuple(spec.site_names):
        raise ValueError(
            f"{spec.name}: site_names {spec.site_names} disagree with the model's sites {latent}"
        )
    output_name, input_name = _data_sites(spec, observed, template)
    shapes, supports = [], []
    for name in latent:
        site = trace[name]
        expected = tuple(site["fn"].shape())
        if values[name].shape != expected:
            raise InputError(
                f"{spec.name}: params[{name!r}] has shape {values[name].shape}, "
                f"expected {expected}"
            )
        shapes.append(expected)
        supports.append(site["fn"].support)
    base = unwrap(trace[output_name]["fn"])
    family = _family(base)
    observation = ObservationModel(
        spec=spec,
        site_shapes=tuple(shapes),
        input_shape=tuple(template[input_name].shape[1:]) if input_name else None,
        output_name=output_name,
        output_shape=tuple(template[output_name].shape[1:]),
        input_name=input_name,
        supports=tuple(supports),
        family=family,
        distribution_name=type(base).__name__,
        output_dtype=np.dtype(template[output_name].dtype),
        num_classes=int(jnp.shape(base.logits)[-1]) if family == "categorical" else None,
    )
    if family == "multivariate_normal" and _covariance_depends_on_parameters(
        observation, values, template.get(input_name)
    ):
        return replace(observation, family="other",
                       distribution_name="MultivariateNormal (parameter-dependent covariance)")
    if family != "normal":
        return observation
    with jax.enable_x64(True):
        scale = jax.make_jaxpr(lambda v, x: observation.normal_moments(v, x)[1])(
            values, template.get(input_name)
        )
    return replace(observation, learned_scale=_depends_on_inputs(scale.jaxpr))


def _covariance_depends_on_parameters(observation, values, inputs) -> bool:
    """Whether a multivariate normal observation's covariance changes with the parameters
    (read off the traced computation, as `learned_scale`)."""
    with jax.enable_x64(True):
        jaxpr = jax.make_jaxpr(
            lambda v, x: unwrap(observation.distribution(v, x)).scale_tril
        )(values, inputs).jaxpr
    flags = [True] * len(jax.tree_util.tree_leaves(values))
    flags += [False] * (len(jaxpr.invars) - len(flags))
    return any(_dependent_outputs(jaxpr, flags))


def _abstract_trace(spec: ModelSpec, values: dict[str, np.ndarray]) -> tuple[dict, dict]:
    """The model's trace at `values` on a simulated template data set, and that data set's
    shapes and dtypes, both from shapes only (`eval_shape`): only static facts (site types,
    shapes, supports, distribution classes) are kept."""
    captured = {}
    with jax.enable_x64(True):
        try:
            template = jax.eval_shape(
                lambda v: spec.simulate(jax.random.key(0), v, _TEMPLATE_SIZE), values)
        except Exception as error:  # noqa: BLE001 - any failure of the user's simulator
            raise ValueError(
                f"{spec.name}: its simulator failed at these params "
                f"({type(error).__name__}: {str(error).splitlines()[0]}); geometry reads only "
                "the data's shapes from it: pass a Problem(model, data) or the model function "
                "with its inputs x instead of a ModelSpec"
            ) from None

    def trace_abstractly(values):
        data = {key: jnp.zeros(shape.shape, shape.dtype) for key, shape in template.items()}
        model = handlers.substitute(handlers.seed(spec.model, 0), data=values)
        captured["trace"] = handlers.trace(model).get_trace(**data)
        captured["template"] = {k: jax.ShapeDtypeStruct(v.shape, v.dtype) for k, v in data.items()}
        return 0.0

    with jax.enable_x64(True):
        try:
            jax.eval_shape(trace_abstractly, values)
        except (TypeError, ValueError, IndexError) as error:
            shapes = {name: value.shape for name, value in values.items()}
            raise InputError(
                f"{spec.name}: params do not fit the model (check their shapes, got {shapes}): "
                f"{str(error).splitlines()[0]}"
            ) from None
    return captured["trace"], captured["template"]


def _data_sites(spec: ModelSpec, observed: list[str], template: dict) -> tuple[str, str | None]:
    """(output name, input name or None): the one observed site y, named after its data
    argument, and at most one other data argument x."""
    observed = [n for n in observed if not (n.startswith("_") and n.endswith("_log_det"))]
    if len(observed) != 1:
        raise ValueError(
            f"{spec.name}: Fisher geometry needs exactly one observed site y, the model has "
            f"{observed or 'none'}"
        )
    if observed[0] not in template:
        raise ValueError(
            f"{spec.name}: the observed site {observed[0]!r} must be named after its data "
            f"argument (one of {sorted(template)}), so that y can be passed as {observed[0]}=y"
        )
    output_name = observed[0]
    inputs = [k for k in template if k != output_name]
    if len(inputs) > 1:
        raise ValueError(f"{spec.name}: more than one input array {inputs} is not supported")
    return output_name, inputs[0] if inputs else None


def _family(base) -> str:
    """The observation family of an (unwrapped) distribution: "normal", "normal_mixture" (a
    weighted mixture of normals), an exponential family of `families`, or "other"."""
    if isinstance(base, dist.Normal):
        return "normal"
    if _is_weighted_mixture(base) and isinstance(
        unwrap(base.component_distribution), dist.Normal
    ):
        return "normal_mixture"
    return family_of(base) or "other"


def _depends_on_inputs(jaxpr) -> bool:
    """Whether any output of a jaxpr depends on any of its inputs."""
    return any(_dependent_outputs(jaxpr, [True] * len(jaxpr.invars)))


def _dependent_outputs(jaxpr, dependent_inputs: list[bool]) -> list[bool]:
    """Which outputs of `jaxpr` depend on the inputs flagged in `dependent_inputs`.

    Follows sub-jaxprs of calls (`pjit`, `closed_call`); any other equation consuming a
    dependent variable makes all its outputs dependent (conservative).
    """
    dependent = {v for v, flag in zip(jaxpr.invars, dependent_inputs, strict=True) if flag}

    def is_dependent(variable) -> bool:
        return not isinstance(variable, Literal) and variable in dependent

    for equation in jaxpr.eqns:
        flags = [is_dependent(v) for v in equation.invars]
        inner = equation.params.get("jaxpr", equation.params.get("call_jaxpr"))
        inner = getattr(inner, "jaxpr", inner)
        if inner is not None and len(getattr(inner, "invars", ())) == len(flags):
            outputs = _dependent_outputs(inner, flags)
        else:
            outputs = [any(flags)] * len(equation.outvars)
        dependent.update(v for v, flag in zip(equation.outvars, outputs, strict=True) if flag)
    return [is_dependent(v) for v in jaxpr.outvars]
