"""Closed-form relative Fisher matrices against autodiff Fisher matrices of the same component.

Each component is written as a NumPyro model (independent responses y_k of units k, so its
Fisher is block diagonal with one block per unit) and its Fisher computed by
`fisher_information`: "monte_carlo" (autodiff scores at y drawn from the model) for every
closed form, checked entry-wise within 4 Monte Carlo standard errors, and "exact" where the
library has it (Gaussian responses), checked to 1e-10. Deliberately wrong formulas (the
seed's eq. 26 as printed, a Gaussian-style weight for a Bernoulli neuron) must fail the
same check, so the tolerance is not loose enough to pass anything.
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from slt import models
from slt.geometry import FisherRequest, fisher_information
from slt.geometry.relative_fisher import (
    Response,
    activation_function,
    layer_fisher,
    linear_layer_fisher,
    neuron_fisher,
    neuron_major_order,
    neuron_weight,
    softmax_layer_fisher,
    two_layer_fisher,
)
from slt.models.base import ModelSpec
from slt.validation import InputError

NUM_INPUTS = 2
X = np.random.default_rng(0).normal(size=(40, NUM_INPUTS))
REQUEST = FisherRequest(x=X)
NUM_DRAWS = 1000  # replicates; each draws y at all 40 inputs
Z_LIMIT = 4.0  # |closed form - Monte Carlo| <= 4 standard errors, entry by entry

# Gaussian-response units: (activation, shape parameters); noise sd 0.7
GAUSSIAN_UNITS = (
    ("identity", {}),
    ("identity", {}),
    ("relu", {}),
    ("leaky_relu", {"slope": 0.2}),
    ("smooth_relu", {"slope": 0.1, "smoothness": 0.5}),
    ("softplus", {"smoothness": 1.5}),
    ("elu", {"alpha": 1.0}),
    ("elu", {"alpha": 2.0}),
)
NOISE = 0.7
BERNOULLI_UNITS = (("tanh", {}), ("tanh", {}), ("sigmoid", {}))


def _weights(num_units, seed):
    rng = np.random.default_rng(seed)
    return {"W": rng.normal(size=(num_units, NUM_INPUTS)), "b": rng.normal(size=num_units) * 0.5}


def _spec(name, dim, site_shapes, observe) -> ModelSpec:
    """A ModelSpec with N(0, 1) priors on the sites and `observe(values, x)` as likelihood."""

    def model(x, y=None):
        values = {
            site: numpyro.sample(site, dist.Normal(0.0, 1.0).expand(shape).to_event(len(shape)))
            for site, shape in site_shapes.items()
        }
        with numpyro.plate("data", x.shape[0]):
            numpyro.sample("y", observe(values, x), obs=y)

    def simulate(key, values, n):
        x = jax.random.normal(key, (n, NUM_INPUTS))
        return {"x": x, "y": observe(values, x).sample(key)}

    return ModelSpec(name, model, dim, "N(0, 1)", tuple(site_shapes), simulate)


@functools.cache
def _unit_spec(units, family) -> ModelSpec:
    functions = [activation_function(Response(name, **dict(shape)))[0] for name, shape in units]

    def observe(values, x):
        t = x @ values["W"].T + values["b"]
        mean = jnp.stack([f(t[:, k]) for k, f in enumerate(functions)], axis=1)
        if family == "normal":
            return dist.Normal(mean, NOISE).to_event(1)
        tanh = np.array([name == "tanh" for name, _ in units])
        probs = jnp.where(tanh, (1 + mean) / 2, mean)  # tanh: p(y=1) = (1 + tanh t) / 2
        return dist.Bernoulli(probs=probs).to_event(1)

    shapes = {"W": (len(units), NUM_INPUTS), "b": (len(units),)}
    return _spec(f"units_{family}", len(units) * (NUM_INPUTS + 1), shapes, observe)


def _hashable(units):
    return tuple((name, tuple(sorted(shape.items()))) for name, shape in units)


def _monte_carlo(spec, values, seed=1):
    fisher = fisher_information(
        spec, values, key=jax.random.key(seed),
        request=FisherRequest(kind="monte_carlo", x=X, num_draws=NUM_DRAWS),
    )
    return fisher.matrix, fisher.std_error


def _z_scores(closed, estimate, standard_error):
    return np.abs(np.asarray(closed) - estimate) / (standard_error + 1e-12)


def _block_diagonal(blocks):
    size = sum(b.shape[0] for b in blocks)
    out, start = np.zeros((size, size)), 0
    for block in blocks:
        k = block.shape[0]
        out[start : start + k, start : start + k] = block
        start += k
    return out


def _gaussian_closed_form(values):
    blocks = [
        np.asarray(neuron_fisher(Response(name, noise_scale=NOISE, **shape), values["W"][k],
                                 values["b"][k], X))
        for k, (name, shape) in enumerate(GAUSSIAN_UNITS)
    ]
    return _block_diagonal(blocks), blocks


def test_gaussian_neurons_and_linear_layer_match_exact_and_monte_carlo_fisher():
    """identity (linear layer), relu, leaky relu, smooth relu, softplus, elu (alpha 1 and 2)."""
    spec = _unit_spec(_hashable(GAUSSIAN_UNITS), "normal")
    values = _weights(len(GAUSSIAN_UNITS), seed=2)
    order = neuron_major_order(len(GAUSSIAN_UNITS), NUM_INPUTS)
    closed, blocks = _gaussian_closed_form(values)
    pre_activations = X @ values["W"].T + values["b"]
    assert np.all((pre_activations > 0).any(0) & (pre_activations < 0).any(0))  # both branches

    exact = fisher_information(spec, values, request=REQUEST).matrix[np.ix_(order, order)]
    np.testing.assert_allclose(closed, exact, rtol=1e-10, atol=1e-12)

    estimate, standard_error = _monte_carlo(spec, values)
    estimate, standard_error = (a[np.ix_(order, order)] for a in (estimate, standard_error))
    assert _z_scores(closed, estimate, standard_error).max() <= Z_LIMIT
    np.testing.assert_allclose(  # the two identity units are a linear layer of two outputs
        linear_layer_fisher(X, 2, noise_scale=NOISE), closed[:6, :6], rtol=1e-12
    )
    layer = layer_fisher(Response("elu", noise_scale=NOISE), values["W"][-2:], values["b"][-2:], X)
    np.testing.assert_allclose(layer[:3, :3], blocks[-2], rtol=1e-12)  # alpha = 1 default
    assert not np.allclose(layer[3:, 3:], blocks[-1])  # alpha = 2 differs from alpha = 1


def test_bernoulli_neurons_and_tanh_layer_match_monte_carlo_fisher():
    """tanh (y in {-1, 1}, p(y=1) = (1 + tanh t)/2): nu = sech^2; sigmoid: sigm (1 - sigm)."""
    spec = _unit_spec(_hashable(BERNOULLI_UNITS), "bernoulli")
    values = _weights(len(BERNOULLI_UNITS), seed=3)
    order = neuron_major_order(len(BERNOULLI_UNITS), NUM_INPUTS)
    W, b = values["W"], values["b"]
    closed = _block_diagonal([
        np.asarray(layer_fisher("tanh", W[:2], b[:2], X)),
        np.asarray(neuron_fisher("sigmoid", W[2], b[2], X)),
    ])
    estimate, standard_error = (a[np.ix_(order, order)] for a in _monte_carlo(spec, values))
    assert _z_scores(closed, estimate, standard_error).max() <= Z_LIMIT

    # a Gaussian-style weight f'(t)^2 = sech^4 t for the tanh neuron is rejected
    gaussian_tanh = Response(lambda t: jnp.tanh(t), noise_scale=1.0)
    wrong = np.asarray(neuron_fisher(gaussian_tanh, W[0], b[0], X))
    assert _z_scores(wrong, estimate[:3, :3], standard_error[:3, :3]).max() > 3 * Z_LIMIT


def test_softmax_layer_matches_monte_carlo_fisher_and_is_singular():
    classes = 3
    shapes = {"W": (classes, NUM_INPUTS), "b": (classes,)}
    spec = _spec(
        "softmax_layer", classes * (NUM_INPUTS + 1), shapes,
        lambda v, x: dist.Categorical(logits=x @ v["W"].T + v["b"]),
    )
    values = _weights(classes, seed=4)
    order = neuron_major_order(classes, NUM_INPUTS)
    closed = np.asarray(softmax_layer_fisher(values["W"], values["b"], X))
    estimate, standard_error = (a[np.ix_(order, order)] for a in _monte_carlo(spec, values))
    assert _z_scores(closed, estimate, standard_error).max() <= Z_LIMIT

    eigenvalues = np.linalg.eigvalsh(closed)
    assert np.sum(eigenvalues > 1e-10 * eigenvalues[-1]) == (classes - 1) * (NUM_INPUTS + 1)
    shift = np.tile(np.array([0.3, -1.0, 2.0]), classes)  # the same v added to every class
    np.testing.assert_allclose(closed @ shift, 0.0, atol=1e-13)


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_two_layer_block_is_the_exact_network_fisher_block(activation):
    """Gaussian output: two_layer_fisher = (V, b) block of fisher_information, to 1e-10."""
    spec = models.two_layer_network(NUM_INPUTS, 3, 2, activation=activation, noise_scale=0.6)
    rng = np.random.default_rng(5)
    values = {"V": rng.normal(size=(3, 2)), "b": rng.normal(size=3) * 0.5,
              "U": rng.normal(size=(2, 3)), "c": rng.normal(size=2)}
    order = neuron_major_order(3, NUM_INPUTS)  # V and b are the first 9 coordinates
    block = fisher_information(spec, values, request=REQUEST).matrix[np.ix_(order, order)]
    closed = two_layer_fisher(values, X, hidden=activation,
                              output=Response("identity", noise_scale=0.6))
    np.testing.assert_allclose(closed, block, rtol=1e-10, atol=1e-12)


def test_two_layer_bernoulli_softplus_matches_monte_carlo_and_rejects_the_printed_eq_26():
    """Softplus hidden units, sigmoid (Bernoulli) outputs: the f'(a_i) form agrees with Monte
    Carlo; the seed's eq. 26 with nu_f(w_i, x) = sigm^2 in place of f' = sigm does not."""
    hidden, outputs = 3, 2
    shapes = {"V": (hidden, NUM_INPUTS), "b": (hidden,), "U": (outputs, hidden), "c": (outputs,)}

    def observe(v, x):
        logits = jax.nn.softplus(x @ v["V"].T + v["b"]) @ v["U"].T + v["c"]
        return dist.Bernoulli(logits=logits).to_event(1)

    spec = _spec("two_layer_softplus_bernoulli", 17, shapes, observe)
    rng = np.random.default_rng(6)
    values = {"V": rng.normal(size=(hidden, 2)), "b": rng.normal(size=hidden),
              "U": rng.normal(size=(outputs, hidden)) * 1.5, "c": rng.normal(size=outputs)}
    order = neuron_major_order(hidden, NUM_INPUTS)
    estimate, standard_error = (a[np.ix_(order, order)] for a in _monte_carlo(spec, values))
    closed = np.asarray(two_layer_fisher(values, X, hidden="softplus", output="sigmoid"))
    assert _z_scores(closed, estimate, standard_error).max() <= Z_LIMIT

    printed = _printed_eq_26(values)  # nu_f(a_i) = sigm(a_i)^2 where f'(a_i) = sigm(a_i) belongs
    assert _z_scores(printed, estimate, standard_error).max() > 3 * Z_LIMIT


def _printed_eq_26(values):
    """The seed's eq. 26 as printed: nu_out(t_l) nu_f(a_i) nu_f(a_j) U_li U_lj x~ x~^T."""
    augmented = np.hstack([X, np.ones((X.shape[0], 1))])
    a = X @ values["V"].T + values["b"]
    t = np.asarray(jax.nn.softplus(a)) @ values["U"].T + values["c"]
    nu_out = np.asarray(neuron_weight("sigmoid", t))
    nu_hidden = np.asarray(neuron_weight("softplus", a))  # Gaussian-style sigm(a)^2
    coefficients = np.einsum("nl,li,lj,ni,nj->nij", nu_out, values["U"], values["U"],
                             nu_hidden, nu_hidden)
    blocks = np.einsum("nij,na,nb->iajb", coefficients, augmented, augmented) / X.shape[0]
    size = a.shape[1] * augmented.shape[1]
    return blocks.reshape(size, size)


def test_neuron_weights_at_known_points():
    t = jnp.array([-1.0, 0.0, 2.0])
    np.testing.assert_allclose(neuron_weight("tanh", t), 1 - np.tanh(t) ** 2)
    np.testing.assert_allclose(neuron_weight("sigmoid", 0.0), 0.25)
    np.testing.assert_allclose(neuron_weight(Response("relu", noise_scale=0.5), t), [0.0, 0.0, 4.0])
    leaky = Response("leaky_relu", slope=0.1)
    np.testing.assert_allclose(neuron_weight(leaky, t), [0.01, 0.01, 1.0])
    np.testing.assert_allclose(neuron_weight("softplus", 0.0), 0.25)  # sigm(0)^2
    smooth = neuron_weight(Response("smooth_relu", slope=0.0, smoothness=1.0), t)
    np.testing.assert_allclose(smooth, neuron_weight("softplus", t), rtol=1e-14)
    # smooth relu tends to leaky relu as the smoothness goes to 0 (away from t = 0)
    sharp_relu = Response("smooth_relu", slope=0.2, smoothness=1e-3)
    sharp = neuron_weight(sharp_relu, jnp.array([-1.0, 2.0]))
    np.testing.assert_allclose(sharp, [0.04, 1.0], rtol=1e-12)
    # elu: nu is continuous at 0 only for alpha = 1 (left limit alpha^2, right value 1)
    for alpha in (1.0, 2.0):
        left, right = neuron_weight(Response("elu", alpha=alpha), jnp.array([-1e-9, 0.0]))
        assert right == 1.0 and left == pytest.approx(alpha**2, rel=1e-8)


def test_dead_relu_unit_has_zero_fisher_and_rank_counts_active_inputs():
    w = np.array([1.0, 0.0])
    assert np.all(np.asarray(neuron_fisher("relu", w, -10.0, X)) == 0.0)  # no input active
    active = X[:, 0] > 1.0
    fisher = np.asarray(neuron_fisher("relu", w, -1.0, X))
    assert np.linalg.matrix_rank(fisher) == min(3, int(active.sum()))
    augmented = np.hstack([X[active], np.ones((active.sum(), 1))])
    np.testing.assert_allclose(fisher, augmented.T @ augmented / len(X), rtol=1e-12)


def test_functions_jit_and_order_helper():
    jitted = jax.jit(lambda W, b: layer_fisher("tanh", W, b, X))
    values = _weights(2, seed=7)
    np.testing.assert_allclose(jitted(values["W"], values["b"]),
                               layer_fisher("tanh", values["W"], values["b"], X), rtol=1e-14)
    np.testing.assert_array_equal(neuron_major_order(2, 3), [0, 1, 2, 6, 3, 4, 5, 7])


def test_bad_input_is_refused():
    W, b = np.ones((2, NUM_INPUTS)), np.zeros(2)
    with pytest.raises(ValueError, match="activation must be one of"):
        layer_fisher("swish", W, b, X)
    with pytest.raises(ValueError, match="slope must be in"):
        Response("leaky_relu", slope=1.5)
    with pytest.raises(ValueError, match="smoothness must be > 0"):
        Response("softplus", smoothness=0.0)
    with pytest.raises(ValueError, match="alpha must be > 0"):
        Response("elu", alpha=-1.0)
    with pytest.raises(ValueError, match="takes no"):
        Response("tanh", slope=0.1)
    with pytest.raises(ValueError, match="Bernoulli response"):
        Response("sigmoid", noise_scale=1.0)
    with pytest.raises(ValueError, match="noise_scale must be > 0"):
        layer_fisher(Response("relu", noise_scale=0.0), W, b, X)
    with pytest.raises(ValueError, match="weights must be"):
        layer_fisher("relu", np.ones((2, 3)), b, X)
    with pytest.raises(ValueError, match="x must have shape"):
        layer_fisher("relu", W, b, X[:, 0])
    with pytest.raises(ValueError, match="non-finite"):
        layer_fisher("relu", W, b, np.where(X > 1, np.nan, X))
    with pytest.raises(ValueError, match="w must be"):
        neuron_fisher("relu", W, 0.0, X)
    with pytest.raises(ValueError, match="num_outputs"):
        linear_layer_fisher(X, 0)
    with pytest.raises(ValueError, match="U, c"):
        two_layer_fisher({"V": W, "b": b, "U": np.ones((1, 3)), "c": np.zeros(1)}, X)
    with pytest.raises(ValueError, match=r"a dict with the weights .*; missing \['U', 'c'\]"):
        two_layer_fisher({"V": W, "b": b}, X)


def test_response_is_a_checked_value_and_a_bare_name_is_shorthand():
    """Defaults are filled in and shown; a name or callable stands for Response(activation)."""
    assert repr(Response("leaky_relu")) == "Response('leaky_relu', noise_scale=1.0, slope=0.01)"
    assert repr(Response("sigmoid")) == "Response('sigmoid')"
    assert Response("relu") == Response("relu", noise_scale=1.0)
    t = jnp.linspace(-2.0, 2.0, 7)
    for name in ("tanh", "relu", "softplus", "elu"):
        np.testing.assert_array_equal(neuron_weight(name, t), Response(name).weight(t))
    with pytest.raises(InputError, match="Response.activation"):
        Response("swish")
    with pytest.raises(InputError, match="Response.noise_scale must be a real number"):
        Response("relu", noise_scale="big")
    with pytest.raises(InputError, match="slope / smoothness / alpha are for named"):
        Response(jnp.tanh, slope=0.1)
    with pytest.raises(InputError, match="response must be a Response"):
        neuron_weight(3.0, t)
