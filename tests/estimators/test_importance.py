"""log Z by importance sampling: exact on the conjugate regression; the label-symmetrised
proposal counts every label copy of a mixture's posterior."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt import models
from slt.samplers.importance import (
    Relabelling,
    _jacobian_from_transforms,
    _label_maps,
    default_components,
    importance_log_evidence,
)
from slt.validation import InputError

from .evidence_cases import conjugate_regression


def test_conjugate_regression_within_four_se_of_the_exact_log_evidence():
    """Draws from the exact Gaussian posterior N(m, S), S^-1 = a I + X^T X / s^2."""
    case = conjugate_regression()
    problem = case.problem
    x, y = np.asarray(problem.data["x"], np.float64), np.asarray(problem.data["y"], np.float64)
    precision = 2.0 * np.eye(3) + x.T @ x / 0.5**2
    covariance = np.linalg.inv(precision)
    mean = covariance @ x.T @ y / 0.5**2
    draws = np.random.default_rng(0).multivariate_normal(mean, covariance, 2000)
    run = importance_log_evidence(problem, jax.random.key(0), draws, num_samples=5000)
    assert abs(run.log_evidence - case.log_evidence) < 4 * run.std_error
    assert run.std_error < 0.01 and run.pareto_k < 0.7 and run.ess > 0.5 * run.num_samples
    assert run.num_permutations == 1


@pytest.fixture(scope="module")
def separated_mixture():
    """gaussian_mixture(2) on two well-separated clusters (n = 80): the posterior has two
    label copies that do not overlap; Laplace draws around the MAP cover only one."""
    spec = models.gaussian_mixture(2)
    truth = {"weights": jnp.array([0.4, 0.6]), "means": jnp.array([[-3.0], [3.0]]),
             "scales": jnp.ones((2, 1))}
    data = spec.simulate(jax.random.key(0), truth, 80)
    symmetric, plain = spec.problem(data), spec.problem(data, exchangeable=())

    def log_joint(flat):
        return symmetric.log_joint(symmetric.unravel(flat))

    gradient, hessian = jax.jit(jax.grad(log_joint)), jax.jit(jax.hessian(log_joint))
    center = symmetric.ravel(symmetric.unconstrain(truth))
    for _ in range(20):  # Newton's method from the truth to the nearby MAP
        center = center - jnp.linalg.solve(hessian(center), gradient(center))
    assert float(jnp.linalg.norm(gradient(center))) < 1e-6
    covariance = np.linalg.inv(-np.asarray(hessian(center), np.float64))
    draws = np.random.default_rng(1).multivariate_normal(np.asarray(center), covariance, 2000)
    return symmetric, plain, draws


def test_the_symmetrised_proposal_counts_both_label_copies(separated_mixture):
    """With the label symmetry, Z is twice what a proposal over one copy finds: log 2 apart
    (a wrong Jacobian of the relabelling, or a missing copy, would show here). Draws from the
    other label copy (components swapped) are put in canonical order first: the same
    estimate."""
    symmetric, plain, draws = separated_mixture
    assert symmetric.exchangeable == ("means", "scales", "weights") and plain.exchangeable == ()
    both = importance_log_evidence(symmetric, jax.random.key(2), draws)
    one = importance_log_evidence(plain, jax.random.key(3), draws)
    assert both.num_permutations == 2 and one.num_permutations == 1
    gap = both.log_evidence - one.log_evidence - np.log(2.0)
    assert abs(gap) < 4 * np.hypot(both.std_error, one.std_error)
    assert max(both.std_error, one.std_error) < 0.03

    def swap(flat):
        values = symmetric.constrain(symmetric.unravel(flat))
        return symmetric.ravel(symmetric.unconstrain({k: v[::-1] for k, v in values.items()}))

    swapped = jax.vmap(swap)(jnp.asarray(draws))
    relabelled = importance_log_evidence(symmetric, jax.random.key(2), swapped)
    assert abs(relabelled.log_evidence - both.log_evidence) < 1e-6


def _per_component_simplex_mixture(num_components=3, categories=3):
    """A Gaussian mixture whose components' means are read from each component's own simplex
    (K, m): weights and simplices both exchangeable."""
    import numpyro
    import numpyro.distributions as dist

    from slt.problem import Problem

    def model(y=None):
        weights = numpyro.sample("weights", dist.Dirichlet(jnp.ones(num_components)))
        probs = numpyro.sample("probs", dist.Dirichlet(jnp.ones((num_components, categories)))
                               .to_event(1))
        components = dist.Normal(3.0 * (probs[:, 0] - probs[:, 1]), 1.0)
        with numpyro.plate("data", y.shape[0]):
            numpyro.sample("y", dist.MixtureSameFamily(dist.Categorical(weights), components),
                           obs=y)

    y = jax.random.normal(jax.random.key(0), (40,))
    return Problem(model, {"y": y}, exchangeable=("weights", "probs"))


@pytest.mark.parametrize("case", ["gaussian K=4 D=2", "categorical K=3"])
def test_the_relabelling_jacobian_from_the_transforms_is_the_jacobian_matrix(case):
    """log |det D sigma| as the difference of the transforms' log-Jacobians (the weights'
    stick-breaking along the component axis, per-component means, scales and simplices)
    equals the log-determinant of the Jacobian matrix formed by differentiation, at random
    points and every label order (both are 0 here up to rounding: stick-breaking's Jacobian
    determinant is prod_k x_k, symmetric in the components; the matrix is not a
    permutation)."""
    problem = (models.gaussian_mixture(4, 2).problem(
        {"y": jax.random.normal(jax.random.key(1), (30, 2))})
        if case.startswith("gaussian") else _per_component_simplex_mixture())
    permute, _, orders = _label_maps(problem)
    assert permute.from_transforms
    by_matrix = Relabelling(problem, problem.exchangeable, from_transforms=False)
    points = jax.random.normal(jax.random.key(2), (16, problem.dim), problem.dtype)
    for order in jnp.asarray(orders):
        moved = jax.vmap(permute, in_axes=(0, None))(points, order)
        fast = permute.log_det(points, order, moved)
        np.testing.assert_allclose(fast, by_matrix.log_det(points, order, moved), atol=2e-4)


def test_a_transform_coupling_the_components_takes_the_jacobian_matrix():
    """An exchangeable site whose transform mixes the component axis (other than the
    weights' simplex) is not handled by the log-Jacobian difference."""
    from numpyro.distributions.transforms import (
        IndependentTransform,
        L1BallTransform,
        StickBreakingTransform,
    )

    class Sites:
        def __init__(self, transform, shape):
            self._transform, self._shape = transform, shape

        def constrained_shapes(self):
            return {"v": self._shape}

        def transform(self, name):
            return self._transform

    assert not _jacobian_from_transforms(Sites(L1BallTransform(), (3,)), ("v",))
    assert _jacobian_from_transforms(Sites(IndependentTransform(L1BallTransform(), 1),
                                           (3, 2)), ("v",))  # each component's own ball
    assert _jacobian_from_transforms(Sites(L1BallTransform(), (3, 2)), ("v",))
    assert _jacobian_from_transforms(Sites(StickBreakingTransform(), (3,)), ("v",))


def test_bad_input(separated_mixture):
    symmetric, _, draws = separated_mixture
    with pytest.raises(InputError, match="dim=5"):
        importance_log_evidence(symmetric, jax.random.key(0), draws[:, :4])
    with pytest.raises(InputError, match="at least"):
        importance_log_evidence(symmetric, jax.random.key(0), draws[:5])  # d = 5
    with pytest.raises(InputError, match="at least"):
        importance_log_evidence(symmetric, jax.random.key(0), draws[:20], num_components=16)
    assert default_components(2000, 8) == 16 and default_components(800, 8) == 9
    assert default_components(10, 5) == 1
    with pytest.raises(InputError, match="finite"):
        importance_log_evidence(symmetric, jax.random.key(0), np.full_like(draws, np.nan))
    with pytest.raises(InputError, match="num_samples"):
        importance_log_evidence(symmetric, jax.random.key(0), draws, num_samples=0)
    with pytest.raises(InputError, match="at most 120"):
        importance_log_evidence(models.gaussian_mixture(6).problem({"y": jnp.arange(20.0)}),
                                jax.random.key(0), np.zeros((40, 17)))
