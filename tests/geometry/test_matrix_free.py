"""Matrix-free Fisher: products equal the dense matrix; Lanczos rank and extremes equal dense."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from slt import models
from slt.geometry import FisherRequest, fisher_information
from slt.geometry.matrix_free import (
    fisher_spectrum,
    fisher_vector_product,
    lanczos,
    ritz_pairs,
)


def test_fisher_vector_product_is_the_dense_product():
    spec = models.two_layer_network(3, 4, 2, activation="tanh", noise_scale=None)
    rng = np.random.default_rng(0)
    values = {"V": rng.normal(size=(4, 3)), "b": rng.normal(size=4),
              "U": rng.normal(size=(2, 4)), "c": rng.normal(size=2), "noise_scale": 0.7}
    x = rng.normal(size=(20, 3))
    dense = fisher_information(spec, values, request=FisherRequest(x=x)).matrix
    product = fisher_vector_product(spec, values, request=FisherRequest(x=x))
    for _ in range(3):
        v = rng.normal(size=spec.dim)
        np.testing.assert_allclose(product(v), dense @ v, atol=1e-12 * np.abs(dense).max())


def test_lanczos_finds_repeated_eigenvalues_by_restarting():
    """A = diag(3, 3, 3, 1, 1, 0 x 15): one Krylov space sees each eigenvalue once; restarts
    find the copies, and the rank count is exact."""
    diagonal = jnp.array([3.0, 3.0, 3.0, 1.0, 1.0] + [0.0] * 15)
    with jax.enable_x64(True):
        state = lanczos(lambda v: diagonal * v, jax.random.key(0), 20, 12)
    ritz = ritz_pairs(state)[0][::-1]
    np.testing.assert_allclose(ritz[:5], [3, 3, 3, 1, 1], atol=1e-12)
    assert np.all(np.abs(ritz[5:]) < 1e-12) and bool(state.exhausted)


@pytest.fixture(scope="module")
def wide_linear_network():
    """Linear 10-100-10 without biases: d = 2000, rank r (n + m - r) = 100 (TRUTH.md section 4)."""
    spec = models.two_layer_network(10, 100, 10, activation="identity", bias=False)
    rng = np.random.default_rng(1)
    values = {"V": rng.normal(size=(100, 10)), "U": rng.normal(size=(10, 100))}
    x = rng.normal(size=(32, 10))
    return spec, values, x, fisher_information(spec, values, request=FisherRequest(x=x))


def test_matrix_free_rank_and_extreme_eigenvalues_equal_dense_at_d_2000(wide_linear_network):
    spec, values, x, dense = wide_linear_network
    assert spec.dim == 2000 and dense.rank == 100
    spectrum = fisher_spectrum(spec, values, key=jax.random.key(2), request=FisherRequest(x=x),
                               num_steps=120)
    assert spectrum.rank == dense.rank and spectrum.rank_is_exact
    np.testing.assert_allclose(spectrum.top(3), dense.eigenvalues[::-1][:3], rtol=1e-9)
    smallest_nonzero = dense.eigenvalues[dense.nullity]
    np.testing.assert_allclose(spectrum.smallest_nonzero, smallest_nonzero, rtol=1e-8)
    assert "rank=100," in repr(spectrum)


def test_few_lanczos_steps_give_converged_top_and_a_rank_lower_bound(wide_linear_network):
    spec, values, x, dense = wide_linear_network
    spectrum = fisher_spectrum(spec, values, key=jax.random.key(3), request=FisherRequest(x=x),
                               num_steps=40)
    # Cauchy interlacing: the Ritz values above the threshold are at most the rank
    assert 30 <= spectrum.rank <= 40 and not spectrum.rank_is_exact
    assert "(lower bound)" in repr(spectrum)
    np.testing.assert_allclose(spectrum.top(2), dense.eigenvalues[::-1][:2], rtol=1e-8)


def test_matrix_free_rejects_what_it_cannot_do():
    mixture = models.fixed_component_mixture()
    with pytest.raises(ValueError, match="Gaussian-noise and exponential-family"):
        fisher_vector_product(mixture, {"pi": 0.5, "mu": 1.0, "sigma": 1.0})
    spec = models.linear_regression(2)
    with pytest.raises(ValueError, match="num_steps"):
        fisher_spectrum(spec, {"w": [1.0, 2.0]}, key=jax.random.key(0),
                        request=FisherRequest(x=np.ones((3, 2))), num_steps=0)
    with pytest.raises(ValueError, match="PRNG key"):
        fisher_spectrum(spec, {"w": [1.0, 2.0]}, key=None,
                        request=FisherRequest(x=np.ones((3, 2))))
    with pytest.raises(ValueError, match="request.kind must be 'exact'"):
        fisher_spectrum(spec, {"w": [1.0, 2.0]}, key=jax.random.key(0),
                        request=FisherRequest(kind="empirical"))
