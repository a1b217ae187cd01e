"""fisher_scan: the vectorised, chunked scan equals pointwise Fisher computations."""

import jax
import matplotlib
import numpy as np
import pytest

from slt import models
from slt.geometry import FisherRequest, fisher_information, fisher_scan

matplotlib.use("Agg")

MIXTURE = models.fixed_component_mixture()
BASE = {"pi": 0.5, "mu": 1.0, "sigma": 1.0}
MU_GRID = 3.0 * np.arange(-10, 11) / 10  # 21 points, 0 exactly


def test_scan_matches_pointwise_fisher_and_finds_the_singular_point():
    scan = fisher_scan(MIXTURE, BASE, {"mu": MU_GRID}, progress=False)
    assert scan.axes == ("mu",) and scan.dim == 3
    for mu in (-3.0, -0.3, 0.0, 1.2, 2.7):
        point = fisher_information(MIXTURE, dict(BASE, mu=mu))
        row = scan.dataset.sel(mu=mu)
        assert int(row["rank"]) == point.rank
        np.testing.assert_allclose(float(row["log_pdet"]), point.log_pdet, rtol=1e-9)
        np.testing.assert_allclose(float(row["max_eigenvalue"]), point.eigenvalues[-1], rtol=1e-9)
    assert scan.singular().sel(mu=0.0) and int(scan.singular().sum()) == 1
    assert scan["log_det"].sel(mu=0.0) == -np.inf
    assert "ranks seen [2, 3]" in repr(scan)
    assert scan.summary().loc[2, "count"] == 1


def test_chunking_does_not_change_results_and_compiles_once(count_compiles):
    axes = {"pi": np.linspace(0.0, 1.0, 8), "mu": MU_GRID[::4]}  # 8 x 6 = 48 points
    reference = fisher_scan(MIXTURE, BASE, axes, chunk_size=48, progress=False)
    with count_compiles("summarize") as two_chunks:
        halves = fisher_scan(MIXTURE, BASE, axes, chunk_size=24, progress=False)
    with count_compiles("summarize") as many_chunks:
        small = fisher_scan(MIXTURE, BASE, axes, chunk_size=5, progress=False)  # 10 chunks
    assert two_chunks.count == many_chunks.count == 1  # one compilation, however many chunks
    for scan in (halves, small):
        np.testing.assert_array_equal(scan["rank"].values, reference["rank"].values)
        np.testing.assert_allclose(scan["log_pdet"].values, reference["log_pdet"].values,
                                   rtol=1e-12)


def test_two_dimensional_scan_shape_and_coordinates():
    scan = fisher_scan(MIXTURE, BASE, {"pi": [0.0, 0.5, 1.0], ("mu", ()): [0.0, 2.0]},
                       progress=False)
    assert scan.dataset["rank"].dims == ("pi", "mu") and scan.dataset["rank"].shape == (3, 2)
    ranks = scan["rank"].values
    assert ranks[0, 0] == 0 and ranks[0, 1] == 1 and ranks[1, 0] == 2 and ranks[1, 1] == 3


def test_network_scan_through_a_zero_outgoing_weight():
    spec = models.two_layer_network(1, 2, 1, activation="tanh")
    values = {"V": np.array([[1.5], [-1.0]]), "b": np.array([0.5, 1.0]),
              "U": np.array([[1.0, 0.8]]), "c": np.array([0.2])}
    x = np.random.default_rng(0).normal(size=(60, 1))
    scan = fisher_scan(spec, values, {("U", (0, 1)): [-0.5, 0.0, 0.5]},
                       request=FisherRequest(x=x), progress=False)
    np.testing.assert_array_equal(scan["rank"].values, [7, 5, 7])  # nullity n + 1 = 2 at 0


def test_monte_carlo_scan_uses_common_random_numbers(normal_model):
    spec, key = normal_model("sigma"), jax.random.key(2)
    scan = fisher_scan(spec, {"mu": 0.0, "sigma": 1.0}, {"sigma": [0.5, 1.5]}, key=key,
                       request=FisherRequest(kind="monte_carlo", num_draws=64), progress=False)
    point = fisher_information(spec, {"mu": 0.0, "sigma": 1.5}, key=key,
                               request=FisherRequest(kind="monte_carlo", num_draws=64))
    np.testing.assert_allclose(float(scan["log_pdet"].sel(sigma=1.5)), point.log_pdet, rtol=1e-9)


def test_plots_one_and_two_dimensional_scans():
    one = fisher_scan(MIXTURE, BASE, {"mu": MU_GRID}, progress=False).plot()
    assert [axis.get_ylabel() for axis in one.axes] == ["log det I", "rank"]
    two = fisher_scan(MIXTURE, BASE, {"pi": np.linspace(0, 1, 5), "mu": MU_GRID[::2]},
                      progress=False).plot()
    titles = [axis.get_title() for axis in two.axes]
    assert "log det I" in titles and "rank (singular set in red)" in titles
    # the singular set is outlined: a contour set on both maps
    assert all(len(two.axes[i].collections) >= 2 for i in (0, 1))


@pytest.mark.parametrize(
    "axes, kwargs, message",
    [
        ({}, {}, "one or two"),
        ({"pi": [0.1], "mu": [0.0], "sigma": [1.0]}, {}, "one or two"),
        ({"tau": [0.1]}, {}, "unknown coordinate 'tau'"),
        ({"pi": [0.1], ("pi", ()): [0.2]}, {}, "same coordinate twice"),
        ({"pi": [0.0, 1.2]}, {}, "leaves the support of 'pi'"),
        ({"sigma": [-1.0, 1.0]}, {}, "leaves the support of 'sigma'"),
        ({"mu": [0.0, np.nan]}, {}, "finite"),
        ({"mu": [[0.0, 1.0]]}, {}, "1-D"),
        ({"mu": [0.0]}, {"chunk_size": 0}, "chunk_size must be an integer >= 1"),
    ],
)
def test_bad_scans_raise(axes, kwargs, message):
    """(A bad FisherRequest is refused when it is built: tests/geometry/test_request.py.)"""
    with pytest.raises(ValueError, match=message):
        fisher_scan(MIXTURE, BASE, axes, progress=False, **kwargs)


def test_array_site_needs_an_index():
    spec = models.two_layer_network(1, 2, 1)
    values = {"V": np.ones((2, 1)), "b": np.zeros(2), "U": np.ones((1, 2)), "c": np.zeros(1)}
    with pytest.raises(ValueError, match="has 2 coordinates; name one"):
        fisher_scan(spec, values, {"V": [0.0, 1.0]}, request=FisherRequest(x=np.zeros((3, 1))),
                    progress=False)


def test_vmapped_chunks_used_on_accelerators_agree_with_the_cpu_loop(monkeypatch):
    """On GPU a chunk's points are vmapped, on CPU looped (`lax.map`): same numbers."""
    import slt.geometry.scan as scan_module

    looped = fisher_scan(MIXTURE, BASE, {"mu": MU_GRID}, progress=False)
    monkeypatch.setattr(scan_module, "_points_per_step", lambda chunk: chunk)
    # a new spec of the same model: its program is built afresh (and dropped with it)
    vmapped = fisher_scan(models.fixed_component_mixture(), BASE, {"mu": MU_GRID},
                          progress=False)
    np.testing.assert_array_equal(vmapped["rank"].values, looped["rank"].values)
    np.testing.assert_allclose(vmapped["log_pdet"].values, looped["log_pdet"].values, rtol=1e-12)
