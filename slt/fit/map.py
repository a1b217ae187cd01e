"""MAP and maximum-likelihood fits with random restarts (optax: Adam, then L-BFGS)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import optax.tree_utils as otu
import pandas as pd
import xarray as xr

from slt import compile_cache
from slt.problem import Params, Problem, require_problem
from slt.results import Persistable, point_variables
from slt.threads import side_by_side
from slt.validation import (
    require_instance,
    require_int,
    require_key,
    require_params,
    require_positive,
    set_field,
)

__all__ = ["FitResult", "MAPFit", "Optimum", "fit_map"]

# L-BFGS also stops a restart whose objective has stopped falling: STALL_STEPS consecutive steps
# each lowering f by at most STALL_ULPS machine epsilons of max(|f|, 1), the rounding floor of
# f itself (module doc of `MAPFit`).
STALL_STEPS = 10
STALL_ULPS = 10


@dataclass(frozen=True)
class MAPFit:
    """How `fit_map` optimises: random restarts, Adam to a basin, L-BFGS to convergence.

    Each of `num_restarts` restarts starts at `problem.init` (uniform on
    (-init_radius, init_radius) in unconstrained coordinates; the first at `init` when one is
    given), takes `adam_steps` Adam steps on the per-example objective f(w) = -(1/n) log p
    (log p(w | D) for MAP, log p(D | w) for MLE), the learning rate cosine-decayed from
    `learning_rate` to 1% of it, then polishes with L-BFGS (zoom line search) until
    ||grad f|| < `grad_tol`, or `lbfgs_steps` steps are taken, or f has stopped falling:
    `STALL_STEPS` (10) steps in a row each lowering it by at most `STALL_ULPS` (10) machine
    epsilons of max(|f|, 1). The last is the floor of the arithmetic: in float32 f is
    rounded at about 1e-7 of itself, the gradient of a sum over the data at about 1e-4, so
    ||grad f|| < 1e-8 is out of reach and every restart took all `lbfgs_steps` steps without
    changing f (Old Faithful K = 4: 8.5 of the fit's 9.3 s); in float64 it stops a restart
    whose gradient does not vanish (a ReLU kink, below). On a CPU each restart is one call of
    a one-restart program, the calls side by side on the cores; on an accelerator all
    restarts run at once (`vmap`) and the batch stops when each restart has.

    Attributes:
      num_restarts: random starting points (>= 1). The default, 32, finds the global optimum
        on every model of `slt.models` at the sizes in tests/test_fit.py (ReLU networks have
        many near-equal local optima; 8 restarts missed it by 1e-3 nats).
      init_radius: half-width of the uniform starting box (> 0).
      adam_steps: Adam steps (>= 0); learning_rate: Adam's initial learning rate (> 0).
      lbfgs_steps: the most L-BFGS steps (>= 0); grad_tol: they stop once the gradient norm
        of the per-example objective is below this (>= 0).
      agree_tol: restarts within this many nats of the best count as agreeing
        (`FitResult.num_agree`).

    Example:
      >>> MAPFit(num_restarts=4)
      MAPFit(num_restarts=4, init_radius=2.0, adam_steps=2000, learning_rate=0.05, \
lbfgs_steps=500, grad_tol=1e-08, agree_tol=0.001)
      >>> MAPFit(learning_rate=-1.0)
      Traceback (most recent call last):
      slt.validation.InputError: learning_rate must be a finite number > 0, got -1.0
    """

    num_restarts: int = 32
    init_radius: float = 2.0
    adam_steps: int = 2000
    learning_rate: float = 0.05
    lbfgs_steps: int = 500
    grad_tol: float = 1e-8
    agree_tol: float = 1e-3

    def __post_init__(self):
        for name, minimum in (("num_restarts", 1), ("adam_steps", 0), ("lbfgs_steps", 0)):
            set_field(self, name, require_int(name, getattr(self, name),
                                                       minimum=minimum))
        for name in ("init_radius", "learning_rate"):
            set_field(self, name, require_positive(name, getattr(self, name)))
        for name in ("grad_tol", "agree_tol"):
            set_field(self, name, require_positive(name, getattr(self, name),
                                                            allow_zero=True))


@dataclass(frozen=True)
class Optimum:
    """A point reached by maximising log p(w | D) (MAP) or log p(D | w) (MLE): the fields and
    the reading shared by `FitResult` (restarts) and `NaturalGradientResult` (steps), each of
    which is a result type of its own (`slt.results.Persistable`).

    Attributes:
      params: the point in unconstrained coordinates; `values` the same on the support.
      loglik: sum_i log p(y_i | x_i, w) there, i.e. -n L_n(w).
      log_prior: log prior density of the unconstrained parameters (Jacobian included).
      log_joint: log_prior + loglik.
      objective: "map" (maximises log_joint) or "mle" (maximises loglik).
      grad_norm: Euclidean norm of the gradient of the objective there, in unconstrained
        coordinates (each subclass says how it scales the objective: total or per example).
    """

    params: Params
    values: dict[str, Any]
    loglik: float
    log_prior: float
    log_joint: float
    objective: str
    grad_norm: float

    @property
    def best(self) -> float:
        """The objective at the point: log_joint for MAP, loglik for MLE."""
        return self.log_joint if self.objective == "map" else self.loglik

    def _describe(self) -> str:
        """The start of both reprs: "map: loglik=..., log_joint=..., grad_norm=..."."""
        return (
            f"{self.objective}: loglik={self.loglik:.6g}, log_joint={self.log_joint:.6g}, "
            f"grad_norm={self.grad_norm:.2e}"
        )


@dataclass(frozen=True)
class FitResult(Optimum, Persistable):
    """The best of several optimisation runs.

    Attributes (besides those of `Optimum`, for the best restart):
      grad_norm: the norm of the gradient of the total objective (in nats, unconstrained
        coordinates) at the optimum.
      num_restarts: how many random starts were run; num_agree: how many reached the best
        objective within `agree_tol` nats (label switching gives equal objectives at different
        points; agreement is judged on the objective, not the parameters).
      restart_objectives: the objective (log_joint or loglik) each restart reached, NaN for a
        restart that diverged.
      restart_params: (restart, dim) the flat unconstrained point each restart reached
        (`Problem.ravel`), or None: where the evidence's fast path starts its chains and which
        optima its proposal must cover (`slt.estimators.evidence.draws`).
    """

    num_restarts: int
    num_agree: int
    agree_tol: float
    restart_objectives: np.ndarray = field(repr=False)
    restart_params: np.ndarray | None = field(default=None, repr=False)

    def summary(self) -> pd.DataFrame:
        """One-row table of the fit."""
        return pd.DataFrame(
            [
                {
                    "objective": self.objective,
                    "loglik": self.loglik,
                    "log_prior": self.log_prior,
                    "log_joint": self.log_joint,
                    "grad_norm": self.grad_norm,
                    "agree": f"{self.num_agree}/{self.num_restarts}",
                }
            ]
        )

    def to_xarray(self) -> xr.Dataset:
        """The fit as an xarray Dataset.

        Returns:
          ``restart_objective`` over dim ``restart`` (nats: the objective each restart reached,
          in the order they ran, NaN for a diverged one); the optimum's constrained site values,
          one variable per site with dims ``"<site>_dim_<i>"`` (`slt.results.point_variables`);
          the scalars (loglik, log_prior, log_joint, grad_norm in nats; objective, num_restarts,
          num_agree, agree_tol) as attrs.
        """
        return xr.Dataset(
            {"restart_objective": (("restart",), np.asarray(self.restart_objectives)),
             **point_variables(self.values)},
            coords={"restart": np.arange(np.size(self.restart_objectives))},
            attrs={"objective": self.objective, "loglik": self.loglik,
                   "log_prior": self.log_prior, "log_joint": self.log_joint,
                   "grad_norm": self.grad_norm, "num_restarts": self.num_restarts,
                   "num_agree": self.num_agree, "agree_tol": self.agree_tol},
        )

    def plot(self, **kwargs):
        """The restarts' objectives, best first, with the best and the `agree_tol` band."""
        from slt.plots.fit import plot_fit

        return plot_fit(self, **kwargs)

    def __repr__(self) -> str:
        return (
            f"FitResult({self._describe()}, {self.num_agree}/{self.num_restarts} restarts agree)"
        )


def fit_map(
    problem: Problem,
    key: jax.Array,
    optimizer: MAPFit = MAPFit(),
    *,
    prior: bool = True,
    init: Params | None = None,
) -> FitResult:
    """Maximise log p(w | D) (MAP) or log p(D | w) (MLE, `prior=False`) from random restarts.

    The restarts, Adam and L-BFGS phases are `optimizer`'s (`MAPFit`, its fields stated
    there). MAP is taken in unconstrained coordinates (the prior includes the log-Jacobian),
    which is the point a Laplace approximation expands around. With ReLU networks the optimum
    can sit on a kink (a data point on a unit's boundary), where the gradient does not
    vanish: `grad_norm` then stays O(1) although the objective is optimal to ~1e-6 nats.

    Args:
      problem: the model and data.
      key: PRNG key for the starting points.
      optimizer: the restarts and the optimiser's settings (`MAPFit`).
      prior: True for MAP, False for maximum likelihood.
      init: optional starting point (unconstrained pytree) used as the first restart.

    Returns:
      A `FitResult`.

    Raises:
      InputError (a ValueError): problem not a Problem, key not a PRNG key, optimizer not a
        `MAPFit` value, an `init` that does not fit the problem or is not finite.
      FloatingPointError: every restart ended at a non-finite objective.

    Example:
      >>> fit = slt.fit_map(problem, key)       # linear regression, true w = (1, -0.5)
      >>> fit.values["w"].round(3), round(fit.loglik, 3), fit.num_agree
      (Array([ 0.99 , -0.439], dtype=float64), -136.248, 32)
    """
    require_problem(problem)
    require_key(key)
    require_instance("optimizer", optimizer, MAPFit, "a MAPFit value, e.g. MAPFit()")
    num_restarts, init_radius = optimizer.num_restarts, optimizer.init_radius
    adam_steps, learning_rate = optimizer.adam_steps, optimizer.learning_rate
    lbfgs_steps, grad_tol = optimizer.lbfgs_steps, optimizer.grad_tol
    agree_tol = optimizer.agree_tol
    if init is not None:
        require_params(problem, init, "init")

    starts = np.array(problem.random_starts(key, num_restarts, init_radius))
    if init is not None:
        starts[0] = np.asarray(problem.ravel(init), starts.dtype)
    finals, logliks, log_priors, grad_norms = (
        np.array(a)
        for a in _restarts_program(problem, starts, prior, adam_steps, learning_rate,
                                   lbfgs_steps, grad_tol)(starts, problem.data)
    )
    objectives = np.asarray(logliks + log_priors if prior else logliks, dtype=np.float64)
    objectives[~np.isfinite(objectives)] = np.nan
    if np.all(np.isnan(objectives)):
        raise FloatingPointError(
            "every restart of fit_map ended at a non-finite objective; lower learning_rate or "
            "check the model"
        )
    best = int(np.nanargmax(objectives))
    params = problem.unravel(jnp.asarray(finals[best]))
    return FitResult(
        params=params,
        values=problem.constrain(params),
        loglik=float(logliks[best]),
        log_prior=float(log_priors[best]),
        log_joint=float(logliks[best] + log_priors[best]),
        objective="map" if prior else "mle",
        grad_norm=float(grad_norms[best]),
        num_restarts=num_restarts,
        num_agree=int(np.sum(objectives >= objectives[best] - agree_tol)),
        agree_tol=agree_tol,
        restart_objectives=objectives,
        restart_params=finals,
    )


def _restarts_program(problem, starts, *settings):
    """(starts (restart, dim), data) -> (final points, log-likelihoods, log priors, gradient
    norms of the total objective), the fit compiled once per problem, shape and settings
    (`_restarts_function`, `slt.compile_cache.program_for`).

    On a CPU the program fits one restart and is called once per restart, the calls side by
    side, one thread per core (`slt.threads.side_by_side`); on an accelerator it fits every
    restart at once (`vmap`). A vmapped L-BFGS loop runs until its slowest restart stops and
    selects over every restart's state at each step, on one core: Old Faithful K = 4's 32
    restarts took 2.6-2.8 s vmapped and 0.7-1.1 s a call each on 2 cores (benchmarks/RESULTS.md,
    fifteenth and sixteenth sessions). The two programs round differently, so a restart
    may end at a slightly different point (the best optimum is the same to its tolerance)."""
    one_at_a_time = jax.default_backend() == "cpu"
    shape = starts.shape[1:] if one_at_a_time else starts.shape
    signature = ("fit restarts", shape, starts.dtype, settings)
    program = compile_cache.program_for(
        problem, signature, _restarts_function(problem, len(shape), *settings),
        jax.ShapeDtypeStruct(shape, starts.dtype), problem.data)
    if not one_at_a_time:
        return program

    def restart_by_restart(starts, data):
        done = side_by_side([functools.partial(program, start, data) for start in starts])
        return tuple(np.stack(parts) for parts in zip(*done, strict=True))

    return restart_by_restart


def _restarts_function(problem, rank, prior, adam_steps, learning_rate, lbfgs_steps, grad_tol):
    """(starts, data) -> (final points, log-likelihoods, log priors, gradient norms of the total
    objective), for one starting point (rank 1: (dim,)) or a batch of them (rank 2:
    (restart, dim)), vmapped. The data are an argument, not constants."""
    def evaluate(flat, data):
        params = problem.unravel(flat)
        return jnp.sum(problem.loglik(params, data)), problem.log_prior(params)

    def total_objective(flat, data):
        loglik, log_prior = evaluate(flat, data)
        return -(loglik + log_prior) if prior else -loglik

    def fit_one(x0, data):
        def per_example(flat):
            value = total_objective(flat, data) / problem.n
            return jnp.where(jnp.isfinite(value), value, jnp.inf)

        flat, gradient, _ = _adam_then_lbfgs(per_example, x0, adam_steps, learning_rate,
                                             lbfgs_steps, grad_tol)
        loglik, log_prior = evaluate(flat, data)
        return flat, loglik, log_prior, problem.n * jnp.linalg.norm(gradient)

    return fit_one if rank == 1 else jax.vmap(fit_one, in_axes=(0, None))


def _adam_then_lbfgs(objective, x0, adam_steps, learning_rate, lbfgs_steps, grad_tol):
    """Minimise `objective` from `x0`: Adam to find a basin, then L-BFGS to converge (or to
    stall, `MAPFit`). Returns the point, the objective's gradient there and the number of
    L-BFGS steps taken.

    The program holds as few copies of the objective's value and gradient as the algorithm
    allows (each copy is compiled anew, and they are most of the fit's compile time): Adam's
    scan evaluates them once more at its last point, where L-BFGS starts, and seeds L-BFGS's
    state with them (optax's `value_and_grad_from_state` would hold a further copy for that
    first step); the returned gradient is the one L-BFGS's line search evaluated at the
    point it returns."""
    schedule = optax.cosine_decay_schedule(learning_rate, max(adam_steps, 1), alpha=0.01)
    adam = optax.adam(schedule)

    def adam_step(carry, step):
        x, state, _, _ = carry
        value, grad = jax.value_and_grad(objective)(x)
        updates, state = adam.update(grad, state, x)
        # the extra last evaluation (step adam_steps) only reads the value and gradient
        x = jnp.where(step < adam_steps, optax.apply_updates(x, updates), x)
        return (x, state, value, grad), None

    start = (x0, adam.init(x0), jnp.asarray(jnp.inf, x0.dtype), jnp.zeros_like(x0))
    (x, _, value, grad), _ = jax.lax.scan(adam_step, start, jnp.arange(adam_steps + 1))
    if lbfgs_steps == 0:
        return x, grad, 0

    lbfgs = optax.lbfgs()
    floor = STALL_ULPS * jnp.finfo(x.dtype).eps

    def keep_going(carry):
        _, state, step, stalled = carry
        grad = otu.tree_get(state, "grad")
        return (step == 0) | ((step < lbfgs_steps) & (otu.tree_norm(grad) >= grad_tol)
                              & (stalled < STALL_STEPS))

    def lbfgs_step(carry):
        x, state, step, stalled = carry
        # the value and gradient at x: Adam's last evaluation, then the line search's
        value, grad = otu.tree_get(state, "value"), otu.tree_get(state, "grad")
        updates, state = lbfgs.update(grad, state, x, value=value, grad=grad, value_fn=objective)
        new_value = otu.tree_get(state, "value")
        fell = value - new_value > floor * jnp.maximum(jnp.abs(new_value), 1.0)
        return (optax.apply_updates(x, updates), state, step + 1,
                jnp.where(fell, 0, stalled + 1))

    seeded = otu.tree_set(lbfgs.init(x), value=value, grad=grad)
    x, state, steps, _ = jax.lax.while_loop(keep_going, lbfgs_step, (x, seeded, 0, 0))
    return x, otu.tree_get(state, "grad"), steps
