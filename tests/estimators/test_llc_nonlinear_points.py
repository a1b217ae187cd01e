"""The constructed points of benchmarks/llc_nonlinear.py have the Hessian rank their theory
says (quick: small n; the benchmark records the same check at its own n)."""

from __future__ import annotations

import functools

import jax
import pytest

from benchmarks import llc_nonlinear as bench

N = 500  # enough rows for every rank here (d <= 57); the symmetries are exact at any n


@pytest.mark.slow  # 14 s of CPU with its imports: run with make test-slow
@pytest.mark.parametrize("build, d, rank", [
    (functools.partial(bench._mlp_teacher, 15, [2, 4, 1], "relu", N, nullity_per_unit=1),
     17, 13),
    (functools.partial(bench._zero_outgoing, 18, [3, 6, 1], N), 31, 27),
    (functools.partial(bench._dead_relu, 19, [3, 6, 1], N), 31, 21),
    (functools.partial(bench._attention, 21, 6, 3, 8, N), 57, 33),
], ids=["relu rescaling", "tanh zero outgoing", "relu dead unit",
        "attention"])
def test_rank_matches_theory(build, d, rank):
    built = build()
    geometry = bench.rank_and_linearized(built, nbeta=N / 6.9)
    assert (geometry["d"], geometry["rank"]) == (d, rank)
    assert geometry["rank_matches"]
    assert built.lam == rank / 2
    if geometry["largest_null_eig"] is not None:  # an exact zero, far below the kept ones
        assert geometry["largest_null_eig"] < 1e-8 * geometry["smallest_nonnull_eig"]


def test_cached_minimum_checked_against_the_data():
    entry = {"loss": -0.8198, "jax": "0.10.2"}
    bench._check_cached_minimum("w", entry, -0.8198)  # the data it was trained on
    with pytest.raises(RuntimeError, match="the data differ"):
        bench._check_cached_minimum("w", entry, 74.47)  # float32 draws, measured


def test_points_refuse_float32():
    with jax.enable_x64(False), pytest.raises(RuntimeError, match="float64"):
        bench._build_cached.__wrapped__("tanh-2-4-1")
