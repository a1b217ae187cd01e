"""An exact proposal for the region of a mixture posterior where one component is empty.

A mixture of K components (a simplex site of weights and per-component sites, all declared
`exchangeable`) fitted to data that K - 1 components explain has posterior mass where one
component is nearly empty: its weight eps near 0, its other parameters following their prior
(the likelihood no longer sees them). There the posterior is, per label j,

    p(theta | y) ~ Beta-like(eps; 1, n + K - 1) x [K - 1 component posterior of the others]
                   x prior(component j),

because with component j contributing nothing the likelihood is (1 - eps)^n times the K - 1
component likelihood at the other components' renormalised weights w' = w_{-j} / (1 - eps),
which by the Dirichlet's aggregation property are Dirichlet(alpha 1_{K-1}) independent of eps.
So the region holds Z_{K-1} K (K - 1) / (n + K - 1) of Z_K (for alpha = 1): on Old Faithful
K = 4 (n = 272) 2.9 % of Z_4 has a component with weight below 0.005 — mass that a Gaussian
mixture fitted to NUTS draws of K = 4 under-covers (0.01–3.6 % in five runs: F up to 0.06 nats
too high; benchmarks/RESULTS.md, "K = 4's high F on the fast path").

The cover q_E draws that region exactly:

1. theta' ~ q_{K-1}: a proposal (`importance.Proposal`, symmetrised over the K - 1 labels)
   fitted to draws of the K - 1 component posterior, in the K - 1 component coordinates
   (`ReducedCoordinates`: the same sites and transforms with one component fewer);
2. eps ~ Beta(1, b), b = (n + K - 1) / 4 (four times wider than the region's own
   Beta(1, n + K - 1), so that it reaches the weights at which the component starts to explain
   data);
3. the empty component's other parameters from their prior (row j of each site's prior,
   evaluated at the problem's zero point: a fixed density, so sampler and density agree
   whatever the model's hierarchy);
4. the component inserted at a uniform label j, the other weights (1 - eps) w'.

Its density in the constrained coordinates theta = (free weights, other sites) is

    q_E(theta) = (1/K) sum_j q_{K-1}(theta'_j) Beta(w_j; 1, b) prior_j(theta_j) / (1 - w_j)^(K-2),

(1 - w_j)^(K - 2) the Jacobian of (w', eps) -> w on the simplex, and in slt's unconstrained
coordinates u it gains log |det d theta / d u| (the transforms' own log-Jacobians; the
K - 1 proposal's density loses its own). Importance sampling uses the mixture
(1 - eta) q_G + eta q_E (`MIXED_SHARE` = 0.2), draws stratified (a share eta from q_E): unbiased
for Z whether or not q_G covered the region. Measured on the defaults' K = 4 draws, keys 0–4:
F - reference = -0.005, -0.020, -0.042, -0.003, +0.007 with q_E (q_G alone: +0.012, +0.001,
-0.035, +0.050, +0.062), Pareto k-hat <= 0.67 on every key.

Where q_{K-1}'s draws come from: `slt.compare` passes the previous model's own posterior
draws when it is the same mixture with one component fewer (`reduced_draws_of`); otherwise
they are the K component draws with their emptiest component removed and the weights
renormalised (`reduced_draws_from`), which also removes the excess but with k-hat nearer 0.7.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from jax.flatten_util import ravel_pytree
from jax.scipy.special import logsumexp
from numpyro.distributions import constraints

from slt import compile_cache
from slt.fingerprint import digest
from slt.problem import Problem
from slt.samplers.importance import (
    default_components,
    draws_of_q_G,
    fit_proposal,
    log_jacobian,
    symmetrised_log_density,
    vmapped_program,
)

__all__ = ["ComponentStructure", "EmptyComponentCover", "MIXED_SHARE", "ReducedCoordinates",
           "component_structure", "cover_log_density", "fit_cover", "fitted_cover",
           "reduced_draws_from", "reduced_draws_of", "sample_cover"]

# eta: the share of q_E in the importance mixture (measured at 0.2, module doc).
MIXED_SHARE = 0.2
# b = (n + K - 1) / WEIGHT_WIDENING: the empty weight's Beta(1, b) (module doc).
WEIGHT_WIDENING = 4.0


class ReducedCoordinates:
    """The unconstrained coordinates of `problem`'s model with one component fewer: the same
    sites and constraining transforms, the exchangeable sites' leading axis K - 1. Offers what
    `importance.fit_proposal` reads of a problem (`dim`, `dtype`, `exchangeable`, `ravel`,
    `unravel`, `constrain`, `unconstrain`, `constrained_shapes`, `transform`), and a
    `fingerprint` as a Problem's (`slt.fingerprint`)."""

    def __init__(self, problem: Problem, weights: str, size: int):
        self.fingerprint = digest(("reduced coordinates", problem, weights, size))
        self.exchangeable = problem.exchangeable
        self.dtype = problem.dtype
        self._transforms = {name: problem.transform(name) for name in problem.site_names}
        unravels = []

        def reduced_flat(flat):  # traced on shapes only: nothing runs or compiles
            template = {}
            for name, value in problem.constrain(problem.unravel(flat)).items():
                if name in self.exchangeable:
                    value = value[:size - 1]
                    if name == weights:
                        value = value / jnp.sum(value)
                template[name] = self._transforms[name].inv(value)
            reduced, unravel = ravel_pytree(template)
            unravels.append(unravel)  # static: shapes and dtypes, no traced values
            return reduced

        shape = jax.eval_shape(reduced_flat, jax.ShapeDtypeStruct((problem.dim,), self.dtype))
        self._unravel = unravels[0]
        self.dim = int(shape.shape[0])

    # {site: shape on the support}, traced on shapes: the same reading as a Problem's
    constrained_shapes = Problem.constrained_shapes

    def ravel(self, params):
        return ravel_pytree(params)[0]

    def unravel(self, flat):
        return self._unravel(flat)

    def constrain(self, params):
        return {name: self._transforms[name](value) for name, value in params.items()}

    def unconstrain(self, values):
        return {name: self._transforms[name].inv(jnp.asarray(value, self.dtype))
                for name, value in values.items()}

    def transform(self, name):
        """The constraining transform of site `name` (as `Problem.transform`)."""
        return self._transforms[name]

    def log_jacobian(self, params):
        """log |det d theta / d u| of the constraining transforms at `params`."""
        return log_jacobian(self, params)


class ComponentStructure(NamedTuple):
    """What q_E needs to know of a mixture problem (`component_structure`): its K, the simplex
    site of the weights, the other exchangeable sites, and the K - 1 component coordinates."""

    size: int
    weights: str
    sites: tuple[str, ...]
    reduced: ReducedCoordinates


def component_structure(problem: Problem) -> ComponentStructure | None:
    """The structure q_E needs, or None where `problem` is not a mixture it applies to: no
    NumPyro model, no exchangeable sites, not exactly one exchangeable simplex site (the
    weights), or an exchangeable site whose prior does not factorise over the components
    (its batch shape does not start with the K axis). Read once per problem and kept with it
    (`slt.compile_cache`: the structure holds no reference to the problem), so that the
    reduced coordinates' programs, keyed by them, compile once per problem."""
    if problem.model is None or not problem.exchangeable:
        return None
    return compile_cache.compiled_for(problem, ("component structure",),
                                      lambda: _read_structure(problem))[0]


def _read_structure(problem: Problem) -> ComponentStructure | None:
    facts = {}

    def read(flat):
        for name, fn in problem.prior_distributions(problem.unravel(flat)).items():
            if name in problem.exchangeable:
                facts[name] = (fn.support is constraints.simplex, _factor(fn).batch_shape)
        return flat

    jax.eval_shape(read, jax.ShapeDtypeStruct((problem.dim,), problem.dtype))
    simplex = [name for name, (is_simplex, _) in facts.items() if is_simplex]
    if len(simplex) != 1:
        return None
    weights = simplex[0]
    size = problem.constrained_shapes()[weights][0]
    sites = tuple(name for name in problem.exchangeable if name != weights)
    if size < 2 or any(facts[name][1][:1] != (size,) for name in sites):
        return None
    return ComponentStructure(size, weights, sites, ReducedCoordinates(problem, weights, size))


class EmptyComponentCover(NamedTuple):
    """q_E (module doc): `smaller`, the K - 1 component proposal (`importance.Proposal` in
    `structure.reduced` coordinates), the empty weight's Beta(1, `concentration`), and its
    share `share` of the importance mixture."""

    structure: ComponentStructure
    smaller: Any
    concentration: float
    share: float


def fit_cover(problem: Problem, structure: ComponentStructure, key, reduced_points,
              num_components: int, share: float = MIXED_SHARE,
              concentration: float | None = None) -> EmptyComponentCover:
    """q_E with its K - 1 component proposal fitted to (m, reduced.dim) flat `reduced_points`
    (`reduced_draws_from`, `reduced_draws_of`); the empty weight's Beta(1, `concentration`),
    by default (n + K - 1) / WEIGHT_WIDENING."""
    points = jnp.asarray(reduced_points, problem.dtype)
    smaller = fit_proposal(structure.reduced, key, points, num_components)
    if concentration is None:
        concentration = (problem.n + structure.size - 1) / WEIGHT_WIDENING
    return EmptyComponentCover(structure, smaller, float(concentration), float(share))


def fitted_cover(problem: Problem, structure: ComponentStructure, key, reduced_points,
                 share: float = MIXED_SHARE) -> EmptyComponentCover | None:
    """`fit_cover` with `importance.default_components` for its K - 1 component proposal, or
    None with fewer than reduced.dim + 2 points (too few for a covariance)."""
    dim = structure.reduced.dim
    count = reduced_points.shape[0]
    if count < dim + 2:
        return None
    return fit_cover(problem, structure, key, reduced_points, default_components(count, dim),
                     share)


def reduced_draws_from(problem: Problem, structure: ComponentStructure, flat) -> jax.Array:
    """(m, reduced.dim): each of the (m, dim) flat draws of `problem` with its emptiest
    component (smallest weight) removed and the weights renormalised."""

    def reduce(u):
        values = problem.constrain(problem.unravel(u))
        empty = jnp.argmin(values[structure.weights])
        return _without_component(structure, values, empty)

    flat = np.asarray(flat, problem.dtype)
    return vmapped_program(problem, "emptiest component removed", reduce, flat)(flat)


def reduced_draws_of(problem: Problem, structure: ComponentStructure, smaller: Problem,
                     flat) -> jax.Array | None:
    """(m, reduced.dim): flat draws of `smaller`, the same mixture with one component fewer,
    in `structure.reduced` coordinates; None when `smaller` is not that (other sites, or
    shapes that are not `problem`'s with K - 1 components)."""
    if smaller.model is None or set(smaller.site_names) != set(problem.site_names):
        return None
    reduced = structure.reduced
    if smaller.constrained_shapes() != reduced.constrained_shapes():
        return None

    def convert(u):
        return reduced.ravel(reduced.unconstrain(smaller.constrain(smaller.unravel(u))))

    flat = np.asarray(flat, smaller.dtype)
    program = compile_cache.program_for(
        problem, ("reduced coordinates", flat.shape, flat.dtype), jax.vmap(convert), flat,
        compile="brief", keep=False, traced_from=("vmap", convert))
    return program(flat).astype(problem.dtype)


def sample_cover(problem: Problem, cover: EmptyComponentCover, key, num_samples: int):
    """(num_samples, dim) flat draws of q_E (module doc, steps 1–4), in one program compiled
    once per problem, draw count and cover shape (`slt.compile_cache`; the K - 1 component
    mixture an argument)."""
    structure = cover.structure
    signature = ("empty-component draws", num_samples, cover.smaller.mixture.means.shape,
                 cover.smaller.orders.shape, cover.concentration, problem.dtype)

    def assemble(u_reduced, eps, label, prior_key):
        values = structure.reduced.constrain(structure.reduced.unravel(u_reduced))
        priors = _empty_priors(problem, structure)
        keys = jax.random.split(prior_key, len(structure.sites))
        rows = {name: priors[name].sample(site_key)[label]
                for name, site_key in zip(structure.sites, keys, strict=True)}
        rows[structure.weights] = eps
        rest = dict(values, **{structure.weights: values[structure.weights] * (1 - eps)})
        full = {name: _inserted(rest[name], rows[name], label) if name in rows else value
                for name, value in rest.items()}
        return problem.ravel(problem.unconstrain(full)).astype(problem.dtype)

    # the mixture is an argument: its values stay out of the program's closure
    unfitted, concentration = cover.smaller._replace(mixture=None), cover.concentration

    def draw(key, mixture):
        smaller_key, eps_key, prior_key, label_key = jax.random.split(key, 4)
        reduced_draws = draws_of_q_G(*jax.random.split(smaller_key),
                                     unfitted._replace(mixture=mixture), num_samples)
        eps = _beta_one(eps_key, concentration, num_samples, problem.dtype)
        labels = jax.random.randint(label_key, (num_samples,), 0, structure.size)
        return jax.vmap(assemble)(reduced_draws, eps, labels,
                                  jax.random.split(prior_key, num_samples))

    program = compile_cache.program_for(problem, signature, draw, key, cover.smaller.mixture,
                                        compile="brief")
    return program(key, cover.smaller.mixture)


def _beta_one(key, concentration: float, num: int, dtype) -> jax.Array:
    """`num` draws of Beta(1, b) by its inverse CDF: F(x) = 1 - (1 - x)^b, so
    x = 1 - (1 - u)^(1/b) = -expm1(log1p(-u) / b) for u ~ U(0, 1), taken at the midpoints
    (2k + 1) / 2^24 of float32's uniform grid (never 0 or 1: x is in (0, 1)). Exact, and
    compiled in a ninth of the time of `jax.random.beta`'s rejection sampler under vmap."""
    u = jax.random.uniform(key, (num,), jnp.float32) + 2.0**-24
    return -jnp.expm1(jnp.log1p(-u.astype(dtype)) / concentration)


def cover_log_density(problem: Problem, cover: EmptyComponentCover, points):
    """log q_E at each row of (M, dim) flat `points` (module doc); traceable (the caller
    compiles it: `importance.proposal_log_weights`)."""
    structure, smaller = cover.structure, cover.smaller
    reduced = structure.reduced
    size = structure.size
    priors = _empty_priors(problem, structure)

    def per_label(u):
        params = problem.unravel(u)
        values = problem.constrain(params)
        rows = sum(jnp.sum(jnp.reshape(_elementwise_log_prob(priors[name], values[name]),
                                       (size, -1)), axis=1)
                   for name in structure.sites)  # (K,) log prior of each component's row
        eps = values[structure.weights]
        reduced_points = jnp.stack([_without_component(structure, values, label)
                                    for label in range(size)])
        terms = (jax.scipy.stats.beta.logpdf(eps, 1.0, cover.concentration) + rows
                 - (size - 2) * jnp.log1p(-eps)
                 - jax.vmap(lambda r: reduced.log_jacobian(reduced.unravel(r)))(reduced_points))
        return (terms, reduced_points,
                log_jacobian(problem, params))

    terms, reduced_points, point_log_jacobians = jax.vmap(per_label)(points)
    smaller_density = jax.vmap(
        lambda rows: symmetrised_log_density(rows, smaller.mixture, smaller.permute,
                                             smaller.orders),
        in_axes=1, out_axes=1)(reduced_points)  # (M, K)
    return logsumexp(terms + smaller_density, axis=1) - jnp.log(size) + point_log_jacobians


def _without_component(structure: ComponentStructure, values, label):
    """Flat K - 1 component coordinates of constrained `values` without component `label`
    (static or traced), the remaining weights renormalised."""
    size = structure.size
    keep = jnp.arange(size - 1)
    keep = keep + (keep >= label)
    reduced = {}
    for name, value in values.items():
        if name in structure.reduced.exchangeable:
            value = value[keep]
            if name == structure.weights:
                value = value / jnp.sum(value)
        reduced[name] = value
    return structure.reduced.ravel(structure.reduced.unconstrain(reduced))


def _inserted(rows, row, label):
    """(K, ...) from (K - 1, ...) `rows` with `row` inserted at index `label` (traced)."""
    index = jnp.arange(rows.shape[0] + 1)
    source = jnp.clip(index - (index > label), 0, rows.shape[0] - 1)
    at_label = (index == label).reshape((-1,) + (1,) * (rows.ndim - 1))
    return jnp.where(at_label, row, rows[source])


def _empty_priors(problem: Problem, structure: ComponentStructure) -> dict:
    """{site: its prior with the component axis as a batch axis} at the problem's zero point."""
    distributions = problem.prior_distributions(
        problem.unravel(jnp.zeros(problem.dim, problem.dtype)))
    return {name: _factor(distributions[name]) for name in structure.sites}


def _factor(fn):
    """`fn` without its `Independent` wrappers: a distribution with batch axes in their place."""
    while isinstance(fn, dist.Independent):
        fn = fn.base_dist
    return fn


def _elementwise_log_prob(fn, value):
    """log density of each batch element of `fn` at `value`, shaped like the batch."""
    return jnp.broadcast_to(fn.log_prob(value), fn.batch_shape)


