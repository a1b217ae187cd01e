"""fisher_slice: slices along directions equal pointwise Fisher and loss computations; the
matrix-free path equals the dense one; one compilation per structure; bad input named."""

import jax
import matplotlib
import numpy as np
import numpyro
import numpyro.distributions as dist
import pytest

from slt import Problem, models
from slt.geometry import (
    Direction,
    FisherRequest,
    MatrixFree,
    direction_between,
    fisher_information,
    fisher_scan,
    fisher_slice,
    kl_divergence,
    random_directions,
)
from slt.geometry.fisher import prepare
from slt.validation import InputError

matplotlib.use("Agg")

NETWORK = models.two_layer_network(1, 2, 1, activation="tanh")  # d = 7
POINT = {"V": np.array([[1.5], [-1.0]]), "b": np.array([0.5, 1.0]),
         "U": np.array([[1.0, 0.8]]), "c": np.array([0.2])}
X = np.random.default_rng(0).normal(size=(60, 1))
REQUEST = FisherRequest(x=X)


def logistic(x, y=None):
    w = numpyro.sample("w", dist.Normal(0.0, 1.0).expand([3]).to_event(1))
    with numpyro.plate("data", x.shape[0]):
        numpyro.sample("y", dist.Bernoulli(logits=x @ w), obs=y)


@pytest.fixture(scope="module")
def logistic_problem():
    x = np.random.default_rng(1).normal(size=(40, 3))
    y = (x @ np.array([0.5, -1.0, 0.3]) + 0.3 * np.random.default_rng(2).normal(size=40) > 0)
    return Problem(logistic, {"x": x, "y": y.astype(np.float64)})


def _values_at(model, params, theta, request):
    with jax.enable_x64(True):
        return prepare(model, params, request=request).coordinates.values_at(theta)


def _assert_point(row, fisher, rtol=1e-10):
    assert int(row["rank"]) == fisher.rank
    for name, expected in (("log_pdet", fisher.log_pdet), ("trace", np.trace(fisher.matrix)),
                           ("max_eigenvalue", fisher.eigenvalues[-1])):
        np.testing.assert_allclose(float(row[name]), expected, rtol=rtol)


def test_slice_along_coordinate_axes_equals_the_coordinate_scan():
    """theta* + s e_i + t e_j is the named-coordinate scan at theta*_i + s, theta*_j + t."""
    u_grid, c_grid = np.array([-0.5, 0.0, 0.5]), np.array([-0.3, 0.2])
    scan = fisher_scan(NETWORK, POINT, {("U", (0, 1)): u_grid, "c": c_grid},
                       request=REQUEST, progress=False)
    e = np.eye(NETWORK.dim)
    slice_ = fisher_slice(NETWORK, POINT, {"s": (e[5], u_grid - 0.8), "t": (e[6], c_grid - 0.2)},
                          request=REQUEST, progress=False)
    assert slice_.dataset["rank"].dims == ("s", "t") and slice_.direction_kinds == ("given",) * 2
    np.testing.assert_array_equal(slice_["rank"].values, [[7, 7], [5, 5], [7, 7]])
    for name in ("rank", "log_pdet", "max_eigenvalue", "smallest_nonzero", "trace", "loss"):
        np.testing.assert_allclose(slice_[name].values, scan[name].values, rtol=1e-10,
                                   atol=1e-14)
    assert slice_.loss_kind == scan.loss_kind == "kl"
    assert slice_.dataset.attrs["direction_norms"] == [1.0, 1.0]


def test_random_slice_equals_pointwise_fisher_and_kl():
    u, v = random_directions(NETWORK, POINT, jax.random.key(3), normalize="filter")
    grid = np.array([-0.5, 0.25, 1.0])
    slice_ = fisher_slice(NETWORK, POINT, {"s": (u, grid), "t": (v, grid[:2])},
                          request=REQUEST, progress=False)
    theta_star = prepare(NETWORK, POINT, request=REQUEST).theta
    for i, s in enumerate(grid):
        for j, t in enumerate(grid[:2]):
            values = _values_at(NETWORK, POINT, theta_star + s * u.vector + t * v.vector, REQUEST)
            row = slice_.dataset.isel(s=i, t=j)
            _assert_point(row, fisher_information(NETWORK, values, request=REQUEST))
            np.testing.assert_allclose(float(row["loss"]),
                                       kl_divergence(NETWORK, POINT, values, x=X), rtol=1e-10)
    assert slice_.dataset.attrs["direction_kinds"] == ["random, filter-normalised"] * 2
    assert "along random, filter-normalised" in repr(slice_)


def test_problem_slice_reports_the_data_nll(logistic_problem):
    """On a Problem the loss is L_n(theta) = -(1/n) sum log p(y_i | x_i, theta)."""
    params = {"w": np.array([0.4, -0.9, 0.2])}
    (u,) = random_directions(logistic_problem, params, jax.random.key(1), 1)
    assert np.isclose(np.linalg.norm(u.vector), 1.0)
    grid = np.linspace(-1.0, 1.0, 5)
    slice_ = fisher_slice(logistic_problem, params, {"s": (u.vector, grid)}, progress=False)
    assert slice_.loss_kind == "nll"
    for s in grid:
        values = {"w": params["w"] + s * u.vector}
        row = slice_.dataset.sel(s=s)
        _assert_point(row, fisher_information(logistic_problem, values))
        loss = -np.mean(logistic_problem.loglik(logistic_problem.unconstrain(values),
                                                logistic_problem.data))
        np.testing.assert_allclose(float(row["loss"]), loss, rtol=1e-10)


def test_segment_passes_through_both_points():
    other = {"V": np.array([[0.5], [-2.0]]), "b": np.array([0.0, 0.3]),
             "U": np.array([[0.0, 1.2]]), "c": np.array([-0.1])}  # U[0,0] = 0: singular
    segment = direction_between(NETWORK, POINT, other)
    slice_ = fisher_slice(NETWORK, POINT, {"s": (segment, np.linspace(0.0, 1.0, 5))},
                          request=REQUEST, progress=False)
    _assert_point(slice_.dataset.sel(s=0.0), fisher_information(NETWORK, POINT, request=REQUEST))
    end = fisher_information(NETWORK, other, request=REQUEST)
    _assert_point(slice_.dataset.sel(s=1.0), end)
    assert end.rank == 5 and bool(slice_.singular().sel(s=1.0))
    assert float(slice_["loss"].sel(s=0.0)) == 0.0
    np.testing.assert_allclose(float(slice_["loss"].sel(s=1.0)),
                               kl_divergence(NETWORK, POINT, other, x=X), rtol=1e-10)


@pytest.fixture(scope="module")
def wide_network():
    """tanh 10-40-2, d = 522, on 16 inputs: rank <= 32 outputs, so 40 Lanczos steps exhaust
    the Krylov space and the matrix-free rank is exact."""
    spec = models.two_layer_network(10, 40, 2, activation="tanh")
    rng = np.random.default_rng(4)
    values = {"V": rng.normal(size=(40, 10)) / 3, "b": rng.normal(size=40),
              "U": rng.normal(size=(2, 40)), "c": rng.normal(size=2)}
    return spec, values, rng.normal(size=(16, 10))


@pytest.mark.slow  # 14 s of make test's 10 minutes; the matrix-free spectrum equals the
# dense one in tests/geometry/test_matrix_free.py (fast), the slice's dense path here
def test_matrix_free_slice_equals_the_dense_slice(wide_network):
    spec, values, x = wide_network
    (u,) = random_directions(spec, values, jax.random.key(5), 1, normalize="site")
    axes = {"s": (u, [-0.5, 0.0, 0.7])}
    request = FisherRequest(x=x)
    dense = fisher_slice(spec, values, axes, request=request, method="dense", progress=False)
    free = fisher_slice(spec, values, axes, key=jax.random.key(6), request=request,
                        method=MatrixFree(num_steps=40), chunk_size=2, progress=False)
    assert spec.dim == 522 and free.method == "matrix_free" and dense.method == "dense"
    assert bool(free["rank_is_exact"].all())
    np.testing.assert_array_equal(free["rank"].values, dense["rank"].values)
    assert np.all(dense["rank"].values == 32)
    np.testing.assert_allclose(free["max_eigenvalue"].values, dense["max_eigenvalue"].values,
                               rtol=1e-8)
    np.testing.assert_allclose(free["trace"].values, dense["trace"].values, rtol=1e-12)
    np.testing.assert_allclose(free["log_pdet"].values, dense["log_pdet"].values, rtol=1e-8)
    np.testing.assert_allclose(free["loss"].values, dense["loss"].values, rtol=1e-12)
    assert "log_det" not in free.dataset and "matrix_free" in repr(free)


def test_matrix_free_on_the_fisher_itself_when_outputs_outnumber_parameters():
    """More whitened outputs than parameters (m = 60 > d = 3): Lanczos runs on I itself (d
    steps exhaust it), and equals the dense slice (the test above takes the Gram twin)."""
    spec = models.linear_regression(3)
    data = spec.simulate(jax.random.key(8), {"w": np.array([1.0, -0.5, 0.2])}, 60)
    problem = spec.problem(data)
    point = {"w": np.array([0.8, -0.4, 0.1]), **(
        {"noise_variance": 1.0} if "noise_variance" in problem.site_names else {})}
    axes = {"s": (np.array([1.0, 2.0, -1.0]), [-1.0, 0.0, 1.0])}
    dense = fisher_slice(problem, point, axes, method="dense", progress=False)
    free = fisher_slice(problem, point, axes, method="matrix_free", key=jax.random.key(9),
                        progress=False)
    assert bool(free["rank_is_exact"].all())
    for name in ("rank", "max_eigenvalue", "trace", "log_pdet", "loss"):
        np.testing.assert_allclose(free[name].values, dense[name].values, rtol=1e-10)


def test_a_slice_compiles_once_per_structure(count_compiles, wide_network):
    """New base point, new directions, new grid values of the same shape: nothing compiles."""
    spec, values, x = wide_network
    first, second = random_directions(spec, values, jax.random.key(7), 2)
    settings = {"request": FisherRequest(x=x), "method": MatrixFree(num_steps=40),
                "chunk_size": 2, "progress": False}  # the test above's: its program, if it ran
    fisher_slice(spec, values, {"s": (first, [0.0, 1.0, 2.0])}, key=jax.random.key(0),
                 **settings)
    moved = {name: value + 0.1 for name, value in values.items()}
    with count_compiles() as counter:
        fisher_slice(spec, moved, {"s": (second, [-1.0, 0.5, 3.0])}, key=jax.random.key(1),
                     **settings)
    assert counter.count == 0
    e = np.eye(NETWORK.dim)
    fisher_slice(NETWORK, POINT, {"s": (e[0], [0.0, 1.0]), "t": (e[1], [0.0])},
                 request=REQUEST, progress=False)
    with count_compiles("summarize") as dense:
        fisher_slice(NETWORK, POINT, {"a": (e[3], [2.0, 1.0]), "b": (e[5], [0.0])},
                     request=REQUEST, progress=False)
        fisher_scan(NETWORK, POINT, {"c": [0.0, 1.0], "b[0]": [0.5]}, request=REQUEST,
                    progress=False)
    assert dense.count == 0  # coordinate scans run the same program


def test_random_direction_normalisations():
    key = jax.random.key(8)
    (unit,) = random_directions(NETWORK, POINT, key, 1)
    (site,) = random_directions(NETWORK, POINT, key, 1, normalize="site")
    (filt,) = random_directions(NETWORK, POINT, key, 1, normalize="filter")
    assert np.isclose(np.linalg.norm(unit.vector), 1.0) and unit.kind == "random"
    # blocks V (2 x 1), b (2), U (1 x 2), c (1)
    np.testing.assert_allclose(np.linalg.norm(site.vector[2:4]), np.linalg.norm(POINT["b"]))
    np.testing.assert_allclose(np.abs(filt.vector[:2]), np.abs(POINT["V"][:, 0]))
    np.testing.assert_allclose(np.linalg.norm(filt.vector[4:6]), np.linalg.norm(POINT["U"]))
    assert not np.any(filt.vector[2:4]) and filt.vector[6] == 0.0  # biases zeroed
    # the same key draws the same Gaussian vector: the three differ only by scaling
    assert np.all(np.sign(unit.vector[:2]) == np.sign(site.vector[:2]))
    with pytest.raises(ValueError, match="zero direction.*two or more dimensions"):
        random_directions(models.fixed_component_mixture(), {"pi": 0.5, "mu": 1.0,
                                                            "sigma": 1.0}, key,
                          normalize="filter")
    with pytest.raises(ValueError, match="normalize must be one of"):
        random_directions(NETWORK, POINT, key, normalize="layer")


def test_plots_of_one_and_two_dimensional_slices():
    segment = direction_between(NETWORK, POINT, dict(POINT, U=np.array([[0.0, 0.8]])))
    one = fisher_slice(NETWORK, POINT, {"s": (segment, np.linspace(-0.5, 1.5, 9))},
                       request=REQUEST, progress=False).plot()
    assert [ax.get_ylabel() for ax in one.axes] == ["KL from params", "log pdet I", "rank"]
    (v,) = random_directions(NETWORK, POINT, jax.random.key(9), 1)
    two = fisher_slice(NETWORK, POINT, {"s": (segment, np.linspace(-0.5, 1.5, 9)),
                                        "t": (v, np.linspace(-0.2, 0.2, 5))}, request=REQUEST,
                       progress=False).plot()
    loss_axis, log_axis = two.axes[:2]
    assert loss_axis.get_xlabel() == log_axis.get_xlabel() == "s"
    assert "KL from params" in loss_axis.get_title() and "log pdet I" in log_axis.get_title()
    # the rank drops to 5 on the line s = 1 (U[0,0] = 0): red contours on both maps
    assert all(len(ax.collections) >= 2 for ax in (loss_axis, log_axis))


@pytest.mark.parametrize(
    "directions, kwargs, message",
    [
        ({"s": (np.ones(6), [0.0])}, {}, r"direction 's' has shape \(6,\).*d = 7"),
        ({"s": (np.zeros(7), [0.0])}, {}, "direction 's' is zero"),
        ({"s": (np.r_[np.ones(6), np.nan], [0.0])}, {},
         r"direction 's' has 1 non-finite .* 'c\[0\]' \(nan\)"),
        ({"s": (np.ones(7), [0.0]), "t": (np.ones(7), [0.0]), "r": (np.ones(7), [0.0])}, {},
         "one or two .* got 3"),
        ({"s": np.ones(7)}, {}, r"directions\['s'\] must be a pair"),
        ({"s": (np.ones(7), [np.inf])}, {}, "grid of 's' must be .* finite"),
        ({"s": ({"V": np.ones((2, 1))}, [0.0])}, {}, "no entries for the sites"),
        ({"s": (np.ones(7), [0.0])}, {"method": "matrix_free"}, "needs a PRNG key"),
        ({"s": (np.ones(7), [0.0])}, {"method": "matrix_free", "key": jax.random.key(0),
                                       "request": FisherRequest(x=X, kind="monte_carlo",
                                                                num_draws=4)},
         "needs kind='exact'"),
        ({"s": (np.ones(7), [0.0])}, {"method": "lanczos"}, "method must be one of"),
        ({"s": (np.ones(7), [0.0])}, {"method": 30}, "method must be 'auto'.*MatrixFree"),
    ],
)
def test_bad_slices_raise(directions, kwargs, message):
    with pytest.raises(InputError, match=message):
        fisher_slice(NETWORK, POINT, directions, **{"request": REQUEST, "progress": False,
                                                    **kwargs})


def test_a_slice_leaving_the_support_is_refused():
    mixture, base = models.fixed_component_mixture(), {"pi": 0.5, "mu": 1.0, "sigma": 1.0}
    with pytest.raises(ValueError, match=r"leaves the support of 'pi' .* at \{'s': 1.0\}"):
        fisher_slice(mixture, base, {"s": (Direction(np.array([1.0, 0.0, 0.0]), "pi"),
                                           [0.0, 1.0])}, progress=False)
