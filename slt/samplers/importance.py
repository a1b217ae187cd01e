"""log Z by importance sampling from a Gaussian mixture fitted to posterior draws.

Z = ∫ exp(l(w)) p(w) dw = E_q[exp(l(w)) p(w) / q(w)] for any density q that is positive
wherever the posterior is. With M draws w_j ~ q and log weights
log r_j = l(w_j) + log p(w_j) - log q(w_j),

    log Z ≈ log (1/M) sum_j r_j,  standard error ≈ sd(r) / (sqrt(M) mean(r))  (delta method),

unbiased for Z given q, however q was chosen. Here q is fitted by EM
(`slt.samplers.mixture_proposal`) to draws of the posterior (the final particles of
`slt.samplers.tempering.tempered_smc`), with one broad defensive component (the draws'
mean and twice their spread, weight `DEFENSIVE_WEIGHT`) so that q's tails are not lighter
than the posterior's. The estimate no longer depends on the draws having the right weights
between modes, only on q covering every mode: the failure the tempered SMC had on mixtures.

**Label symmetry.** A mixture's posterior has K! copies that differ by the order of the
components, and a q fitted to draws that under-populate one of them misses its mass: measured
on Old Faithful K = 3 (d = 8, 2000 SMC particles), q with 32 components fitted to the draws as
they were gave F 0.068 ± 0.010 nats too high. With `Problem(exchangeable=...)` declared, the
draws are first put in canonical order (components sorted by the first exchangeable site's
first coordinate) and q is fitted to them, then symmetrised over the group G of all K!
orders: draw w ~ q, a uniform sigma in G, return sigma(w), whose density is

    q_G(w) = (1/|G|) sum_sigma q(sigma(w)) |det D sigma(w)|,

sigma acting on the unconstrained parameters as unconstrain ∘ permute ∘ constrain (not
linear in a simplex's stick-breaking coordinates; its log-determinant is taken from the
transforms' log-Jacobians, `Relabelling`). Every
label copy is then covered exactly as well as the canonical one. Measured on Old Faithful
K = 3, keys 0–4: within 0.01 nats of the reference (RESULTS.md).

Diagnostics: the Pareto shape k̂ of the weights' tail (ArviZ's PSIS; Vehtari, Simpson,
Gelman, Yao & Gabry, "Pareto smoothed importance sampling", JMLR 25(72), 2024): above 0.7 the
estimate is not to be trusted; and the effective sample size (sum r)^2 / sum r^2. Neither can
see a mode that no draw visited: that is the independent reference's job (nested sampling).
"""

from __future__ import annotations

import functools
import itertools
import math
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import logsumexp
from numpyro.distributions.transforms import IndependentTransform, StickBreakingTransform

from slt import compile_cache
from slt.problem import Problem, require_problem
from slt.samplers.mixture_proposal import (
    GaussianMixture,
    fit_gaussian_mixture,
    mixture_log_density,
    padded_mixture,
    sample_mixture,
    whitening_factor,
)
from slt.validation import InputError, require_int, require_key

__all__ = [
    "ImportanceRun", "MAX_PERMUTATIONS", "Proposal", "Relabelling", "canonical_points",
    "default_components", "draws_of_q_G", "fit_proposal", "importance_log_evidence",
    "log_jacobian", "proposal_log_weights", "sample_proposal", "symmetrised_log_density",
    "vmapped_program", "with_cover", "with_modes",
]

# Symmetrising over K! orders costs K! evaluations of q per draw (and of a d x d Jacobian where
# the transforms do not give it: `Relabelling`); K = 5 (120 orders) is the largest mixture this
# does.
MAX_PERMUTATIONS = 120
# The most components q gets by default (`default_components`).
MAX_COMPONENTS = 16
# The defensive component's weight and its spread (times the draws' covariance factor).
DEFENSIVE_WEIGHT = 0.05
DEFENSIVE_SCALE = 2.0
# Pareto k-hat above which importance sampling is unreliable (Vehtari et al. 2024, sec. 3).
PARETO_K_LIMIT = 0.7
_BATCH = 1024  # draws per evaluation batch (bounds memory at large n)


def default_components(num_points: int, dim: int) -> int:
    """Components of q for `num_points` draws in d dimensions: num_points / (2 (d + d (d + 1)
    / 2)), between 1 and MAX_COMPONENTS.

    Measured on Old Faithful K = 3 (d = 8; 20 000 draws, fits with two keys each): from 2000
    particles, 8 components gave an ESS of 4–58 % and 16 gave 25–46 %; from 800 particles,
    4 and 8 components were within 0.017 of the reference (Pareto k-hat 0.39–0.66), while 16
    over-fitted (k-hat 0.70–0.77, one estimate 0.10 off). This rule gives 16 and 9.
    """
    numbers_per_component = dim + dim * (dim + 1) // 2
    return int(np.clip(num_points // (2 * numbers_per_component), 1, MAX_COMPONENTS))


class ImportanceRun(NamedTuple):
    """What `importance_log_evidence` measured.

    log_evidence, std_error: log Z and its delta-method standard error.
    pareto_k: the Pareto shape of the weights' tail (> 0.7: unreliable).
    ess: effective sample size of the weights, (sum r)^2 / sum r^2.
    num_samples: M; num_permutations: |G| (1 without exchangeable sites); num_components: of q
      before symmetrisation, the defensive one included.
    run_time: seconds, compilation included.
    """

    log_evidence: float
    std_error: float
    pareto_k: float
    ess: float
    num_samples: int
    num_permutations: int
    num_components: int
    run_time: float


def _label_maps(problem: Problem):
    """(permute, canonical, orders): sigma acting on flat unconstrained parameters (a
    `Relabelling`), the canonical order of one point, and the (|G|, K) array of all orders."""
    sites = problem.exchangeable
    if not sites:
        return None, None, np.zeros((1, 0), np.int32)
    size = problem.constrained_shapes()[sites[0]][0]
    if math.factorial(size) > MAX_PERMUTATIONS:
        raise InputError(
            f"importance sampling symmetrises over all {size}! orders of the exchangeable "
            f"sites; at most {MAX_PERMUTATIONS} are supported (K <= 5)"
        )
    permute = Relabelling(problem, sites, _jacobian_from_transforms(problem, sites))

    def canonical(flat):
        first = problem.constrain(problem.unravel(flat))[sites[0]]
        return permute(flat, jnp.argsort(first.reshape(size, -1)[:, 0]))

    orders = np.array(list(itertools.permutations(range(size))), np.int32)
    return permute, canonical, orders


class Relabelling:
    """sigma(w) = unconstrain(permute(constrain(w))) on flat unconstrained parameters: the
    exchangeable sites' component axis put in `order`, and log |det D sigma(w)|.

    The log-determinant: sigma = T^-1 ∘ P ∘ T, with T the sites' constraining transforms and
    P the permutation of the component axis, so log |det D sigma(w)| = log |det D T(w)| +
    log |det P| - log |det D T(sigma(w))|. Where each exchangeable site's transform acts on
    every component on its own (its event dimensions exclude the component axis: means,
    scales, a component's own simplex) or is the stick-breaking simplex along that axis (the
    weights, whose log-Jacobian NumPyro takes in the first K - 1 coordinates, where P is
    affine with determinant ±1), log |det P| = 0, and the two log-Jacobians are what the
    prior already computes (for these transforms they are equal: a row-wise transform's is a
    sum over the components, stick-breaking's is log prod_k x_k, both symmetric, so sigma's
    determinant is ±1 although sigma is not a coordinate permutation). Otherwise
    (`from_transforms` False) the Jacobian matrix is formed by forward differentiation and
    its determinant taken: d tangents and an LU per point and order, 4.1 times the time of
    the whole symmetrised density the other way (Old Faithful K = 4, 24 orders, 1024 points:
    66 against 16 ms). The two agree to rounding (tests/estimators/test_importance.py)."""

    def __init__(self, problem, sites, from_transforms: bool):
        self.problem, self.sites, self.from_transforms = problem, sites, from_transforms

    def __call__(self, flat, order):
        problem = self.problem
        values = problem.constrain(problem.unravel(flat))
        values = {name: value[order] if name in self.sites else value
                  for name, value in values.items()}
        return problem.ravel(problem.unconstrain(values)).astype(flat.dtype)

    def log_det(self, points, order, moved):
        """log |det D sigma(w)| at each row of (M, dim) `points`, `moved` = sigma(points)."""
        if self.from_transforms:
            def at(flat):
                return log_jacobian(self.problem, self.problem.unravel(flat))

            return jax.vmap(at)(points) - jax.vmap(at)(moved)
        jacobians = jax.vmap(jax.jacfwd(self), in_axes=(0, None))(points, order)
        return jnp.linalg.slogdet(jacobians)[1]


def log_jacobian(problem, params) -> jax.Array:
    """sum over the sites of `params` of log |det d(constrained) / d(unconstrained)|, each
    site's constraining transform `problem.transform(name)` (a Problem or
    `empty_component.ReducedCoordinates`)."""
    total = jnp.zeros(())
    for name, value in params.items():
        transform = problem.transform(name)
        total = total + jnp.sum(transform.log_abs_det_jacobian(value, transform(value)))
    return total


def _jacobian_from_transforms(problem, sites) -> bool:
    """Whether every exchangeable site's transform acts on each component alone or is the
    simplex along the component axis (`Relabelling`), read from the transforms' event
    dimensions (an `IndependentTransform`'s are its base transform's, applied elementwise
    over the rest) and the sites' constrained shapes."""
    shapes = problem.constrained_shapes()
    for name in sites:
        transform = problem.transform(name)
        while isinstance(transform, IndependentTransform):  # elementwise over its batch
            transform = transform.base_transform
        acts_per_component = transform.codomain.event_dim < len(shapes[name])
        simplex_of_components = (isinstance(transform, StickBreakingTransform)
                                 and len(shapes[name]) == 1)
        if not (acts_per_component or simplex_of_components):
            return False
    return True


def vmapped_program(problem, kind: str, function, *arguments):
    """`jax.jit(jax.vmap(function))` compiled for the shapes and dtypes of `arguments` (arrays
    or `jax.ShapeDtypeStruct`s), once per problem (`slt.compile_cache`, as a program that runs
    briefly): `function`, a closure over the problem, is traced once, not at every call."""
    shapes = tuple(jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in arguments)
    signature = (kind, *((s.shape, str(s.dtype)) for s in shapes))
    return compile_cache.program_for(problem, signature, jax.vmap(function), *shapes,
                                     compile="brief", traced_from=("vmap", function))


def canonical_points(problem: Problem, points):
    """(M, dim) flat points, each in canonical label order (`points` as they are without
    exchangeable sites)."""
    _, canonical, _ = _label_maps(problem)
    points = jnp.asarray(np.asarray(points, problem.dtype))  # converted on the host
    if canonical is None:
        return points
    return vmapped_program(problem, "canonical order", canonical, points)(points)


def _fitted_mixture(key, points, *, num_components: int, num_iterations: int):
    """q fitted by EM to `points` (whitened by their covariance factor), with the defensive
    component (traceable: `fit_proposal` compiles it)."""
    mixture = fit_gaussian_mixture(key, points, whitening_factor(points),
                                   num_components=num_components,
                                   num_iterations=num_iterations)
    return _with_defensive(mixture, points)


def _with_defensive(mixture: GaussianMixture, points) -> GaussianMixture:
    """`mixture` with weight 1 - DEFENSIVE_WEIGHT, plus N(mean, (2 L)(2 L)^T) of the points."""
    factor = DEFENSIVE_SCALE * whitening_factor(points)
    eye = jnp.eye(points.shape[1], dtype=points.dtype)
    inverse = jax.scipy.linalg.solve_triangular(factor, eye, lower=True)
    return GaussianMixture(
        log_weights=jnp.append(mixture.log_weights + jnp.log1p(-DEFENSIVE_WEIGHT),
                               jnp.log(DEFENSIVE_WEIGHT)),
        means=jnp.concatenate([mixture.means, points.mean(0)[None]]),
        cholesky=jnp.concatenate([mixture.cholesky, factor[None]]),
        inverse_cholesky=jnp.concatenate([mixture.inverse_cholesky, inverse[None]]),
    )


def symmetrised_log_density(points, mixture, permute, orders):
    """log q_G(w) of each row of `points` (module doc); log q(w) without a group."""
    if permute is None:
        return mixture_log_density(points, mixture)

    def one_order(order):
        moved = jax.vmap(permute, in_axes=(0, None))(points, order)
        return mixture_log_density(moved, mixture) + permute.log_det(points, order, moved)

    values = jax.lax.map(one_order, jnp.asarray(orders))  # (|G|, M)
    return logsumexp(values, axis=0) - jnp.log(orders.shape[0])


def importance_log_evidence(
    problem: Problem,
    key: jax.Array,
    draws,
    *,
    num_samples: int = 20_000,
    num_components: int | None = None,
    num_iterations: int = 100,
) -> ImportanceRun:
    """log Z by importance sampling from a mixture fitted to posterior `draws` (module doc).

    Args:
      problem: model and data with a proper prior; its `exchangeable` sites, if any, make q
        symmetric under relabelling.
      key: PRNG key.
      draws: (..., dim) flat unconstrained posterior draws (e.g. `SMCRun.particles`), at
        least max(2 * num_components, dim + 1) of them.
      num_samples: importance draws M.
      num_components: Gaussian components of q (before symmetrisation; one defensive
        component is added). Default: enough points for each component's d + d (d + 1) / 2
        numbers twice over, at most 16 (`default_components`).
      num_iterations: EM iterations of the fit.

    Returns:
      An `ImportanceRun`.

    Raises:
      InputError: bad arguments, draws of the wrong width or non-finite, too few of them, or
        more than `MAX_PERMUTATIONS` label orders.

    Example:
      >>> from slt.samplers.tempering import Tempering, tempered_smc
      >>> run = tempered_smc(problem, key, Tempering(num_particles=100), progress=False)
      >>> result = importance_log_evidence(problem, jax.random.key(1), run.particles,
      ...                                  num_samples=1000)
      >>> round(result.log_evidence, 2), round(result.std_error, 2)   # exact: -141.55
      (-141.58, 0.02)
    """
    require_problem(problem)
    require_key(key)
    require_int("num_samples", num_samples, minimum=2)
    if num_components is not None:
        require_int("num_components", num_components, minimum=1)
    require_int("num_iterations", num_iterations, minimum=1)
    points = jnp.asarray(draws, problem.dtype)
    if points.ndim < 1 or points.shape[-1] != problem.dim:
        raise InputError(f"draws must have shape (..., dim={problem.dim}), got {points.shape}")
    points = points.reshape(-1, problem.dim)
    minimum = max(2 * (num_components or 1), problem.dim + 1)  # a full-rank covariance
    if points.shape[0] < minimum or not bool(jnp.all(jnp.isfinite(points))):
        raise InputError(
            f"draws must be finite and at least max(2 * num_components, dim + 1) = {minimum} "
            f"points; got {points.shape[0]}"
        )
    if num_components is None:
        num_components = default_components(points.shape[0], problem.dim)
    start = time.perf_counter()
    fit_key, draw_key, order_key = jax.random.split(key, 3)
    proposal = fit_proposal(problem, fit_key, points, num_components, num_iterations)
    proposals = _proposal_draws(problem, proposal, num_samples)(draw_key, order_key,
                                                                proposal.mixture)
    log_weights = proposal_log_weights(problem, proposal, proposals)
    return _summarise(np.asarray(log_weights, np.float64), proposal.orders.shape[0],
                      num_components + 1, time.perf_counter() - start)


class Proposal(NamedTuple):
    """q_G: a Gaussian mixture (the defensive component included) fitted to canonically
    ordered draws, symmetrised over the label orders `orders` by `permute` (module doc);
    `permute` is None without exchangeable sites (then q_G = q).

    `cover`: None, or an `slt.samplers.empty_component.EmptyComponentCover` q_E; then the
    proposal is the mixture (1 - eta) q_G + eta q_E (eta = `cover.share`), drawn stratified:
    round(eta M) of M draws from q_E (`with_cover`)."""

    mixture: GaussianMixture
    permute: Relabelling | None
    orders: np.ndarray
    cover: object = None


# A mode added by `with_modes` gets the weight |G| x its Laplace share of Z, clipped to
# [MODE_WEIGHT_MIN, MODE_WEIGHT_MAX]; optima closer than SAME_MODE (canonical order) are one.
MODE_WEIGHT_MIN, MODE_WEIGHT_MAX = 0.01, 0.2
SAME_MODE = 0.1


def with_modes(problem: Problem, proposal: Proposal, points, log_evidence: float):
    """(`proposal` with Laplace components added at each mode w* of `points` (flat optima,
    best first) that q_G does not cover, the number of modes added): N(w*, H^-1) and
    N(w*, 4 H^-1) (the defensive component's spread), half the mode's weight each; H = -grad^2 of
    log p~ at w*, put in canonical label order first (q is fitted there; `permute`
    symmetrises it). Each gets the weight |G| m / Z clipped to [MODE_WEIGHT_MIN,
    MODE_WEIGHT_MAX], m = p~(w*) (2 pi)^(d/2) |H|^(-1/2) its Laplace mass (q_G gives each of the
    |G| copies 1/|G| of it), the fitted components the rest. A point whose H is not positive
    definite, or that repeats a mode (closer than SAME_MODE), adds nothing. Importance
    sampling stays unbiased whatever the weights: they only spread the draws."""
    orders = _label_maps(problem)[2]
    points = canonical_points(problem, points)

    def log_target(flat):
        return problem.log_joint(problem.unravel(flat))

    hessian = jax.jit(jax.hessian(log_target))
    means, factors, log_weights = [], [], []
    for point in np.asarray(points, np.float64):
        if any(np.linalg.norm(point - other) < SAME_MODE for other in means):
            continue
        precision = -np.asarray(hessian(jnp.asarray(point, problem.dtype)), np.float64)
        precision = (precision + precision.T) / 2
        try:
            np.linalg.cholesky(precision)  # positive definite, or not a mode to add
            factor = np.linalg.cholesky(np.linalg.inv(precision))
        except np.linalg.LinAlgError:
            continue
        log_mass = (float(log_target(jnp.asarray(point, problem.dtype)))
                    + 0.5 * point.size * np.log(2 * np.pi) + np.sum(np.log(np.diag(factor))))
        share = np.exp(min(log_mass - log_evidence + np.log(orders.shape[0]), 0.0))
        means.append(point)
        factors.append(factor)  # L L^T = H^-1
        log_weights.append(np.log(np.clip(share, MODE_WEIGHT_MIN, MODE_WEIGHT_MAX)))
    if not means:
        return proposal, 0
    log_weights = np.asarray(log_weights)
    if np.sum(np.exp(log_weights)) > 0.5:  # the fitted components keep at least half
        log_weights += np.log(0.5) - np.log(np.sum(np.exp(log_weights)))
    # each mode's weight split between H^-1 and (DEFENSIVE_SCALE^2) H^-1: a mode wider than
    # its Laplace approximation in some direction does not give heavy weights
    mixture, dtype = proposal.mixture, proposal.mixture.means.dtype
    cholesky = jnp.asarray(np.concatenate([np.stack(factors),
                                           DEFENSIVE_SCALE * np.stack(factors)]), dtype)
    added = GaussianMixture(
        log_weights=jnp.asarray(np.tile(log_weights + np.log(0.5), 2), dtype),
        means=jnp.asarray(np.tile(np.stack(means), (2, 1)), dtype), cholesky=cholesky,
        inverse_cholesky=jnp.linalg.inv(cholesky))
    rest = jnp.log1p(-jnp.sum(jnp.exp(added.log_weights)))
    merged = GaussianMixture(*(jnp.concatenate([old, new]) for old, new in zip(
        mixture._replace(log_weights=mixture.log_weights + rest), added, strict=True)))
    return proposal._replace(mixture=merged), len(means)


def with_cover(proposal: Proposal, cover) -> Proposal:
    """`proposal` mixed with the empty-component cover `cover` (`Proposal.cover`)."""
    return proposal._replace(cover=cover)


def fit_proposal(problem: Problem, key, points, num_components: int,
                 num_iterations: int = 100) -> Proposal:
    """q_G fitted by EM to (M, dim) flat draws `points` (put in canonical label order first),
    with the defensive component (module doc)."""
    permute, _, orders = _label_maps(problem)
    points = canonical_points(problem, points)
    fit = functools.partial(_fitted_mixture, num_components=num_components,
                            num_iterations=num_iterations)
    # one program per problem, shape and settings, compiled quickly (the same numbers as
    # XLA's defaults give; the EM fit's compile 0.99 -> 0.76 s at K = 4's shapes)
    program = compile_cache.program_for(
        problem, ("proposal fit", points.shape, str(points.dtype), num_components,
                  num_iterations), fit, key, points)
    return Proposal(program(key, points), permute, orders)


def sample_proposal(key, proposal: Proposal, num_samples: int, problem: Problem):
    """(num_samples, dim) draws from q_G of `problem` (or of the coordinates a cover's K - 1
    component proposal lives in): a draw of q in a uniformly chosen label order, in one
    program compiled once per problem, draw count and mixture shape (`slt.compile_cache`;
    the mixture an argument); with a cover (`Proposal.cover`), the last round(eta
    num_samples) rows are draws of q_E instead."""
    if proposal.cover is None:
        return _proposal_draws(problem, proposal, num_samples)(*jax.random.split(key),
                                                                proposal.mixture)
    from slt.samplers.empty_component import sample_cover

    draw_key, order_key, cover_key = jax.random.split(key, 3)
    from_cover = round(proposal.cover.share * num_samples)
    return jnp.concatenate([
        _proposal_draws(problem, proposal, num_samples - from_cover)(draw_key, order_key,
                                                                     proposal.mixture),
        sample_cover(problem, proposal.cover, cover_key, from_cover)])


def _proposal_draws(problem, proposal: Proposal, num_samples: int):
    """The compiled `(draw_key, order_key, mixture) -> draws_of_q_G(...)` of
    `sample_proposal`."""
    mixture = proposal.mixture
    signature = ("proposal draws", num_samples, mixture.means.shape, proposal.orders.shape,
                 str(mixture.means.dtype))

    unfitted = proposal._replace(mixture=None, cover=None)  # the mixture is an argument

    def draw(draw_key, order_key, mixture):
        return draws_of_q_G(draw_key, order_key, unfitted._replace(mixture=mixture), num_samples)

    key = jax.random.key(0)
    return compile_cache.program_for(problem, signature, draw, key, key, mixture,
                                     compile="brief")


def draws_of_q_G(draw_key, order_key, proposal: Proposal, num_samples: int):
    """(num_samples, dim) draws of q_G (the cover aside), traceable: a draw of q
    (`draw_key`), moved to a uniformly chosen label order (`order_key`)."""
    draws = sample_mixture(draw_key, proposal.mixture, num_samples)
    if proposal.permute is None:
        return draws
    chosen = jax.random.randint(order_key, (num_samples,), 0, proposal.orders.shape[0])
    return jax.vmap(proposal.permute)(draws, jnp.asarray(proposal.orders)[chosen])


def proposal_log_weights(problem: Problem, proposal: Proposal, points) -> np.ndarray:
    """log r(w) = l(w) + log p(w) - log q_G(w) at every row of (M, dim) `points` (draws of
    q_G or of the posterior alike), -inf where the target is NaN; in batches of one shape
    (the last padded with copies of the first row), compiled once per problem and dtype with
    the data and the mixtures as arguments (`slt.compile_cache`), the mixtures padded with
    weightless components to `MAX_COMPONENTS` + 1 (`padded_mixture`: the same density), so
    that a refit with fewer components runs the same program."""
    points = np.asarray(points, problem.dtype)
    cover = proposal.cover
    mixture = padded_mixture(proposal.mixture, MAX_COMPONENTS + 1)
    # the cover's K - 1 component mixture is an argument; its other parts shape the program
    smaller = None if cover is None else padded_mixture(cover.smaller.mixture,
                                                        MAX_COMPONENTS + 1)
    signature = ("importance weights", points.dtype, mixture.means.shape,
                 proposal.orders.shape) + (() if cover is None else (
                     "cover", smaller.means.shape, cover.smaller.orders.shape,
                     cover.concentration, cover.share))

    permute, orders = proposal.permute, proposal.orders
    # the cover's mixture is an argument: its values stay out of the program's closure
    structure = None if cover is None else cover._replace(
        smaller=cover.smaller._replace(mixture=None))

    def batch_weights(batch, data, mixture, smaller):
        def log_target(flat):
            params = problem.unravel(flat)
            return jnp.sum(problem.loglik(params, data)) + problem.log_prior(params)

        target = jax.vmap(log_target)(batch)
        log_q = symmetrised_log_density(batch, mixture, permute, orders)
        if structure is not None:
            from slt.samplers.empty_component import cover_log_density

            covering = structure._replace(smaller=structure.smaller._replace(mixture=smaller))
            log_q = jnp.logaddexp(jnp.log1p(-structure.share) + log_q, jnp.log(structure.share)
                                  + cover_log_density(problem, covering, batch))
        value = target - log_q
        return jnp.where(jnp.isnan(value), -jnp.inf, value)

    program = compile_cache.program_for(
        problem, signature, batch_weights, jax.ShapeDtypeStruct((_BATCH, problem.dim),
                                                                points.dtype),
        problem.data, mixture, smaller)
    points = np.asarray(points)  # batches cut and padded on the host, not op by op in JAX
    size = points.shape[0]
    padded = np.concatenate([points, np.broadcast_to(points[:1], (-size % _BATCH,
                                                                  points.shape[1]))])
    return np.concatenate([np.asarray(program(padded[i:i + _BATCH], problem.data, mixture,
                                              smaller))
                           for i in range(0, size, _BATCH)])[:size]


def _summarise(log_weights, num_permutations, num_components, seconds) -> ImportanceRun:
    """log Z, its standard error, Pareto k-hat and ESS from the log weights."""
    import arviz as az

    finite = np.isfinite(log_weights)
    if not finite.any():
        raise RuntimeError("every importance weight is zero: the target is -inf at every draw")
    size = log_weights.size
    ratio = np.exp(log_weights - log_weights[finite].max())
    log_evidence = float(np.log(ratio.mean()) + log_weights[finite].max())
    std_error = float(ratio.std() / (np.sqrt(size) * ratio.mean()))
    floor = log_weights[finite].min() - 1e3  # PSIS needs finite values; a zero weight stays ~0
    _, pareto_k = az.psislw(np.where(finite, log_weights, floor).copy())
    return ImportanceRun(
        log_evidence=log_evidence, std_error=std_error, pareto_k=float(pareto_k),
        ess=float(ratio.sum() ** 2 / np.sum(ratio**2)), num_samples=size,
        num_permutations=int(num_permutations), num_components=int(num_components),
        run_time=seconds,
    )
