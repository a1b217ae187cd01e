"""Relative Fisher information (RFIM) of one neuron, one layer or two layers, in closed form.

The relative Fisher information of a component with parameters theta, response h and
everything else held fixed (its inputs x, the layers after it) is the Fisher information of
p(h | theta, x) alone (Sun & Nielsen 2016, Definition 1):

    g^h(theta | x) = E_{h ~ p(h | theta, x)} [ grad_theta log p(h | theta, x) grad^T ],

averaged here over the given inputs x_1..x_n (uniform weights). For a neuron with
pre-activation t = w^T x + b = w~^T x~, x~ = (x, 1), every case is a weight times x~ x~^T:

    g(w~) = (1/n) sum_i nu(t_i) x~_i x~_i^T.

Response models and weights nu(t) (`Response`, `neuron_weight`):

* "tanh": y in {-1, 1}, p(y = 1) = (1 + tanh t) / 2 (Bernoulli): nu = sech^2 t = 1 - tanh^2 t.
* "sigmoid": y in {0, 1}, p(y = 1) = sigm(t) (Bernoulli, logistic regression):
  nu = sigm(t) (1 - sigm(t)).
* every other activation f is a Gaussian response y ~ N(f(t), s^2): nu = f'(t)^2 / s^2
  (the generic Gaussian neuron, the seed's eq. 58), with f' from `ACTIVATIONS`:
  "identity" (f' = 1), "relu" (f' = 1[t > 0]), "leaky_relu" (slope i for t < 0, the paper's
  PReLU: nu = i^2 / s^2 there, the paper's eq. 16 misprints it mu^2 / s^2), "smooth_relu"
  (relu_w(t) = w log(exp(i t / w) + exp(t / w)), f' = i + (1 - i) sigm((1 - i) t / w); the
  paper's eq. 17 misprints the first exponent), "softplus" (w log(1 + exp(t / w)),
  f' = sigm(t / w): smooth_relu with i = 0), "elu" (t for t >= 0, a (e^t - 1) below:
  f' = a e^t for t < 0, so nu is continuous at 0 only for a = 1, despite the paper's claim).
  A callable activation is taken as a Gaussian response with f' by autodiff.
  At the kink t = 0 of relu and leaky_relu, f' is taken from the t < 0 side (as
  `jax.nn.relu`'s gradient is); inputs land there with probability zero.

Layers (parameters ordered neuron by neuron: w_1, b_1, w_2, b_2, ...; `neuron_major_order`
maps the library's site order W row-major then b to it):

* `linear_layer_fisher`: y ~ N(W x + b, s^2 I): (1 / s^2) I_m (x) mean x~ x~^T.
* `layer_fisher`: independent responses y_l of one activation: block diagonal, block l
  = mean nu(t_l) x~ x~^T (no coupling between neurons).
* `softmax_layer_fisher`: p(y = k) = eta_k = softmax(W x + b)_k: (diag eta - eta eta^T) (x)
  x~ x~^T, averaged. Always singular: adding one vector to every class's w~ leaves p
  unchanged, so the rank is at most (m - 1)(D_x + 1).
* `two_layer_fisher`: a = V x + b, h = f(a) deterministic, t = U h + c, independent
  responses y_l around t_l: the (V, b) block of the full Fisher,

      G_ij = mean_x sum_l U_li U_lj nu_out(t_l) f'(a_i) f'(a_j) x~ x~^T,

  with f' the hidden activation's derivative. The paper's eq. 26 writes nu_f(w_i, x) where
  f'(a_i) belongs; the two agree only for sigmoid and tanh hidden units (seed-004 digest).
  Because h is deterministic this is an exact block of the network's Fisher: it sees the
  singularities of the outgoing weights (U_{.i} = 0 makes unit i's block vanish).

A relative Fisher is a surrogate metric, not an identifiability test: the one-layer forms
ignore the layers downstream, so they stay full rank at the singular points of the whole
network (c_i = 0, w_i = +-w_j). Use them as preconditioners (relative natural gradient) or
per-layer diagnostics (dead or saturated units: nu = 0); use `fisher_information` for the
rank and determinant of the model.

All functions are pure JAX (jit- and vmap-able) and return (k, k) arrays in the dtype of
their inputs (float64 when 64-bit JAX is enabled).

References:
  K. Sun, F. Nielsen (2016), Relative Natural Gradient for Learning Large Complex Models,
  arXiv:1606.06069, eqs. 12-26 and appendices B-I; digest with errata in
  shared/reference/seed-004-relative-fim.md.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slt.validation import InputError, require_int, set_field

__all__ = [
    "ACTIVATIONS",
    "BERNOULLI_ACTIVATIONS",
    "Response",
    "activation_function",
    "layer_fisher",
    "linear_layer_fisher",
    "neuron_fisher",
    "neuron_major_order",
    "neuron_weight",
    "softmax_layer_fisher",
    "two_layer_fisher",
]


def _leaky(t, slope):
    return jnp.where(t > 0, t, slope * t)


def _leaky_derivative(t, slope):
    return jnp.where(t > 0, 1.0, slope) * jnp.ones_like(t)


def _smooth_relu(t, slope, smoothness):
    return smoothness * jnp.logaddexp(slope * t / smoothness, t / smoothness)


def _smooth_relu_derivative(t, slope, smoothness):
    return slope + (1.0 - slope) * jax.nn.sigmoid((1.0 - slope) * t / smoothness)


def _elu(t, alpha):
    return jnp.where(t >= 0, t, alpha * jnp.expm1(jnp.minimum(t, 0.0)))


def _elu_derivative(t, alpha):
    return jnp.where(t >= 0, 1.0, alpha * jnp.exp(jnp.minimum(t, 0.0)))


# name -> (f(t, **shape), f'(t, **shape), the shape parameters it takes)
ACTIVATIONS: dict[str, tuple[Callable, Callable, tuple[str, ...]]] = {
    "tanh": (lambda t: jnp.tanh(t), lambda t: 1.0 - jnp.tanh(t) ** 2, ()),
    "sigmoid": (
        lambda t: jax.nn.sigmoid(t),
        lambda t: jax.nn.sigmoid(t) * jax.nn.sigmoid(-t),
        (),
    ),
    "identity": (lambda t: t, lambda t: jnp.ones_like(t), ()),
    "relu": (lambda t: _leaky(t, 0.0), lambda t: _leaky_derivative(t, 0.0), ()),
    "leaky_relu": (_leaky, _leaky_derivative, ("slope",)),
    "smooth_relu": (_smooth_relu, _smooth_relu_derivative, ("slope", "smoothness")),
    "softplus": (
        lambda t, smoothness: _smooth_relu(t, 0.0, smoothness),
        lambda t, smoothness: _smooth_relu_derivative(t, 0.0, smoothness),
        ("smoothness",),
    ),
    "elu": (_elu, _elu_derivative, ("alpha",)),
}
"""Activations f with their derivatives f' and the shape parameters each takes."""

BERNOULLI_ACTIVATIONS = ("tanh", "sigmoid")
"""Activations whose neuron is a Bernoulli response (every other one is Gaussian)."""

# Defaults of the shape parameters: leaky slope 0.01 is jax.nn.leaky_relu's; smoothness 1
# gives the standard softplus; alpha = 1 is the ELU whose nu is continuous at 0.
_SHAPE_DEFAULTS = {"slope": 0.01, "smoothness": 1.0, "alpha": 1.0}


def _number(field: str, value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise InputError(f"Response.{field} must be a real number, got {value!r}") from None


def _callable_name(activation: Callable) -> str:
    return getattr(activation, "__qualname__", None) or repr(activation)


@dataclass(frozen=True)
class Response:
    """The response model of a neuron: y | t from its pre-activation t = w^T x + b.

    Its Fisher weight nu(t), the Fisher information of y about t, is (`weight`):

    * "tanh": y in {-1, 1}, p(y = 1) = (1 + tanh t) / 2 (Bernoulli): nu = sech^2 t.
    * "sigmoid": y in {0, 1}, p(y = 1) = sigm(t) (Bernoulli): nu = sigm(t) (1 - sigm(t)).
    * every other activation f: y ~ N(f(t), s^2) (Gaussian): nu = f'(t)^2 / s^2, with f'
      from `ACTIVATIONS` ("identity", "relu", "leaky_relu", "smooth_relu", "softplus",
      "elu"; the module docstring gives each f') or by autodiff for a callable f.

    A bare activation name or callable stands for `Response(activation)` wherever a
    `Response` is taken. Unset fields take their defaults here, so the repr shows the values
    used.

    Args:
      activation: a name in `ACTIVATIONS` or an elementwise callable (Gaussian response).
      noise_scale: s > 0 of a Gaussian response (default 1); refused for Bernoulli ones.
      slope: the slope i in [0, 1) for t < 0 ("leaky_relu", "smooth_relu"; default 0.01,
        `jax.nn.leaky_relu`'s).
      smoothness: w > 0 ("smooth_relu", "softplus"; default 1, the standard softplus).
      alpha: a > 0 ("elu"; default 1, the ELU whose nu is continuous at 0).

    Raises:
      InputError: an unknown activation, a shape parameter the activation does not take
        or out of its range, or a noise_scale on a Bernoulli response or not > 0.

    Example:
      >>> Response("leaky_relu", noise_scale=0.5)
      Response('leaky_relu', noise_scale=0.5, slope=0.01)
      >>> Response("tanh").weight(jnp.array([0.0]))   # sech^2 0
      Array([1.], dtype=float64)
    """

    activation: str | Callable
    noise_scale: float | None = None
    slope: float | None = None
    smoothness: float | None = None
    alpha: float | None = None

    def __post_init__(self):
        activation = self.activation
        given = {"slope": self.slope, "smoothness": self.smoothness, "alpha": self.alpha}
        if callable(activation) and not isinstance(activation, str):
            if any(v is not None for v in given.values()):
                raise InputError("Response: slope / smoothness / alpha are for named activations")
            takes = ()
        elif isinstance(activation, str) and activation in ACTIVATIONS:
            takes = ACTIVATIONS[activation][2]
        else:
            raise InputError(
                f"Response.activation must be one of {sorted(ACTIVATIONS)} or a callable, "
                f"got {activation!r}"
            )
        extra = sorted(k for k, v in given.items() if v is not None and k not in takes)
        if extra:
            raise InputError(
                f"Response: activation {activation!r} takes no {extra} "
                f"(it takes {list(takes) or 'none'})"
            )
        for k in takes:
            value = _SHAPE_DEFAULTS[k] if given[k] is None else given[k]
            set_field(self, k, _number(k, value))
        if self.slope is not None and not 0.0 <= self.slope < 1.0:
            raise InputError(f"Response.slope must be in [0, 1), got {self.slope}")
        if self.smoothness is not None and not self.smoothness > 0:
            raise InputError(f"Response.smoothness must be > 0, got {self.smoothness}")
        if self.alpha is not None and not self.alpha > 0:
            raise InputError(f"Response.alpha must be > 0, got {self.alpha}")
        if self.bernoulli:
            if self.noise_scale is not None:
                raise InputError(
                    f"Response.noise_scale: a {activation!r} neuron has a Bernoulli response; "
                    "noise_scale is for Gaussian ones"
                )
            return
        noise_scale = 1.0 if self.noise_scale is None else _number("noise_scale", self.noise_scale)
        if not noise_scale > 0:
            raise InputError(f"Response.noise_scale must be > 0, got {noise_scale}")
        set_field(self, "noise_scale", noise_scale)

    @property
    def bernoulli(self) -> bool:
        """Whether the response is Bernoulli ("tanh", "sigmoid"); otherwise it is Gaussian."""
        return isinstance(self.activation, str) and self.activation in BERNOULLI_ACTIVATIONS

    def functions(self) -> tuple[Callable, Callable]:
        """(f, f'): the activation and its derivative, elementwise functions of t."""
        if not isinstance(self.activation, str):
            activation = self.activation
            return activation, jnp.vectorize(jax.grad(lambda t: activation(t)))
        function, derivative, takes = ACTIVATIONS[self.activation]
        shape = {k: getattr(self, k) for k in takes}
        return partial(function, **shape), partial(derivative, **shape)

    def weight(self, t: Any) -> jax.Array:
        """nu(t), the shape of t (the class docstring)."""
        _, derivative = self.functions()
        t = jnp.asarray(t)
        if self.bernoulli:
            return derivative(t)  # sech^2 t, sigm(t)(1 - sigm(t)): p'^2 / (p (1 - p))
        return derivative(t) ** 2 / self.noise_scale**2

    def __repr__(self) -> str:
        activation = self.activation
        shown = repr(activation) if isinstance(activation, str) else _callable_name(activation)
        fields = ("noise_scale", "slope", "smoothness", "alpha")
        set_ = [(k, getattr(self, k)) for k in fields if getattr(self, k) is not None]
        rest = "".join(f", {k}={v!r}" for k, v in set_)
        return f"Response({shown}{rest})"


def _as_response(response: Response | str | Callable, name: str = "response") -> Response:
    """A `Response`, or a bare activation name / callable as `Response(activation)`."""
    if isinstance(response, Response):
        return response
    if isinstance(response, str) or callable(response):
        return Response(response)
    raise InputError(
        f"{name} must be a Response, an activation name or a callable, got {response!r}"
    )


def activation_function(response: Response | str | Callable) -> tuple[Callable, Callable]:
    """(f, f') for an activation of `ACTIVATIONS` (or a callable, f' by autodiff).

    Args:
      response: a `Response` (its activation and shape parameters), or a bare activation
        name or callable.

    Returns:
      (f, f_prime), both elementwise functions of t.

    Example:
      >>> softplus = Response("softplus", smoothness=0.5)    # w log(1 + e^(t/w))
      >>> f, f_prime = activation_function(softplus)
      >>> round(float(f(0.0)), 4), float(f_prime(0.0))       # w log 2, sigm(0)
      (0.3466, 0.5)
    """
    return _as_response(response).functions()


def neuron_weight(response: Response | str | Callable, t: Any) -> jax.Array:
    """nu(t): the Fisher information of a neuron's response about its pre-activation t.

    nu = sech^2 t (tanh), sigm(t)(1 - sigm(t)) (sigmoid), f'(t)^2 / s^2 (Gaussian responses);
    see `Response`.

    Args:
      response: the response model: a `Response`, or a bare activation name or callable.
      t: pre-activations, any shape.

    Returns:
      nu(t), the shape of t.

    Example:
      >>> neuron_weight(Response("relu", noise_scale=0.5), jnp.array([-1.0, 2.0]))  # 1[t > 0] / s^2
      Array([0., 4.], dtype=float64)
    """
    return _as_response(response).weight(t)


def _augmented(x: Any) -> jax.Array:
    """x (n, D_x) -> x~ = (x, 1), shape (n, D_x + 1); checks shape and finiteness."""
    x = jnp.asarray(x)
    if x.ndim != 2 or x.shape[0] == 0:
        raise ValueError(f"x must have shape (n, num_inputs) with n >= 1, got {x.shape}")
    if not isinstance(x, jax.core.Tracer) and not bool(jnp.all(jnp.isfinite(x))):
        raise ValueError("x has non-finite values")
    return jnp.concatenate([x, jnp.ones((x.shape[0], 1), x.dtype)], axis=1)


def _layer_parameters(W: Any, b: Any, num_inputs: int, what: str) -> tuple[jax.Array, jax.Array]:
    W, b = jnp.asarray(W), jnp.asarray(b)
    if W.ndim != 2 or W.shape[1] != num_inputs or b.shape != (W.shape[0],):
        raise ValueError(
            f"{what}: weights must be (num_units, {num_inputs}) and biases (num_units,), got "
            f"{W.shape} and {b.shape}"
        )
    return W, b


def _weighted_second_moment(weights: jax.Array, augmented: jax.Array) -> jax.Array:
    """mean_i C_i (x) x~_i x~_i^T for coefficients C_i (n, k, k): (k (D+1), k (D+1))."""
    n, k = weights.shape[0], weights.shape[1]
    size = augmented.shape[1]
    blocks = jnp.einsum("njk,na,nb->jakb", weights, augmented, augmented) / n
    return blocks.reshape(k * size, k * size)


def neuron_fisher(response: Response | str | Callable, w: Any, b: Any, x: Any) -> jax.Array:
    """Relative Fisher of one neuron: (1/n) sum_i nu(w^T x_i + b) x~_i x~_i^T (eq. 21).

    Args:
      response: the response model: a `Response`, or a bare activation name or callable.
      w: input weights (D_x,); b: the bias (scalar).
      x: inputs (n, D_x).

    Returns:
      (D_x + 1, D_x + 1) in the order (w_1, ..., w_{D_x}, b). Rank at most the number of
      inputs with nu > 0 (a dead ReLU unit gives the zero matrix).

    Example:
      >>> x = jnp.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [2.0, -1.0]])
      >>> fisher = neuron_fisher("sigmoid", jnp.array([1.0, -0.5]), 0.2, x)   # logistic regression
      >>> np.asarray(fisher).round(3)                                          # (w_1, w_2, b)
      array([[0.159, 0.026, 0.129],
             [0.026, 0.131, 0.102],
             [0.129, 0.102, 0.176]])
    """
    w, b = jnp.asarray(w), jnp.asarray(b)
    if w.ndim != 1 or b.shape != ():
        raise ValueError(f"neuron_fisher: w must be (num_inputs,) and b a scalar, got "
                         f"{w.shape} and {b.shape}")
    return layer_fisher(response, w[None, :], b[None], x)


def layer_fisher(response: Response | str | Callable, W: Any, b: Any, x: Any) -> jax.Array:
    """Relative Fisher of a layer y_l ~ response(w_l^T x + b_l), l = 1..m, independently.

    Block diagonal (eq. 23): block l is (1/n) sum_i nu(t_il) x~_i x~_i^T.

    Args:
      response: the response model of every unit: a `Response`, or a bare activation name
        or callable.
      W: weights (m, D_x); b: biases (m,).
      x: inputs (n, D_x).

    Returns:
      (m (D_x + 1), m (D_x + 1)), neuron-major: (W[0, :], b[0], W[1, :], b[1], ...).

    Example:
      >>> x = jnp.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [2.0, -1.0]])
      >>> W, b = jnp.array([[1.0, 0.0], [-1.0, 1.0]]), jnp.array([0.0, -5.0])   # unit 2 is dead
      >>> fisher = layer_fisher(Response("relu", noise_scale=1.0), W, b, x)
      >>> fisher.shape, int(jnp.linalg.matrix_rank(fisher))     # unit 2's block is zero
      ((6, 6), 3)
    """
    augmented = _augmented(x)
    W, b = _layer_parameters(W, b, augmented.shape[1] - 1, "layer_fisher")
    response = _as_response(response)  # checked before tracing
    weights = response.weight(augmented[:, :-1] @ W.T + b)  # (n, m)
    coefficients = jax.vmap(jnp.diag)(weights)
    return _weighted_second_moment(coefficients, augmented)


def linear_layer_fisher(x: Any, num_outputs: int, *, noise_scale: float = 1.0) -> jax.Array:
    """Relative Fisher of a linear layer y ~ N(W x + b, s^2 I): (1/s^2) I_m (x) mean x~ x~^T.

    Independent of W (eq. 22): the uncentred second moment of the augmented inputs, which is
    what whitening or batch normalisation conditions.

    Args:
      x: inputs (n, D_x).
      num_outputs: m.
      noise_scale: s > 0.

    Returns:
      (m (D_x + 1), m (D_x + 1)), neuron-major.

    Example:
      >>> linear_layer_fisher(jnp.array([[1.0], [-1.0]]), 2, noise_scale=0.5)   # mean x~ x~^T = I
      Array([[4., 0., 0., 0.],
             [0., 4., 0., 0.],
             [0., 0., 4., 0.],
             [0., 0., 0., 4.]], dtype=float64)
    """
    num_outputs = require_int("num_outputs", num_outputs, minimum=1)
    if not noise_scale > 0:
        raise ValueError(f"noise_scale must be > 0, got {noise_scale}")
    augmented = _augmented(x)
    moment = augmented.T @ augmented / augmented.shape[0]
    return jnp.kron(jnp.eye(int(num_outputs), dtype=moment.dtype), moment) / noise_scale**2


def softmax_layer_fisher(W: Any, b: Any, x: Any) -> jax.Array:
    """Relative Fisher of a softmax layer p(y = k | x) = softmax(W x + b)_k (eq. 25).

    (1/n) sum_i (diag eta_i - eta_i eta_i^T) (x) x~_i x~_i^T with eta_i = softmax(W x_i + b).
    Singular at every point: the vectors (v, v, ..., v) are null (rank <= (m - 1)(D_x + 1));
    pin one class's weights to remove them.

    Args:
      W: the class weights (m, D_x); b: the class biases (m,).
      x: inputs (n, D_x), one row per input.

    Returns:
      The (m (D_x + 1), m (D_x + 1)) matrix, class-major: (W[0, :], b[0], W[1, :], b[1], ...).

    Example:
      >>> x = jnp.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [2.0, -1.0]])
      >>> fisher = softmax_layer_fisher(jnp.zeros((3, 2)), jnp.zeros(3), x)   # 3 classes
      >>> fisher.shape, int(jnp.linalg.matrix_rank(fisher))                  # (3 - 1)(2 + 1)
      ((9, 9), 6)
    """
    augmented = _augmented(x)
    W, b = _layer_parameters(W, b, augmented.shape[1] - 1, "softmax_layer_fisher")
    eta = jax.nn.softmax(augmented[:, :-1] @ W.T + b, axis=-1)  # (n, m)
    coefficients = jax.vmap(jnp.diag)(eta) - eta[:, :, None] * eta[:, None, :]
    return _weighted_second_moment(coefficients, augmented)


def two_layer_fisher(
    params: Mapping[str, Any],
    x: Any,
    *,
    hidden: Response | str | Callable = "tanh",
    output: Response | str | Callable = "identity",
) -> jax.Array:
    """Relative Fisher of the first layer (V, b) of y_l ~ response_out(U f(V x + b) + c).

    G_ij = (1/n) sum_x sum_l U_li U_lj nu_out(t_l) f'(a_i) f'(a_j) x~ x~^T, a = V x + b,
    t = U f(a) + c: the seed's eq. 26 with f'(a_i) in place of nu_f(w_i, x) (module
    docstring). With h deterministic it is the (V, b) block of the network's Fisher; for
    `slt.models.two_layer_network` (identity output, Gaussian noise s) it equals that block
    of `fisher_information(...)` exactly.

    Args:
      params: the network's weights, named as the sites of `slt.models.two_layer_network`
        (the point `fisher_information` takes): "V" first-layer weights (h, D_x), "b" its
        biases (h,), "U" second-layer weights (m, h), "c" its biases (m,).
      x: inputs (n, D_x).
      hidden: the hidden activation f: a `Response` (only its activation and shape
        parameters are used, e.g. `Response("softplus", smoothness=0.5)`), or a bare
        activation name or callable.
      output: the output neuron's response model: a `Response` (e.g.
        `Response("identity", noise_scale=0.5)` for Gaussian regression, "sigmoid" or
        "tanh" for Bernoulli outputs), or a bare activation name or callable.

    Returns:
      (h (D_x + 1), h (D_x + 1)), hidden-unit-major: (V[0, :], b[0], V[1, :], b[1], ...).

    Example:
      >>> x = jnp.array([[0.0, 1.0], [1.0, 0.0], [1.0, 1.0], [2.0, -1.0]])
      >>> params = {"V": jnp.array([[1.0, 0.0], [-1.0, 1.0]]), "b": jnp.zeros(2),
      ...           "U": jnp.array([[1.0, 0.0]]), "c": jnp.zeros(1)}  # unit 2: no outgoing weight
      >>> fisher = two_layer_fisher(params, x, hidden="tanh",
      ...                           output=Response("identity", noise_scale=0.5))
      >>> fisher.shape, int(jnp.linalg.matrix_rank(fisher))  # unit 2's block vanishes
      ((6, 6), 3)
    """
    missing = sorted({"V", "b", "U", "c"} - set(params)) if isinstance(params, Mapping) else None
    if missing is None or missing:
        raise InputError(
            "two_layer_fisher: params must be a dict with the weights 'V', 'b', 'U' and 'c'"
            + (f"; missing {missing}" if missing else f", got {type(params).__name__}")
        )
    V, b, U, c = (params[name] for name in ("V", "b", "U", "c"))
    augmented = _augmented(x)
    V, b = _layer_parameters(V, b, augmented.shape[1] - 1, "two_layer_fisher (V, b)")
    U, c = _layer_parameters(U, c, V.shape[0], "two_layer_fisher (U, c)")
    function, derivative = _as_response(hidden, "hidden").functions()
    nu = _as_response(output, "output").weight
    pre_hidden = augmented[:, :-1] @ V.T + b  # (n, h)
    pre_output = function(pre_hidden) @ U.T + c  # (n, m)
    slopes = derivative(pre_hidden)  # (n, h)
    outer = jnp.einsum("nl,li,lj->nij", nu(pre_output), U, U)
    coefficients = outer * slopes[:, :, None] * slopes[:, None, :]
    return _weighted_second_moment(coefficients, augmented)


def neuron_major_order(num_units: int, num_inputs: int) -> np.ndarray:
    """Indices taking site-major coordinates (W row-major, then b) to neuron-major ones.

    The library's Fisher coordinates list a layer as W[0,0], ..., W[m-1, D-1], b[0], ...,
    b[m-1]; the relative Fisher lists W[0, :], b[0], W[1, :], b[1], .... With
    `order = neuron_major_order(m, D)`, `fisher.matrix[np.ix_(order, order)]` is in the
    relative Fisher's order (for a network, the first m (D + 1) coordinates are V and b).

    Example:
      >>> neuron_major_order(2, 3)    # W[0, :], b[0], W[1, :], b[1]
      array([0, 1, 2, 6, 3, 4, 5, 7])
    """
    units, inputs = int(num_units), int(num_inputs)
    if units < 1 or inputs < 1:
        raise ValueError(f"num_units and num_inputs must be >= 1, got {num_units}, {num_inputs}")
    weights = np.arange(units * inputs).reshape(units, inputs)
    biases = units * inputs + np.arange(units)[:, None]
    return np.concatenate([weights, biases], axis=1).ravel()
