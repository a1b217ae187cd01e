"""The seed slides' Fisher landscapes: the singular sets are where TRUTH.md says."""

import matplotlib
import numpy as np
import pytest

from slt.cli.landscapes import seed_figures, seed_scans

matplotlib.use("Agg")


@pytest.fixture(scope="module")
def scans():
    return seed_scans(points=41, points_2d=21)


def _singular_values(scan, name):
    singular = scan.singular()
    return scan.dataset[name].values[singular.values]


def test_mixture_along_mu_is_singular_only_at_mu_zero(scans):
    scan = scans["mixture_mu"]
    assert int(scan["rank"].sel(mu=0.0)) == 2
    np.testing.assert_array_equal(_singular_values(scan, "mu"), [0.0])
    assert np.all(np.isfinite(scan["log_det"].values[scan["mu"].values != 0]))


def test_mixture_along_pi_is_singular_only_at_pi_zero(scans):
    scan = scans["mixture_pi"]
    assert int(scan["rank"].sel(pi=0.0)) == 1
    np.testing.assert_array_equal(_singular_values(scan, "pi"), [0.0])


def test_mixture_map_over_pi_and_mu(scans):
    ranks = scans["mixture_pi_mu"]["rank"]
    mu, pi = ranks["mu"].values, ranks["pi"].values
    assert int(ranks.sel(pi=0.0, mu=0.0)) == 0
    assert np.all(ranks.sel(pi=0.0).values[mu != 0] == 1)
    assert np.all(ranks.sel(mu=0.0).values[pi != 0] == 2)
    off = ranks.sel(pi=pi[pi != 0], mu=mu[mu != 0])
    assert np.all(off.values == 3)


def test_tanh_scans_find_dead_output_duplicate_and_negated_units(scans):
    outgoing = scans["tanh_outgoing"]
    np.testing.assert_array_equal(_singular_values(outgoing, "U[0,1]"), [0.0])
    assert int(outgoing["rank"].sel({"U[0,1]": 0.0})) == 7 - 2  # nullity n + 1
    units = scans["tanh_units"]
    ranks = units["rank"]
    assert int(ranks.sel({"V[1,0]": 1.5, "b[1]": 0.5})) < 7  # unit 1 = unit 0
    assert int(ranks.sel({"V[1,0]": -1.5, "b[1]": -0.5})) < 7  # unit 1 = -unit 0
    assert np.all(ranks.sel({"V[1,0]": 0.0}).values < 7)  # unit 1 constant
    v, b = np.meshgrid(ranks["V[1,0]"].values, ranks["b[1]"].values, indexing="ij")
    duplicate, negated = np.hypot(v - 1.5, b - 0.5) < 0.5, np.hypot(v + 1.5, b + 0.5) < 0.5
    near = (np.abs(v) < 0.5) | duplicate | negated
    assert np.all(ranks.values[~near] == 7)  # nowhere else


def test_seed_figures_are_drawn_and_saved(scans, tmp_path):
    figures = seed_figures(tmp_path, scans=scans)
    assert sorted(figures) == sorted(scans)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.png" for n in scans)
    two_d = figures["mixture_pi_mu"].axes
    assert two_d[0].get_xlabel() == "pi" and two_d[0].get_ylabel() == "mu"
    assert len(two_d[0].collections) >= 2  # the heat map and the singular-set contour
    one_d = figures["mixture_mu"].axes
    assert one_d[0].get_ylabel() == "log det I" and one_d[1].get_ylabel() == "rank"
