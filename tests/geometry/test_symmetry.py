"""Symmetries of two-layer networks: nullity counts of TRUTH.md section 4, generators in the
Fisher kernel, invariance along orbits, conserved quantities."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slt import models
from slt.geometry import FisherRequest, fisher_information
from slt.geometry.symmetry import (
    conserved_quantities,
    expected_fisher_nullity,
    expected_orbit_dimension,
    generators,
    move_along_orbit,
    null_space_split,
    orbit_dimension,
)


def _point(rng, n, h, m, bias=True):
    """A generic point whose units all matter: incoming weight vectors of norm 1 to 2 in
    random directions (tanh units far from linear), biases in (-1, 1) (every ReLU unit on
    for a good share of N(0, I) inputs)."""
    directions = rng.normal(size=(h, n))
    norms = rng.uniform(1.0, 2.0, size=(h, 1))
    values = {"V": norms * directions / np.linalg.norm(directions, axis=1, keepdims=True)}
    if bias:
        values["b"] = rng.uniform(-1.0, 1.0, size=h)
    values["U"] = rng.normal(size=(m, h))
    if bias:
        values["c"] = rng.normal(size=m)
    return values


def _fisher(activation, widths, bias=True, seed=0, values=None):
    n, h, m = widths
    spec = models.two_layer_network(n, h, m, activation=activation, bias=bias)
    rng = np.random.default_rng(seed)
    values = _point(rng, n, h, m, bias) if values is None else values
    x = rng.normal(size=(3 * spec.dim // m + 20, n))  # n_inputs * m well above d
    return fisher_information(spec, values, request=FisherRequest(x=x)), values


def _assert_clear_gap(fisher):
    """The count does not hinge on the tolerance (1e-10): null eigenvalues are rounding,
    below 1e-13 of the largest, the counted ones above 1e-9 of it."""
    relative = fisher.eigenvalues / fisher.eigenvalues[-1]
    if fisher.nullity:
        assert np.abs(relative[: fisher.nullity]).max() < 1e-13
    assert relative[fisher.nullity] > 1e-9


WIDTHS = [(1, 2, 1), (2, 3, 1), (3, 4, 2), (2, 5, 2), (4, 3, 3)]
LINEAR_WIDTHS = [(3, 5, 2), (2, 3, 4), (4, 2, 3), (1, 4, 1), (3, 3, 3)]


@pytest.mark.parametrize("widths", LINEAR_WIDTHS)
@pytest.mark.parametrize("bias", [False, True])
def test_linear_network_nullity_is_truth(widths, bias):
    fisher, _ = _fisher("identity", widths, bias=bias)
    assert fisher.nullity == expected_fisher_nullity(*widths, "identity", bias=bias)
    _assert_clear_gap(fisher)


def test_truth_examples_of_linear_nullity():
    assert expected_fisher_nullity(3, 5, 2, "identity", bias=False) == 19
    assert expected_fisher_nullity(5, 50, 10, "identity", bias=False) == 700
    spec = models.two_layer_network(5, 50, 10, activation="identity", bias=False)
    rng = np.random.default_rng(9)
    values = {"V": rng.normal(size=(50, 5)), "U": rng.normal(size=(10, 50))}
    fisher = fisher_information(spec, values, request=FisherRequest(x=rng.normal(size=(12, 5))))
    assert fisher.dim == 750 and fisher.nullity == 700


@pytest.mark.parametrize("widths", WIDTHS)
@pytest.mark.parametrize("activation", ["relu", "tanh", "sigmoid"])
def test_nonlinear_network_nullity_is_truth(activation, widths):
    """ReLU: h (one scaling per neuron); tanh and sigmoid: full rank."""
    fisher, _ = _fisher(activation, widths)
    assert fisher.nullity == expected_fisher_nullity(*widths, activation)
    _assert_clear_gap(fisher)


@pytest.mark.parametrize("widths", [(2, 3, 1), (2, 3, 2)])
def test_dead_relu_unit_adds_its_incoming_and_outgoing_weights(widths):
    """Unit 0 with V_0 = 0, b_0 < 0 is off on every input: n + 1 + m null directions instead
    of its one scaling direction (TRUTH.md says n + 1: that is m = 1)."""
    n, h, m = widths
    values = _point(np.random.default_rng(3), n, h, m)
    values["V"][0], values["b"][0] = 0.0, -1.0
    fisher, _ = _fisher("relu", widths, values=values)
    assert fisher.nullity == expected_fisher_nullity(*widths, "relu", dead_units=1) == h + n + m
    split = null_space_split(fisher, generators(values, "relu"))
    assert (split.symmetry_dimension, split.excess_dimension) == (h, n + m)
    loadings = split.excess_loadings()
    dead = ["V[0,0]", "V[0,1]", "b[0]"] + [f"U[{k},0]" for k in range(m)]
    np.testing.assert_allclose(loadings[dead].sum(), n + m, rtol=1e-8)


def test_tanh_unit_with_zero_outgoing_weight_loses_n_plus_one_directions():
    values = _point(np.random.default_rng(4), 2, 3, 1)
    values["U"][0, 1] = 0.0
    fisher, _ = _fisher("tanh", (2, 3, 1), values=values)
    assert fisher.nullity == expected_fisher_nullity(2, 3, 1, "tanh", zero_output_units=1) == 3
    split = null_space_split(fisher, generators(values, "tanh"))
    assert split.symmetry_dimension == 0 and split.excess_dimension == 3
    np.testing.assert_allclose(split.excess_loadings()[["V[1,0]", "V[1,1]", "b[1]"]].sum(), 3,
                               rtol=1e-8)


@pytest.mark.parametrize("widths", LINEAR_WIDTHS)
def test_linear_null_space_splits_into_orbit_and_excess(widths):
    """The orbit explains h^2 - (h-n)+(h-m)+ directions; the rest, (h-n)(m-h) when
    min(n, m) < h < max(n, m), is excess (the hidden directions V never excites)."""
    fisher, values = _fisher("identity", widths, bias=False)
    split = null_space_split(fisher, generators(values, "identity"))
    orbit = expected_orbit_dimension(*widths, "identity", bias=False)
    assert split.symmetry_dimension == orbit == orbit_dimension(values, "identity")
    assert split.excess_dimension == fisher.nullity - orbit
    assert split.generator_leakage < 1e-8
    n, h, m = widths
    if min(n, m) < h < max(n, m):
        assert split.excess_dimension == (h - min(n, m)) * (max(n, m) - h)


@pytest.mark.parametrize("activation", ["identity", "relu"])
@pytest.mark.parametrize("widths", WIDTHS)
def test_orbit_dimension_is_generic_formula(activation, widths):
    values = _point(np.random.default_rng(5), *widths)
    assert orbit_dimension(values, activation) == expected_orbit_dimension(*widths, activation)


RELU = models.two_layer_network(2, 3, 2, activation="relu")
LINEAR = models.two_layer_network(2, 3, 2, activation="identity")
INPUTS = np.random.default_rng(6).normal(size=(40, 2))
DATA = {"x": INPUTS, "y": np.random.default_rng(7).normal(size=(40, 2))}

# Each weight is exactly zero or at least 0.05 in size: an eigenvalue of I grows like the
# square of a small weight, so a weight of 1e-5 puts it at the relative rank tolerance (1e-10),
# where the numerical rank is decided by rounding, not by the symmetry.
_weight = st.one_of(st.just(0.0), st.floats(0.05, 2.0), st.floats(-2.0, -0.05))
weights = st.lists(_weight, min_size=17, max_size=17).map(np.asarray)


def _values(flat):
    return {"V": flat[:6].reshape(3, 2), "b": flat[6:9], "U": flat[9:15].reshape(2, 3),
            "c": flat[15:]}


def _loss(spec, values):
    """L_n at `values` on DATA, up to its constant (the model's Gaussian negative
    log-likelihood, unit noise)."""
    mean = spec.mean_fn({k: jnp.asarray(v) for k, v in values.items()}, jnp.asarray(DATA["x"]))
    return 0.5 * jnp.mean(jnp.sum((DATA["y"] - mean) ** 2, axis=1))


_FLAT_GRADIENT = {
    name: jax.jit(jax.grad(lambda flat, spec=spec: _loss(spec, _values(flat))))
    for name, spec in (("identity", LINEAR), ("relu", RELU))
}


@settings(max_examples=20, deadline=None)
@given(flat=weights, activation=st.sampled_from(["identity", "relu"]))
def test_generators_lie_in_the_fisher_kernel_and_are_orthogonal_to_the_gradient(flat, activation):
    spec = LINEAR if activation == "identity" else RELU
    values = _values(flat)
    fisher = fisher_information(spec, values, request=FisherRequest(x=INPUTS))
    xi = generators(values, activation)
    scale = np.abs(fisher.matrix).max() * np.linalg.norm(xi, axis=0).max() + 1e-300
    assert np.abs(fisher.matrix @ xi).max() <= 1e-10 * scale
    gradient = np.asarray(_FLAT_GRADIENT[activation](jnp.asarray(flat)))
    assert np.abs(gradient @ xi).max() <= 1e-10 * (np.linalg.norm(gradient) + 1e-300) * (
        np.linalg.norm(xi, axis=0).max()
    )


@settings(max_examples=20, deadline=None)
@given(flat=weights, scales=st.lists(st.floats(0.3, 3.0), min_size=3, max_size=3),
       mixing=st.lists(st.floats(-0.5, 0.5), min_size=9, max_size=9),
       shift=st.lists(st.floats(-1, 1), min_size=3, max_size=3))
def test_loss_and_fisher_rank_are_invariant_along_orbits(flat, scales, mixing, shift):
    values = _values(flat)
    cases = [
        (RELU, "relu", move_along_orbit(values, "relu", scales)),
        (LINEAR, "identity",
         move_along_orbit(values, "identity", np.eye(3) + np.reshape(mixing, (3, 3)), shift)),
    ]
    for spec, _, moved in cases:
        np.testing.assert_allclose(_loss(spec, moved), _loss(spec, values), rtol=1e-10,
                                   atol=1e-12)
        assert (fisher_information(spec, moved, request=FisherRequest(x=INPUTS)).rank
                == fisher_information(spec, values, request=FisherRequest(x=INPUTS)).rank)


@pytest.mark.parametrize("activation", ["identity", "relu"])
def test_gradient_descent_moves_q_by_exactly_eta_squared_terms(activation):
    """Q is conserved by gradient flow; one step of size eta changes it by
    eta^2 (G_V G_V^T + G_b G_b^T - G_U^T G_U) (its diagonal for ReLU): TRUTH.md section 4."""
    spec = LINEAR if activation == "identity" else RELU
    values = _point(np.random.default_rng(8), 2, 3, 2)
    gradients = jax.grad(lambda v: _loss(spec, v))({k: jnp.asarray(v) for k, v in values.items()})
    gradients = {k: np.asarray(v) for k, v in gradients.items()}
    eta = 0.05
    stepped = {k: values[k] - eta * gradients[k] for k in values}
    drift = (gradients["V"] @ gradients["V"].T + np.outer(gradients["b"], gradients["b"])
             - gradients["U"].T @ gradients["U"])
    expected = eta**2 * (np.diag(drift) if activation == "relu" else drift)
    change = conserved_quantities(stepped, activation) - conserved_quantities(values, activation)
    np.testing.assert_allclose(change, expected, atol=1e-12)


def test_expected_counts_table():
    assert expected_orbit_dimension(3, 5, 2, "identity", bias=False) == 25 - 2 * 3
    assert expected_orbit_dimension(3, 5, 2, "relu") == 5
    assert expected_orbit_dimension(3, 5, 2, "tanh") == 0
    assert expected_fisher_nullity(3, 5, 2, "relu", zero_output_units=1) == 5 + 3
    assert expected_fisher_nullity(3, 5, 2, "sigmoid", bias=False, zero_output_units=2) == 6


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: generators({"V": np.ones((2, 1)), "U": np.ones((1, 2))}, "gelu"),
         "activation must be one of"),
        (lambda: generators({"V": np.ones((2, 1)), "U": np.ones((1, 3))}, "relu"), "shape"),
        (lambda: generators({"V": np.ones((2, 1)), "U": np.ones((1, 2)), "b": np.ones(2)},
                            "relu"), "both or neither"),
        (lambda: conserved_quantities({"V": np.ones((2, 1)), "U": np.ones((1, 2))}, "tanh"),
         "no continuous symmetry"),
        (lambda: move_along_orbit({"V": np.ones((2, 1)), "U": np.ones((1, 2))}, "relu",
                                  [1.0, -1.0]), "positive"),
        (lambda: move_along_orbit({"V": np.ones((2, 1)), "U": np.ones((1, 2))}, "identity",
                                  np.ones((2, 2))), "invertible"),
        (lambda: move_along_orbit({"V": np.ones((2, 1)), "U": np.ones((1, 2))}, "identity",
                                  np.eye(2), shift=[1.0, 0.0]), "needs identity and biases"),
        (lambda: expected_fisher_nullity(2, 3, 1, "tanh", dead_units=1), "ReLU units"),
        (lambda: expected_fisher_nullity(2, 0, 1, "relu"), "positive"),
        (lambda: null_space_split(_fisher("relu", (1, 2, 1))[0], np.ones((3, 2))), "d=7"),
    ],
)
def test_bad_input_raises(call, message):
    with pytest.raises(ValueError, match=message):
        call()
