"""Matrix-free Fisher numerics at d = 2103 against the dense matrix: products, Lanczos rank and
extremes, exact and Hutchinson traces, SLQ log pseudo-determinant and rank; compiled once."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from benchmarks import fisher_matrix_free
from slt import Problem, models
from slt.geometry import FisherRequest, fisher_information, fisher_summary
from slt.geometry.kernels import fisher_function
from slt.geometry.matrix_free import fisher_spectrum, fisher_vector_product
from slt.validation import InputError


@pytest.fixture(scope="module")
def network():
    """tanh 10-150-3 at a draw from its N(0, 1) prior, on 200 inputs x ~ N(0, I)
    (`benchmarks.fisher_matrix_free.network`), with the dense Fisher M (the kernel of
    `fisher_information`) and the nonzero eigenvalues of I = A^T A from the Gram matrix A A^T
    (A = W^(1/2) J; that both describe one matrix is checked by the trace)."""
    spec, values, x, setup, eigenvalues = fisher_matrix_free.network()
    matrix = np.asarray(jax.jit(fisher_function("exact", setup.observation, setup.coordinates))(
        jnp.asarray(setup.theta), setup.arrays)[0])
    return spec, values, x, matrix, eigenvalues


def test_fisher_vector_product_equals_the_dense_product(network):
    spec, values, x, matrix, eigenvalues = network
    assert spec.dim == 2103
    product = fisher_vector_product(spec, values, request=FisherRequest(x=x))
    rng = np.random.default_rng(0)
    for _ in range(2):
        v = rng.normal(size=spec.dim)
        exact = matrix @ v
        assert np.linalg.norm(product(v) - exact) < 1e-10 * np.linalg.norm(exact)
    # the Gram reference describes the same matrix
    np.testing.assert_allclose(eigenvalues.sum(), np.trace(matrix), rtol=1e-12)


def test_lanczos_top_eigenvalues_equal_dense(network):
    spec, values, x, _, eigenvalues = network
    spectrum = fisher_spectrum(spec, values, key=jax.random.key(1), request=FisherRequest(x=x),
                               num_steps=60)
    np.testing.assert_allclose(spectrum.top(3), eigenvalues[::-1][:3], rtol=1e-10)
    assert spectrum.rank <= 60 and not spectrum.rank_is_exact  # interlacing: a lower bound


@pytest.mark.slow
def test_lanczos_rank_and_extremes_equal_dense(network):
    """The Krylov space of I is exhausted after 601 steps in exact arithmetic (600 nonzero
    eigenvalues and the null space); rounding delays the breakdown by a few steps."""
    spec, values, x, _, eigenvalues = network
    assert eigenvalues[0] > 1e-7 * eigenvalues[-1]  # rank 600 at any tolerance below 1e-7
    spectrum = fisher_spectrum(spec, values, key=jax.random.key(1), request=FisherRequest(x=x),
                               num_steps=640)
    assert spectrum.rank == 600 and spectrum.rank_is_exact
    np.testing.assert_allclose(spectrum.top(3), eigenvalues[::-1][:3], rtol=1e-10)
    np.testing.assert_allclose(spectrum.smallest_nonzero, eigenvalues[0], rtol=1e-6)


def test_slq_log_pdet_rank_and_traces_match_dense(network):
    spec, values, x, matrix, eigenvalues = network
    summary = fisher_summary(spec, values, key=jax.random.key(2), request=FisherRequest(x=x))
    assert summary.space == "outputs" and summary.num_outputs == 600
    exact_log_pdet = np.log(eigenvalues).sum()
    assert abs(summary.log_pdet - exact_log_pdet) < 0.01 * abs(exact_log_pdet)
    assert abs(summary.log_pdet - exact_log_pdet) < 4 * summary.log_pdet_std_error
    assert abs(summary.rank - 600) < 1e-6
    np.testing.assert_allclose(summary.trace, np.trace(matrix), rtol=1e-12)
    assert abs(summary.trace_estimate - summary.trace) < 4 * summary.trace_std_error
    np.testing.assert_allclose(summary.max_eigenvalue, eigenvalues[-1], rtol=1e-10)
    assert "log pdet=" in repr(summary) and summary.summary()["rank"].item() == summary.rank


def test_the_same_network_in_plain_jax_via_from_predict(network):
    """The d = 2103 network written as a plain-JAX function (`Problem.from_predict`, Gaussian
    noise of sd 1, its parameters a dict in another order): its Fisher-vector products give
    the dense quadratic forms, and SLQ (on the Gram twin, probes in output space, so the same
    key draws the same probes) equals the library model's summary: log pdet within 1% of the
    dense value, rank 600, exact trace and largest eigenvalue."""
    spec, values, x, matrix, eigenvalues = network

    def predict(params, x):
        return jnp.tanh(x @ params["V"].T + params["b"]) @ params["U"].T + params["c"]

    params = {name: jnp.asarray(value) for name, value in values.items()}
    problem = Problem.from_predict(predict, params, {"x": x, "y": np.zeros((x.shape[0], 3))},
                                   "gaussian")
    assert problem.dim == spec.dim == 2103
    v = {name: np.asarray(jax.random.normal(jax.random.key(i), np.shape(value)))
         for i, (name, value) in enumerate(values.items())}
    flat = np.concatenate([v[name].ravel() for name in spec.site_names])  # the spec's order
    product = fisher_vector_product(problem, params)(np.asarray(problem.ravel(v)))
    np.testing.assert_allclose(product @ np.asarray(problem.ravel(v)), flat @ matrix @ flat,
                               rtol=1e-10)
    summary = fisher_summary(problem, params, key=jax.random.key(2))
    library = fisher_summary(spec, values, key=jax.random.key(2), request=FisherRequest(x=x))
    exact_log_pdet = np.log(eigenvalues).sum()
    assert abs(summary.log_pdet - exact_log_pdet) < 0.01 * abs(exact_log_pdet)
    np.testing.assert_allclose(summary.log_pdet, library.log_pdet, rtol=1e-8)
    assert abs(summary.rank - 600) < 1e-6
    np.testing.assert_allclose(summary.trace, np.trace(matrix), rtol=1e-12)
    np.testing.assert_allclose(summary.max_eigenvalue, eigenvalues[-1], rtol=1e-10)


def test_an_exhausted_krylov_space_resolves_the_null_space_of_the_parameter_space():
    """d = 7 ReLU network with two rescaling symmetries (rank 5): with k = d steps every
    probe's quadrature is exact, the null space falls below the tolerance, and the rank and
    log pdet estimates are unbiased: z^T P z for the projector P on the range still varies
    with the probe z, so both are checked within 4 standard errors."""
    spec = models.two_layer_network(1, 2, 1, activation="relu")
    values = {"V": np.array([[1.0], [-1.0]]), "b": np.array([0.5, 0.5]),
              "U": np.array([[1.0, 2.0]]), "c": np.array([0.0])}
    x = np.linspace(-2.0, 2.0, 9)[:, None]
    dense = fisher_information(spec, values, request=FisherRequest(x=x))
    summary = fisher_summary(spec, values, key=jax.random.key(3), request=FisherRequest(x=x),
                             num_steps=7, space="parameters")
    assert dense.rank == 5 and abs(summary.rank - 5) < 4 * summary.rank_std_error
    assert abs(summary.log_pdet - dense.log_pdet) < 4 * summary.log_pdet_std_error


def test_a_new_point_compiles_nothing(network, count_compiles):
    spec, values, x, _, _ = network

    def geometry_at(shift):
        point = {name: value + shift for name, value in values.items()}
        request = FisherRequest(x=x)
        fisher_vector_product(spec, point, request=request)(np.ones(spec.dim))
        fisher_spectrum(spec, point, key=jax.random.key(4), request=request, num_steps=5)
        fisher_summary(spec, point, key=jax.random.key(5), request=request, num_probes=2,
                       num_steps=5)

    geometry_at(0.0)
    with count_compiles() as counter:
        geometry_at(0.1)
    assert counter.count == 0


def test_refusals_name_the_reason():
    spec = models.linear_regression(2)
    point, x = {"w": [1.0, 2.0]}, np.ones((3, 2))
    key = jax.random.key(0)
    with pytest.raises(InputError, match="num_probes"):
        fisher_summary(spec, point, key=key, request=FisherRequest(x=x), num_probes=1)
    with pytest.raises(InputError, match="space must be one of"):
        fisher_summary(spec, point, key=key, request=FisherRequest(x=x), space="weights")
    with pytest.raises(InputError, match="PRNG key"):
        fisher_summary(spec, point, key=None, request=FisherRequest(x=x))
    with pytest.raises(ValueError, match="Gaussian-noise and exponential-family"):
        fisher_summary(models.fixed_component_mixture(), {"pi": 0.5, "mu": 1.0, "sigma": 1.0},
                       key=key)
    with pytest.raises(InputError, match=r"v must have shape \(2,\)"):
        fisher_vector_product(spec, point, request=FisherRequest(x=x))(np.ones(3))
