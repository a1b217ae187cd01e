"""lambda_hat's finite-n expectation on reduced-rank regression by blocked Gibbs sampling.

An exact reference for `slt.llc` on reduced-rank regression, independent of slt's samplers:
each block is drawn from its exact Gaussian conditional, so there is no step size, no
discretisation bias and no accept / reject.

Model (`slt.models.reduced_rank_regression(M, H, N)`): y = B A x + eps, eps ~ N(0, s^2 I_N),
A = "W1" (H x M), B = "W2" (N x H). With the sufficient statistics of the data

    S_xx = sum_i x_i x_i^T (M x M),  S_yx = sum_i y_i x_i^T (N x M),  S_yy = sum_i |y_i|^2,

the per-example negative log-likelihood with its constants is

    L_n(A, B) = (S_yy - 2 <S_yx, B A> + <B A S_xx, B A>) / (2 n s^2) + (N / 2) log(2 pi s^2),

(<U, V> = tr(U^T V)). `slt.llc` (include_prior off) samples the local posterior
pi(A, B) ∝ exp(-U(A, B)), U = n beta L_n(A, B) + (gamma / 2) (|A - A*|^2 + |B - B*|^2), and
reports lambda_hat = n beta (E_pi[L_n] - L_n(w*)). Write c = n beta / (n s^2). Up to terms
free of the block drawn:

- A given B. <S_yx, B A> = <B^T S_yx, A> and <B A S_xx, B A> = a^T (B^T B ⊗ S_xx) a with
  a = vec(A) row-major (index h M + m), so U = a^T P_A a / 2 - a^T h_A + const with

      P_A = c (B^T B ⊗ S_xx) + gamma I_{HM},   h_A = c vec(B^T S_yx) + gamma vec(A*):

  A | B ~ N(P_A^{-1} h_A, P_A^{-1}).
- B given A. <S_yx, B A> = <S_yx A^T, B> and <B A S_xx, B A> = sum_k b_k^T (A S_xx A^T) b_k
  over the rows b_k of B, so the rows are independent given A, each with precision
  Q_B = c A S_xx A^T + gamma I_H (H x H), and the mean of B is (c S_yx A^T + gamma B*) Q_B^{-1}:
  B = mean + Z L^{-1} with Z standard normal (N x H) and Q_B = L L^T.

A sweep draws A | B, then B | A. Two estimators of E_pi[n beta (L_n - L_n(w*))]:
the plain one, n beta (L_n(A, B) - L_n(w*)) after each sweep, and the Rao-Blackwellised one,
E[n beta L_n(A, B) | B] - n beta L_n(w*) with B the state before the sweep's A draw: for
A ~ N(mu, P_A^{-1}) the expectation of the quadratic is its value at the mean plus
(c / 2) tr((B^T B ⊗ S_xx) P_A^{-1}) = (HM - gamma tr(P_A^{-1})) / 2, since
c (B^T B ⊗ S_xx) = P_A - gamma I. Both have the same expectation; the second has less variance.

The flat directions of L_n are the GL(H) orbits A -> G A, B -> B G^{-1}; each conditional
draw moves the whole conditional width, but the orbit is traversed by alternating narrow draws,
so the chains still need many sweeps to cross it: the run reports split R-hat and ESS (ArviZ,
through `slt.samplers.run_length.trace_statistics`), a batch-means standard error, the spread
of the chain means, and the same diagnostics for the distance |w - w*| (which moves along the
orbits). The chains start dispersed around w*.

benchmarks/llc_exact_samplers.py (`gibbs_reference`) runs it on that table's problem (same key,
data and w*).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from slt.samplers.run_length import trace_statistics


@dataclass(frozen=True)
class Statistics:
    """The data terms L_n depends on: S_xx (M, M), S_yx (N, M), S_yy, n, the noise scale s."""

    sxx: np.ndarray
    syx: np.ndarray
    syy: float
    n: int
    noise_scale: float

    @classmethod
    def of(cls, data, noise_scale: float) -> Statistics:
        """From reduced-rank-regression data {"x": (n, M), "y": (n, N)}, in float64."""
        x, y = np.asarray(data["x"], np.float64), np.asarray(data["y"], np.float64)
        return cls(x.T @ x, y.T @ x, float(np.sum(y * y)), x.shape[0], float(noise_scale))

    def loss(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """L_n(A, B) (module docstring) for A (..., H, M) and B (..., N, H)."""
        product = b @ a
        fit = (self.syy - 2 * np.sum(self.syx * product, axis=(-2, -1))
               + np.sum((product @ self.sxx) * product, axis=(-2, -1)))
        outputs = self.syx.shape[0]
        return fit / (2 * self.n * self.noise_scale**2) + outputs / 2 * np.log(
            2 * np.pi * self.noise_scale**2)


def a_conditional(stats: Statistics, b, center_a, nbeta: float, gamma: float):
    """Precision P_A (..., HM, HM) and mean (..., H, M) of A | B (module docstring)."""
    c = nbeta / (stats.n * stats.noise_scale**2)
    hidden, inputs = center_a.shape
    gram = np.swapaxes(b, -1, -2) @ b
    precision = c * np.einsum("...hg,mk->...hmgk", gram, stats.sxx).reshape(
        *gram.shape[:-2], hidden * inputs, hidden * inputs) + gamma * np.eye(hidden * inputs)
    linear = (c * np.swapaxes(b, -1, -2) @ stats.syx + gamma * center_a).reshape(
        *gram.shape[:-2], hidden * inputs)
    mean = np.linalg.solve(precision, linear[..., None])[..., 0]
    return precision, mean.reshape(*gram.shape[:-2], hidden, inputs)


def b_conditional(stats: Statistics, a, center_b, nbeta: float, gamma: float):
    """Row precision Q_B (..., H, H) and mean (..., N, H) of B | A (module docstring)."""
    c = nbeta / (stats.n * stats.noise_scale**2)
    precision = c * a @ stats.sxx @ np.swapaxes(a, -1, -2) + gamma * np.eye(a.shape[-2])
    linear = c * stats.syx @ np.swapaxes(a, -1, -2) + gamma * center_b
    mean = np.swapaxes(np.linalg.solve(precision, np.swapaxes(linear, -1, -2)), -1, -2)
    return precision, mean


def gaussian_draw(rng, mean, precision):
    """A draw of N(mean, precision^{-1}), batched: mean + L^{-T} z with precision = L L^T and
    z standard normal (covariance L^{-T} L^{-1} = precision^{-1}).

    Args:
      rng: a NumPy Generator.
      mean: (..., k).
      precision: (..., k, k), symmetric positive definite; broadcast against mean's batch.

    Returns:
      The draw (..., k) and tr(precision^{-1}) = |L^{-1}|_F^2 (precision's batch shape).
    """
    factor = np.linalg.cholesky(precision)
    inverse = np.linalg.inv(factor)
    noise = rng.standard_normal(mean.shape)
    return mean + np.einsum("...ji,...j->...i", inverse, noise), np.sum(inverse**2, (-2, -1))


@dataclass(frozen=True)
class GibbsResult:
    """The Gibbs traces, shape (chain, draw), and their statistics.

    Attributes:
      rao_blackwell, plain: the two estimators' traces of n beta (L_n - L_n(w*)) (module
        docstring).
      distance: |w - w*| after each sweep (as `slt.LLCResult.distance_trace`): it moves
        along the GL(H) orbits, the slowest coordinate of the chains.
      mean, std_error, ess, rhat: of `rao_blackwell` (`trace_statistics`: sd / sqrt(bulk
        ESS), split R-hat).
      plain_mean, plain_std_error: of `plain`.
      batch_std_error: `batch_means_std_error` of `rao_blackwell`.
      chain_means: each chain's mean of `rao_blackwell`.
      distance_mean, distance_ess, distance_rhat: of `distance`.
      run_time: seconds of sampling.
    """

    rao_blackwell: np.ndarray
    plain: np.ndarray
    distance: np.ndarray
    mean: float
    std_error: float
    ess: float
    rhat: float
    plain_mean: float
    plain_std_error: float
    batch_std_error: float
    chain_means: np.ndarray
    distance_mean: float
    distance_ess: float
    distance_rhat: float
    run_time: float

    @property
    def between_chain_std_error(self) -> float:
        """sd of the chain means / sqrt(number of chains)."""
        return float(self.chain_means.std(ddof=1) / np.sqrt(self.chain_means.size))


def batch_means_std_error(values: np.ndarray, num_batches: int = 20) -> float:
    """Standard error of the mean of a (chain, draw) trace from the means of `num_batches`
    consecutive batches per chain (valid when a batch is much longer than the correlation
    time): sd of the batch means / sqrt(their number)."""
    chains, draws = values.shape
    size = draws // num_batches
    means = values[:, : size * num_batches].reshape(chains * num_batches, size).mean(1)
    return float(means.std(ddof=1) / np.sqrt(means.size))


def gibbs_llc(stats: Statistics, center, *, nbeta: float, gamma: float = 1.0,
              num_chains: int = 8, num_warmup: int = 1000, num_samples: int = 20_000,
              init_spread: float = 1.0, seed: int = 0) -> GibbsResult:
    """E_pi[n beta (L_n - L_n(w*))] on reduced-rank regression by blocked Gibbs sampling.

    Args:
      stats: the data terms (`Statistics.of`).
      center: w* as {"W1": A* (H, M), "W2": B* (N, H)} (slt's parameter names).
      nbeta, gamma: n beta and gamma of the local posterior (`slt.LocalPosterior`).
      num_chains, num_warmup, num_samples: independent chains, sweeps dropped, sweeps kept.
      init_spread: chains start at w* + init_spread * N(0, I), dispersed on the localizer's
        scale, so that R-hat and the chain means can show a chain that has not forgotten its
        start.
      seed: NumPy seed.

    Returns:
      A `GibbsResult`.
    """
    center_a = np.asarray(center["W1"], np.float64)
    center_b = np.asarray(center["W2"], np.float64)
    rng = np.random.default_rng(seed)
    a = center_a + init_spread * rng.standard_normal((num_chains, *center_a.shape))
    b = center_b + init_spread * rng.standard_normal((num_chains, *center_b.shape))
    offset = nbeta * float(stats.loss(center_a, center_b))
    traces = np.empty((3, num_chains, num_samples))  # Rao-Blackwellised, plain, distance
    start = time.perf_counter()
    for sweep in range(num_warmup + num_samples):
        precision, mean = a_conditional(stats, b, center_a, nbeta, gamma)
        draw, spread = gaussian_draw(rng, mean.reshape(num_chains, -1), precision)
        kept = sweep - num_warmup
        if kept >= 0:
            traces[0, :, kept] = (nbeta * stats.loss(mean, b)
                                  + (center_a.size - gamma * spread) / 2 - offset)
        a = draw.reshape(num_chains, *center_a.shape)
        precision, mean = b_conditional(stats, a, center_b, nbeta, gamma)
        b, _ = gaussian_draw(rng, mean, precision[:, None])  # the rows share one precision
        if kept >= 0:
            traces[1, :, kept] = nbeta * stats.loss(a, b) - offset
            traces[2, :, kept] = np.sqrt(np.sum((a - center_a) ** 2, (1, 2))
                                         + np.sum((b - center_b) ** 2, (1, 2)))
    run_time = time.perf_counter() - start
    mean_value, std_error, ess, rhat = trace_statistics(traces[0])
    plain_mean, plain_std_error, _, _ = trace_statistics(traces[1])
    distance_mean, _, distance_ess, distance_rhat = trace_statistics(traces[2])
    return GibbsResult(*traces, mean_value, std_error, ess, rhat, plain_mean, plain_std_error,
                       batch_means_std_error(traces[0]), traces[0].mean(1),
                       distance_mean, distance_ess, distance_rhat, run_time)
