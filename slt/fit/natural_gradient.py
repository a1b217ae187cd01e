"""Natural-gradient fitting: steepest descent in the Fisher metric, damped or pseudo-inverted.

The natural gradient of an objective J is G^{-1} grad J, with G the Fisher information: the
direction of steepest descent when distances between parameters are measured by the KL
divergence between the distributions they define (Amari 1998; the seeds' Grosse notes, eq.
10). Unlike the plain gradient it does not depend on the coordinates: under w = A u,
G_u^{-1} grad_u J = A^{-1} G_w^{-1} grad_w J (a feature in minutes or in seconds gives the same
predictions after a step), and for a Gaussian linear model one full step (learning rate 1,
no damping) lands on the optimum, since there G is the Hessian of the objective.

The objective is the one of `slt.fit_map` divided by n, in the unconstrained coordinates of
`slt.Problem`:

    J(w) = -(1/n) [ sum_i log p(y_i | x_i, w) + log p(w) ]     (MAP; MLE drops log p(w)),

and the metric is the per-example Fisher plus, for MAP, the prior's own curvature:

    G(w) = I(w) + H_prior(w) / n,   I(w) = E_x E_{y ~ p(y|x,w)} [s s^T]  (`fisher_information`
    in "unconstrained" coordinates, averaged over the data's inputs x_i),
    H_prior = -grad^2 log p(w)      (the prior precision for a Gaussian prior),

so that G is the Hessian of J for conjugate linear regression. Negative eigenvalues of G
(possible only from a prior whose log density is not concave) are set to 0.

The Fisher is "exact" wherever `fisher_information` has a closed form (Gaussian noise, scalar
mixtures of normals), "monte_carlo" otherwise (fresh draws of y at every step); the
"empirical" Fisher (gradients at the observed y, not the Fisher information) only when asked
for by `kind="empirical"`.

Two solvers for the direction d, from the eigendecomposition G = V diag(l) V^T:

* "damped" (default): d = (G + eps I)^{-1} grad J, eps = `damping`, by default
  eps = 1e-2 tr(G) / d: one hundredth of the mean eigenvalue, the trace-relative damping of
  Sun & Nielsen (2016, eq. 30). It bounds the step along directions where G vanishes (the
  null directions of a singular model) by 100 / mean eigenvalue times the gradient there,
  and leaves directions with eigenvalues far above the mean almost untouched. eps = 0 gives
  the undamped natural gradient and is refused at a singular G.
* "pinv": d = G^+ grad J, the Moore-Penrose pseudo-inverse over the eigenvalues above
  rank_tol times the largest (Thomas 2014): no step at all along the null directions. The
  rank it used is reported at every step. For a Gaussian model fitted by maximum likelihood,
  grad J lies in the range of G, so G d = grad J exactly.

The optimiser is configured by one frozen value, `NaturalGradientOptions` (the objective,
the Fisher kind, the solver and its damping, the step and its line search, the Monte Carlo
draws, the rank tolerance), as an Optax optimiser is by its hyperparameters:
`natural_gradient(model, data, options=...)` builds the pure (init, step) pair for one
model and data set, and `natural_gradient_fit` runs it from one start.

Each step is one compiled call: the Fisher, the gradient, the eigendecomposition, and
(`line_search=True`, default) a backtracking line search from `learning_rate`, halving the
step until the Armijo condition J(w - t d) <= J(w) - 1e-4 t grad J^T d holds (1e-4 is the
customary sufficient-decrease constant, Nocedal & Wright 2006, section 3.1). The cost per
step is O(n d^2) for the Fisher and O(d^3) for the eigendecomposition: this is for models of
up to a few thousand parameters (`slt.geometry.matrix_free` has Fisher-vector products for
larger ones).

References:
  S. Amari (1998), Natural gradient works efficiently in learning, Neural Computation 10.
  R. Grosse, lecture notes "Metrics", sections 3 and 6 (seed 002).
  K. Sun, F. Nielsen (2016), Relative Natural Gradient for Learning Large Complex Models,
  arXiv:1606.06069, eq. 30 (seed 004).
  P. Thomas (2014), GeNGA: A generalization of natural gradient ascent with positive and
  negative convergence results, ICML.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import xarray as xr

from slt.fit.map import Optimum
from slt.geometry.fisher import prepare
from slt.geometry.kernels import fisher_function
from slt.geometry.observation import as_model_spec, observation_model
from slt.geometry.request import FisherRequest
from slt.geometry.spectrum import DEFAULT_RANK_TOL, check_rank_tol
from slt.models.base import ModelSpec
from slt.problem import Params, Problem
from slt.results import Persistable, point_variables
from slt.validation import (
    InputError,
    require_bool,
    require_instance,
    require_int,
    require_one_of,
    require_positive,
    set_field,
)

__all__ = [
    "FISHER_KINDS",
    "SOLVERS",
    "NaturalGradient",
    "NaturalGradientDirection",
    "NaturalGradientInfo",
    "NaturalGradientOptions",
    "NaturalGradientResult",
    "NaturalGradientState",
    "natural_gradient",
    "natural_gradient_direction",
    "natural_gradient_fit",
]

SOLVERS = ("damped", "pinv")
FISHER_KINDS = ("auto", "exact", "monte_carlo", "empirical")

DAMPING_FRACTION = 1e-2  # default eps = DAMPING_FRACTION * tr(G) / d (Sun & Nielsen, eq. 30)
ARMIJO = 1e-4  # sufficient decrease constant of the line search (Nocedal & Wright, 3.1)
MAX_HALVINGS = 30  # the line search tries steps down to 2^-30 ~ 1e-9 of learning_rate


class NaturalGradientDirection(NamedTuple):
    """A natural-gradient direction: direction (d,), damping eps used, rank of the metric."""

    direction: jax.Array
    damping: jax.Array
    rank: jax.Array


def _direction(gradient, metric, solver: str, damping, rank_tol) -> NaturalGradientDirection:
    """The direction of the module docstring (no validation; jit-able)."""
    dim = gradient.shape[0]
    eigenvalues, vectors = jnp.linalg.eigh(0.5 * (metric + metric.T))
    eigenvalues = jnp.maximum(eigenvalues, 0.0)
    largest = eigenvalues[-1]
    kept = (eigenvalues > rank_tol * largest) & (largest > 0)
    rank = jnp.sum(kept)
    coefficients = vectors.T @ gradient
    if solver == "pinv":
        inverse = jnp.where(kept, 1.0 / jnp.where(kept, eigenvalues, 1.0), 0.0)
        eps = jnp.zeros((), eigenvalues.dtype)
    else:
        if damping is None:
            eps = DAMPING_FRACTION * jnp.sum(eigenvalues) / dim
        else:
            eps = jnp.asarray(damping, eigenvalues.dtype)
        # eps = 0 at a singular metric: the direction is not defined (inf), reported as NaN
        singular = (eps <= 0) & (rank < dim)
        inverse = jnp.where(singular, jnp.nan, 1.0 / (eigenvalues + eps))
    return NaturalGradientDirection(vectors @ (inverse * coefficients), eps, rank)


def _check_solver(solver: str, damping) -> float | None:
    require_one_of("solver", solver, SOLVERS)
    if damping is None:
        return None
    value = require_positive("damping", damping, allow_zero=True)
    if solver == "pinv":
        raise InputError("solver='pinv' takes no damping; use solver='damped' to damp")
    return value



@dataclass(frozen=True)
class NaturalGradientOptions:
    """How a natural-gradient optimiser steps: objective, metric, solver, step and draws.

    One step from w (module docstring), with J the per-example objective and G its metric,

        w <- w - t d,   d = (G + eps I)^{-1} grad J  ("damped")  or  G^+ grad J  ("pinv"),

        J(w) = -(1/n) [ sum_i log p(y_i | x_i, w) + log p(w) ],   G(w) = I(w) + H_prior(w) / n,

    (MLE, `prior=False`, drops log p(w) and H_prior), t = `learning_rate`, halved until the
    Armijo condition J(w - t d) <= J(w) - 1e-4 t grad J^T d holds when `line_search`.

    Attributes:
      prior: True: MAP (objective and metric include the prior); False: maximum likelihood.
      kind: the Fisher I(w): "auto" (exact where `fisher_information` has a closed form,
        else "monte_carlo"), "exact", "monte_carlo" (fresh draws of y at every step) or
        "empirical" (the gradient outer product at the observed data; not the Fisher
        information).
      solver: "damped" or "pinv" (`natural_gradient_direction`).
      damping: eps >= 0 of "damped"; None: eps = 1e-2 tr(G) / d, one hundredth of the mean
        eigenvalue (Sun & Nielsen 2016, eq. 30); refused by "pinv".
      learning_rate: t > 0, the step (or the first step the line search tries); 1 is the full
        natural-gradient (Fisher-scoring) step.
      line_search: backtrack until J decreases enough.
      num_draws: replicates R >= 2 of y per input for the Monte Carlo Fisher. The default 32
        gives a relative standard error of about sqrt(2 / (32 n)) per entry (at most 5% for
        n >= 25 inputs): ample for a preconditioner, whose small eigenvalues are damped
        anyway.
      rank_tol: eigenvalues of G at most rank_tol times the largest count as zero (the rank
        reported, and the eigenvalues "pinv" drops).

    Raises:
      InputError (a ValueError): a field out of its range, named in the message.

    Example:
      >>> NaturalGradientOptions(solver="pinv", prior=False)
      NaturalGradientOptions(prior=False, kind='auto', solver='pinv', damping=None, \
learning_rate=1.0, line_search=True, num_draws=32, rank_tol=1e-10)
      >>> NaturalGradientOptions(solver="pinv", damping=1e-3)
      Traceback (most recent call last):
      slt.validation.InputError: solver='pinv' takes no damping; use solver='damped' to damp
    """

    prior: bool = True
    kind: str = "auto"
    solver: str = "damped"
    damping: float | None = None
    learning_rate: float = 1.0
    line_search: bool = True
    num_draws: int = 32
    rank_tol: float = DEFAULT_RANK_TOL

    def __post_init__(self):
        def store(name, value):
            set_field(self, name, value)

        store("prior", require_bool("prior", self.prior))
        require_one_of("kind", self.kind, FISHER_KINDS)
        store("damping", _check_solver(self.solver, self.damping))
        store("learning_rate", require_positive("learning_rate", self.learning_rate))
        store("line_search", require_bool("line_search", self.line_search))
        store("num_draws", require_int("num_draws", self.num_draws, minimum=2))
        store("rank_tol", check_rank_tol(self.rank_tol))


def natural_gradient_direction(
    gradient: Any,
    metric: Any,
    *,
    solver: str = "damped",
    damping: float | None = None,
    rank_tol: float = DEFAULT_RANK_TOL,
) -> NaturalGradientDirection:
    """The natural-gradient direction (G + eps I)^{-1} g (damped) or G^+ g (pseudo-inverse).

    See the module docstring for both solvers and the default damping
    eps = 1e-2 tr(G) / d.

    Args:
      gradient: g, shape (d,).
      metric: G, symmetric positive semi-definite (d, d), e.g. `fisher_information(...).matrix`.
      solver: "damped" or "pinv".
      damping: eps >= 0 for "damped" (None: 1e-2 tr(G) / d); not accepted by "pinv".
      rank_tol: eigenvalues at most rank_tol times the largest count as zero (the rank, and
        the eigenvalues "pinv" drops).

    Returns:
      `NaturalGradientDirection(direction, damping, rank)`; the direction is NaN where it
      is not defined (damping 0 at a singular G).

    Example:
      >>> metric = jnp.array([[2.0, 0.0], [0.0, 0.0]])       # singular: nothing known on w_2
      >>> result = natural_gradient_direction(jnp.array([1.0, 1.0]), metric, solver="pinv")
      >>> result.direction, int(result.rank)                  # no step along the null direction
      (Array([0.5, 0. ], dtype=float64), 1)
    """
    damping = _check_solver(solver, damping)
    rank_tol = check_rank_tol(rank_tol)
    gradient, metric = jnp.asarray(gradient), jnp.asarray(metric)
    if gradient.ndim != 1 or metric.shape != (gradient.shape[0],) * 2:
        raise ValueError(
            f"gradient must be (d,) and metric (d, d); got {gradient.shape} and {metric.shape}"
        )
    return _direction(gradient, metric, solver, damping, rank_tol)


class NaturalGradientState(NamedTuple):
    """position: flat unconstrained parameters (`Problem.ravel` order); objective: J there
    (per example); gradient: grad J there."""

    position: jax.Array
    objective: jax.Array
    gradient: jax.Array


class NaturalGradientInfo(NamedTuple):
    """One step: step_size (the learning rate after halvings; 0 if no step was taken),
    damping eps, rank of the metric, decrement grad J^T d (>= 0, invariant under
    reparametrisation), accepted (whether the step decreased J), defined (whether the
    direction was finite: False for damping 0 at a singular metric)."""

    step_size: jax.Array
    damping: jax.Array
    rank: jax.Array
    decrement: jax.Array
    accepted: jax.Array
    defined: jax.Array


class NaturalGradient(NamedTuple):
    """A natural-gradient optimiser for one model and data set (`natural_gradient`), in
    BlackJAX's form: pure functions over a `NaturalGradientState`.

    init(params) -> state, from unconstrained parameters (a pytree, as `Problem.init`).
    step(key, state) -> (state, info): one compiled step; the key feeds the Monte Carlo
      Fisher (ignored by the other kinds).
    compile(key, state) -> seconds: compiles the step for these shapes ahead of time.
    problem: the `Problem` of the model and data. fisher_kind: the kind used.
    """

    init: Callable[[Params], NaturalGradientState]
    step: Callable[[jax.Array, NaturalGradientState],
                   tuple[NaturalGradientState, NaturalGradientInfo]]
    compile: Callable[[jax.Array, NaturalGradientState], float]
    problem: Problem
    fisher_kind: str


def _problem_of(model, data) -> Problem:
    """The Problem to optimise: `model` itself (data None) or `model.problem(data)`."""
    if isinstance(model, Problem):
        if data is not None:
            raise InputError("a Problem carries its data: leave data=None")
        as_model_spec(model)  # refuses a Problem.from_loss, naming why
        return model
    if callable(model) and not isinstance(model, ModelSpec):  # a NumPyro model function
        if data is None:
            raise InputError("a model function needs its data: natural_gradient(model, data)")
        return Problem(model, data)
    require_instance("model", model, ModelSpec,
                     "a Problem, a NumPyro model function or a ModelSpec from slt.models")
    if data is None:
        raise InputError("a ModelSpec needs its data: natural_gradient(spec, data, ...)")
    return model.problem(data)


def _coordinate_order(problem: Problem, coordinates) -> np.ndarray:
    """perm with theta_fisher = flat[perm], flat in `Problem.ravel` order."""
    if coordinates.dim != problem.dim:
        raise ValueError(
            f"the Fisher has {coordinates.dim} coordinates but the Problem {problem.dim}"
        )
    labels = problem.unravel(jnp.arange(problem.dim, dtype=jnp.float64))
    order = np.concatenate([np.ravel(np.asarray(labels[name])) for name in coordinates.site_names])
    return order.astype(int)


def _fisher_setup(model, values, data, kind, num_draws):
    """`prepare` the Fisher of `kind`; "auto" takes "exact" where it exists, else Monte Carlo.
    A Monte Carlo setup is checked with a stand-in key: `step` gives each step its own."""
    observation, _ = observation_model(model, values)
    inputs = None
    if observation.input_name is not None:
        if observation.input_name not in data:
            raise ValueError(f"data lack the model's inputs {observation.input_name!r}")
        inputs = data[observation.input_name]

    def attempt(which):
        if which == "empirical":
            request = FisherRequest(kind=which, data=data, coordinates="unconstrained")
            return prepare(model, values, request=request)
        monte_carlo = which == "monte_carlo"
        request = FisherRequest(kind=which, x=inputs, coordinates="unconstrained",
                                num_draws=num_draws if monte_carlo else None)
        return prepare(model, values, key=jax.random.key(0) if monte_carlo else None,
                       request=request)

    if kind != "auto":
        return attempt(kind)
    try:
        return attempt("exact")
    except ValueError:  # no closed form for this observation density
        return attempt("monte_carlo")


def natural_gradient(
    model: ModelSpec | Problem,
    data: Mapping[str, Any] | None = None,
    *,
    options: NaturalGradientOptions = NaturalGradientOptions(),
) -> NaturalGradient:
    """A natural-gradient optimiser (init, step) for `model` on `data` (BlackJAX style).

    Args:
      model: a `Problem` built from a NumPyro model (it carries its data: leave `data`
        None), or a `ModelSpec` of `slt.models` with `data`; the Fisher needs the
        observation density, which both know.
      data: for a ModelSpec, the data dict, as for `Problem` ({"x": ..., "y": ...} or
        {"y": ...}).
      options: how it steps (`NaturalGradientOptions`: MAP or MLE, the Fisher kind, the
        solver and damping, the learning rate and line search, the Monte Carlo draws, the
        rank tolerance); default: MAP, exact Fisher where available, damping
        eps = 1e-2 tr(G) / d, full steps with backtracking.

    Returns:
      A `NaturalGradient`; its `step(key, state)` takes the key of the Monte Carlo Fisher.

    Example:
      >>> mle = NaturalGradientOptions(prior=False)
      >>> optimiser = natural_gradient(problem, options=mle)     # linear regression, d = 2
      >>> state = optimiser.init({"w": jnp.zeros(2)})
      >>> state, info = optimiser.step(key, state)
      >>> state.position.round(3), bool(info.accepted)     # near the MLE after one damped step
      (Array([ 0.989, -0.439], dtype=float64), True)
    """
    require_instance("options", options, NaturalGradientOptions,
                     "a NaturalGradientOptions(...)")
    prior, solver, damping, rank_tol = (options.prior, options.solver, options.damping,
                                        options.rank_tol)
    with jax.enable_x64(True):
        problem = _problem_of(model, data)
        values = {k: np.asarray(v) for k, v in problem.constrain(problem.init(
            jax.random.key(0))).items()}
        setup = _fisher_setup(model, values, problem.data, options.kind, options.num_draws)
        metric, order = _metric_function(problem, setup, prior)
    objective = _objective(problem, prior)
    start_value_and_grad = jax.jit(jax.value_and_grad(objective))
    jitted = jax.jit(_step_function(objective, metric, solver, damping, rank_tol,
                                    options.learning_rate, options.line_search))
    quadrature = setup.kind == "exact" and setup.observation.family == "normal_mixture"

    def arrays_for(key, position):
        arrays = setup.arrays
        if setup.kind == "monte_carlo":
            if key is None:
                raise ValueError("a Monte Carlo Fisher needs a PRNG key at every step")
            arrays = arrays._replace(key=key)
        if quadrature:  # nodes over y covering the mixture at this point (host side)
            arrays = setup.with_nodes(np.asarray(position)[order][None])
        return arrays

    def init(params: Params) -> NaturalGradientState:
        with jax.enable_x64(True):
            position = jnp.asarray(problem.ravel(params), jnp.float64)
            if position.shape != (problem.dim,):
                raise ValueError(
                    f"params have {position.size} entries, the model has {problem.dim}"
                )
            value, gradient = start_value_and_grad(position)
            if not np.isfinite(float(value)):
                raise ValueError("the objective is not finite at the initial parameters")
            return NaturalGradientState(position, value, gradient)

    def step(key, state):
        with jax.enable_x64(True):
            return jitted(state, arrays_for(key, state.position))

    def compile_step(key, state) -> float:
        with jax.enable_x64(True):
            start = time.perf_counter()
            jitted.lower(state, arrays_for(key, state.position)).compile()
            return time.perf_counter() - start

    return NaturalGradient(init, step, compile_step, problem, setup.kind)


def _metric_function(problem: Problem, setup, prior: bool):
    """(metric, order): metric(position, arrays) is G at a flat point in `Problem.ravel`
    order, the Fisher of `setup` (whose coordinates are position[order]) plus, for MAP, the
    prior's curvature / n (module docstring); jit-able."""
    order = _coordinate_order(problem, setup.coordinates)
    inverse = np.argsort(order)
    fisher = fisher_function(setup.kind, setup.observation, setup.coordinates,
                             num_draws=setup.num_draws)

    def metric(position, arrays):
        information, _ = fisher(position[order], arrays)
        metric = information[inverse][:, inverse]
        if prior:
            metric = metric - jax.hessian(lambda w: problem.log_prior(problem.unravel(w)))(
                position) / problem.n
        return metric

    return metric, order


def _step_function(objective, metric, solver, damping, rank_tol, learning_rate, line_search):
    """core(state, arrays) -> (state, info): one natural-gradient step on `objective` in the
    metric `metric` (module docstring), to be jitted."""
    value_and_grad = jax.value_and_grad(objective)

    def core(state, arrays):
        position, value, gradient = state
        direction = _direction(gradient, metric(position, arrays), solver, damping, rank_tol)
        decrement = gradient @ direction.direction
        defined = jnp.all(jnp.isfinite(direction.direction))
        step = jnp.where(defined, direction.direction, 0.0)
        first = jnp.asarray(learning_rate, position.dtype)
        if line_search:
            size, sufficient = _line_search(objective, position, value, step, decrement, first)
            accepted = defined & sufficient
        else:
            size, accepted = first, defined
        new_position = position - jnp.where(accepted, size, 0.0) * step
        new_value, new_gradient = value_and_grad(new_position)
        if not line_search:  # a step to a non-finite objective is not taken
            accepted = accepted & jnp.isfinite(new_value)
            new_position = jnp.where(accepted, new_position, position)
            new_value = jnp.where(accepted, new_value, value)
            new_gradient = jnp.where(accepted, new_gradient, gradient)
        info = NaturalGradientInfo(jnp.where(accepted, size, 0.0), direction.damping,
                                   direction.rank, decrement, accepted, defined)
        return NaturalGradientState(new_position, new_value, new_gradient), info

    return core


def _objective(problem: Problem, prior: bool) -> Callable[[jax.Array], jax.Array]:
    """J(flat) of the module docstring: -(1/n) (log-likelihood [+ log prior]), +inf where it
    is not finite."""
    def objective(flat):
        params = problem.unravel(flat)
        total = jnp.sum(problem.loglik(params, problem.data))
        if prior:
            total = total + problem.log_prior(params)
        value = -total / problem.n
        return jnp.where(jnp.isfinite(value), value, jnp.inf)

    return objective


def _line_search(objective, position, value, step, decrement, first):
    """(size, sufficient): halve the step size from `first` until the Armijo condition
    J(w - t d) <= J(w) - ARMIJO t grad J^T d holds, at most MAX_HALVINGS times; `sufficient`
    says whether it holds at the size returned (jit-able)."""
    def sufficient(size, trial):
        return trial <= value - ARMIJO * size * decrement

    def halve(carry):
        size, halvings, _ = carry
        size = jnp.where(halvings == 0, size, 0.5 * size)
        return size, halvings + 1, objective(position - size * step)

    size, _, trial = jax.lax.while_loop(
        lambda c: (c[1] == 0) | (~sufficient(c[0], c[2]) & (c[1] <= MAX_HALVINGS)),
        halve, (first, 0, jnp.asarray(jnp.inf, position.dtype)),
    )
    return size, sufficient(size, trial)


@dataclass(frozen=True)
class NaturalGradientResult(Optimum, Persistable):
    """A natural-gradient fit: the end point, how it got there, and the metric's rank.

    Attributes (besides those of `slt.fit.Optimum`, at the end point):
      grad_norm: the norm of the gradient of the per-example objective J at the end.
      num_steps: steps taken; converged: grad_norm <= grad_tol; stop_reason: why it stopped.
      solver: "damped" or "pinv"; damping: eps of the last step (0 for "pinv").
      rank: the rank of the metric G at the last step (the rank "pinv" used; -1 when no
        step was taken); dim: d.
      fisher_kind: "exact", "monte_carlo" or "empirical".
      compile_time: seconds compiling the step; run_time: seconds of the steps after it.
      history: one row per step (step 0 is the start): objective J, grad_norm, rank,
        damping, step_size, decrement, seconds (cumulative, compilation excluded).
    """

    num_steps: int
    converged: bool
    stop_reason: str
    solver: str
    damping: float
    rank: int
    dim: int
    fisher_kind: str
    compile_time: float
    run_time: float
    history: pd.DataFrame = field(repr=False)

    def summary(self) -> pd.DataFrame:
        """One-row table of the fit."""
        return pd.DataFrame([{
            "objective": self.objective, "loglik": self.loglik, "log_joint": self.log_joint,
            "grad_norm": self.grad_norm, "steps": self.num_steps, "converged": self.converged,
            "solver": self.solver, "damping": self.damping, "rank": self.rank, "d": self.dim,
            "fisher": self.fisher_kind, "compile_s": self.compile_time,
            "run_s": self.run_time,
        }])

    def to_xarray(self) -> xr.Dataset:
        """The fit as an xarray Dataset.

        Returns:
          The columns of `history` (objective J in nats per example, grad_norm, rank, damping,
          step_size, decrement, seconds) over dim ``step`` (0 = the start); the end point's
          constrained site values, one variable per site with dims ``"<site>_dim_<i>"``
          (`slt.results.point_variables`); the scalars of the result (loglik, log_prior,
          log_joint in nats, objective, grad_norm, num_steps, converged as 0 or 1, stop_reason,
          solver, damping, rank, dim, fisher_kind, compile_time, run_time in seconds) as attrs.
        """
        return xr.Dataset.from_dataframe(self.history.set_index("step")).assign(
            point_variables(self.values)
        ).assign_attrs(
            loglik=self.loglik, log_prior=self.log_prior, log_joint=self.log_joint,
            objective=self.objective, grad_norm=self.grad_norm, num_steps=self.num_steps,
            converged=int(self.converged), stop_reason=self.stop_reason, solver=self.solver,
            damping=self.damping, rank=self.rank, dim=self.dim, fisher_kind=self.fisher_kind,
            compile_time=self.compile_time, run_time=self.run_time,
        )

    def plot(self, **kwargs):
        """J(w) - min J over the steps, on a log scale (`slt.plots.fit`); returns the figure."""
        from slt.plots.fit import plot_natural_gradient

        return plot_natural_gradient(self, **kwargs)

    def __repr__(self) -> str:
        return (
            f"NaturalGradientResult({self._describe()}, {self.num_steps} steps, "
            f"{self.stop_reason}; {self.solver} solver, damping={self.damping:.3g}, "
            f"rank {self.rank}/{self.dim}, {self.fisher_kind} Fisher)"
        )


def natural_gradient_fit(
    model: ModelSpec | Problem,
    data: Mapping[str, Any] | None = None,
    key: jax.Array | None = None,
    *,
    options: NaturalGradientOptions = NaturalGradientOptions(),
    init: Params | None = None,
    max_steps: int = 100,
    grad_tol: float = 1e-8,
) -> NaturalGradientResult:
    """Maximise log p(w | D) (or log p(D | w), `prior=False`) by natural-gradient steps.

    w <- w - t d, d = (G + eps I)^{-1} grad J (or G^+ grad J), with G the Fisher of the
    model (plus the prior's curvature for MAP) and t from a backtracking line search; see
    the module docstring. A local method from one start (`init`, or `Problem.init(key)`);
    for a global search run `slt.fit_map` first and pass its `params` as `init`. It is a
    separate function from `fit_map`: the Fisher needs the model's observation density, which
    a `Problem` from a NumPyro model and a `ModelSpec` know (a `Problem.from_loss` does not).

    Args:
      model: a `Problem` (then `data` is None: `natural_gradient_fit(problem, key=key)`) or
        a `ModelSpec` of `slt.models` with its `data`.
      data: for a ModelSpec, the data dict ({"x": ..., "y": ...} or {"y": ...}).
      key: PRNG key for the start (when `init` is None) and the Monte Carlo Fisher.
      options: how the optimiser steps (`NaturalGradientOptions`; default: MAP, exact Fisher
        where available, damping eps = 1e-2 tr(G) / d, full steps with backtracking).
      init: starting point, unconstrained parameters (e.g. `fit_map(...).params`).
      max_steps: at most this many steps.
      grad_tol: stop when the gradient norm of the per-example objective is below it.

    Returns:
      A `NaturalGradientResult`.

    Raises:
      InputError (a ValueError, `slt.validation`): options not a `NaturalGradientOptions`,
        max_steps not positive, grad_tol < 0, model neither a Problem nor a ModelSpec, data
        missing (ModelSpec) or given (Problem), no key and no init; what
        `NaturalGradientOptions` refuses is refused when it is built.
      ValueError: a non-finite objective at the start.
      FloatingPointError: damping 0 at a singular metric (use damping > 0 or "pinv").

    Example:
      >>> undamped = NaturalGradientOptions(damping=0.0)
      >>> fit = natural_gradient_fit(problem, key=key, options=undamped)  # linear regression
      >>> fit.num_steps, fit.stop_reason        # one full step lands on a linear model's MAP
      (1, 'gradient below grad_tol')
      >>> round(fit.loglik, 4)                  # as slt.fit_map finds
      -136.2484
    """
    max_steps = require_int("max_steps", max_steps, minimum=1)
    grad_tol = require_positive("grad_tol", grad_tol, allow_zero=True)
    if key is None and init is None:
        raise InputError("give a PRNG key (for the starting point) or init")
    key = jax.random.key(0) if key is None else key
    optimiser = natural_gradient(model, data, options=options)
    problem = optimiser.problem
    start_key, key = jax.random.split(key)
    state = optimiser.init(problem.init(start_key) if init is None else init)
    step_keys = jax.random.split(key, int(max_steps))
    compile_time = optimiser.compile(step_keys[0], state)
    state, rows, stop_reason, elapsed = _take_steps(optimiser, state, step_keys, grad_tol)
    history = pd.DataFrame(rows)
    last = rows[-1] if len(rows) > 1 else None
    with jax.enable_x64(True):
        params = problem.unravel(state.position)
        loglik = float(jnp.sum(problem.loglik(params, problem.data)))
        log_prior = float(problem.log_prior(params))
    grad_norm = float(np.linalg.norm(np.asarray(state.gradient)))
    return NaturalGradientResult(
        params=params,
        values=problem.constrain(params),
        loglik=loglik,
        log_prior=log_prior,
        log_joint=loglik + log_prior,
        objective="map" if options.prior else "mle",
        grad_norm=grad_norm,
        num_steps=len(rows) - 1,
        converged=grad_norm <= grad_tol,
        stop_reason=stop_reason,
        solver=options.solver,
        damping=float(last["damping"]) if last else float("nan"),
        rank=int(last["rank"]) if last else -1,
        dim=problem.dim,
        fisher_kind=optimiser.fisher_kind,
        compile_time=compile_time,
        run_time=elapsed,
        history=history,
    )


def _take_steps(optimiser: NaturalGradient, state, step_keys, grad_tol):
    """Step from `state`, one key of `step_keys` per step, until the gradient norm is at most
    `grad_tol`, a step is rejected or the keys run out; returns the last accepted state, the
    history rows (`_history_row`, the start first), why it stopped, and the seconds the steps
    took."""
    rows = [_history_row(0, state, None, 0.0)]
    stop_reason, elapsed = "max_steps reached", 0.0
    for number in range(1, len(step_keys) + 1):
        if float(rows[-1]["grad_norm"]) <= grad_tol:
            stop_reason = "gradient below grad_tol"
            break
        start = time.perf_counter()
        new_state, info = optimiser.step(step_keys[number - 1], state)
        jax.block_until_ready(new_state)
        elapsed += time.perf_counter() - start
        if not bool(info.defined):
            raise FloatingPointError(
                f"the metric is singular (rank {int(info.rank)} of {optimiser.problem.dim}) "
                "and the damping is 0: the natural gradient is not defined; use damping > 0 "
                "or solver='pinv'"
            )
        rows.append(_history_row(number, new_state, info, elapsed))
        if not bool(info.accepted):
            stop_reason = "step rejected: no decrease along the natural gradient"
            break
        state = new_state
    else:
        if float(rows[-1]["grad_norm"]) <= grad_tol:
            stop_reason = "gradient below grad_tol"
    return state, rows, stop_reason, elapsed


def _history_row(number, state, info, seconds) -> dict[str, Any]:
    row = {
        "step": number,
        "objective": float(state.objective),
        "grad_norm": float(jnp.linalg.norm(state.gradient)),
    }
    if info is None:
        return row | {"rank": np.nan, "damping": np.nan, "step_size": 0.0,
                      "decrement": np.nan, "seconds": 0.0}
    return row | {
        "rank": int(info.rank), "damping": float(info.damping),
        "step_size": float(info.step_size), "decrement": float(info.decrement),
        "seconds": seconds,
    }
