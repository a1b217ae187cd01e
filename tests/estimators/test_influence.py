"""Loss kernel, Bayesian influence functions and susceptibilities against closed forms.

Gaussian linear regression with unit noise, w* the MLE, no prior, full-batch SGLD: with
delta = w - w*, the local posterior's log density is -(1/2) delta^T A delta, A = beta X^T X +
gamma I (beta = nbeta / n; the linear term vanishes at the MLE). Full-batch SGLD is then the
linear recursion delta' = (I - eps A / 2) delta + sqrt(eps) xi, whose draws are exactly
Gaussian with mean 0 (it starts at 0) and, once warm, the covariance Sigma solving
Sigma = (I - eps A / 2) Sigma (I - eps A / 2) + eps I, i.e. Sigma = (A (I - eps A / 4))^{-1}
(restricted to a set of weights: the same on that block, 0 elsewhere). With residuals
r_i = y_i - x_i^T w* and u_i = x_i^T delta, jointly Gaussian with mean 0 and covariance
S_ij = x_i^T Sigma x_j:

    l_i = l_i(w*) - r_i u_i + u_i^2 / 2,
    E[l_i] - l_i(w*) = S_ii / 2,
    Cov(l_i, l_j) = r_i r_j S_ij + S_ij^2 / 2

(Isserlis: Cov(u_i, u_j^2) = 0, Cov(u_i^2, u_j^2) = 2 S_ij^2). The sampled values must match
within 4 standard errors (batch means over 32 chains x 7 blocks of draws, one per chunk of
500 steps: about 220 degrees of freedom), entry by entry.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt
from slt import LocalPosterior, Problem, RunPlan
from slt.samplers import SGLD

N, NBETA, GAMMA, STEP = 40, 10.0, 1.0, 0.02
RUN = dict(posterior=LocalPosterior(gamma=GAMMA, nbeta=NBETA),
           sampler=SGLD(step_size=STEP, batch_size=N, mala_every=0),
           plan=RunPlan(num_chains=32, num_samples=3000, num_warmup=200, progress=False))


def _gaussian_nll(params, batch):
    return 0.5 * (batch["y"] - batch["x"] @ params["w"]) ** 2 + 0.5 * jnp.log(2 * jnp.pi)


@pytest.fixture(scope="module")
def regression():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N, 2))
    y = x @ np.array([1.0, -0.5]) + rng.standard_normal(N)
    w_star = np.linalg.lstsq(x, y, rcond=None)[0]
    queries = rng.standard_normal((3, 2))
    query = {"x": queries, "y": queries @ np.array([1.0, -0.5]) + np.array([2.0, -1.0, 0.0])}
    problem = Problem.from_loss(_gaussian_nll, {"w": jnp.zeros(2)}, {"x": x, "y": y})
    return problem, {"w": jnp.asarray(w_star)}, x, y, w_star, query


def _stationary_covariance(x, mask=None):
    """Sigma = (A (I - eps A / 4))^{-1} on the sampled block (module doc)."""
    mask = np.ones(x.shape[1], bool) if mask is None else mask
    block = NBETA / N * x[:, mask].T @ x[:, mask] + GAMMA * np.eye(mask.sum())
    sigma = np.zeros((x.shape[1], x.shape[1]))
    sigma[np.ix_(mask, mask)] = np.linalg.inv(block @ (np.eye(mask.sum()) - STEP * block / 4))
    return sigma


def _kernel(x_a, r_a, x_b, r_b, sigma):
    """Cov(l_i, l_j) for examples (x_a, r_a) x (x_b, r_b): r_i r_j S_ij + S_ij^2 / 2."""
    s = x_a @ sigma @ x_b.T
    return np.outer(r_a, r_b) * s + 0.5 * s**2


def _within(sampled, exact, std_error, k=4.0):
    z = (sampled - exact) / std_error
    assert np.all(np.abs(z) < k), f"largest |z| {np.max(np.abs(z)):.2f}:\n{z}"


def test_loss_kernel_and_loss_gain_match_the_gaussian_closed_form(regression):
    problem, params, x, y, w_star, _ = regression
    examples = np.array([0, 3, 7, 12, 25])
    result = slt.loss_kernel(problem, params, jax.random.key(1), examples, **RUN)
    sigma = _stationary_covariance(x)
    r = y[examples] - x[examples] @ w_star
    exact = _kernel(x[examples], r, x[examples], r, sigma)
    upper = np.triu_indices(len(examples))
    _within(result.covariance[upper], exact[upper], result.covariance_std_error[upper])
    _within(result.loss_gain, 0.5 * np.diag(x[examples] @ sigma @ x[examples].T),
            result.loss_gain_std_error)
    # the error bars are tight enough to mean something: a few percent of the diagonal
    assert np.all(result.covariance_std_error.diagonal() < 0.05 * exact.diagonal())
    np.testing.assert_allclose(result.loss_at_center, -problem.loglik(params, problem.take(
        jnp.asarray(examples))), rtol=1e-12)
    np.testing.assert_allclose(result.correlation.diagonal(), 1.0, rtol=1e-12)
    assert result.num_samples == 3000 and result.num_chains == 32
    assert np.all(result.rhat < 1.05) and not result.warnings
    assert list(result.hardest(2).index) == list(examples[np.argsort(-result.loss_gain)[:2]])


def test_bif_matches_the_gaussian_closed_form(regression):
    problem, params, x, y, w_star, query = regression
    train = np.array([1, 4, 9, 30])
    result = slt.bif(problem, params, jax.random.key(2), query, train=train, **RUN)
    r_train = y[train] - x[train] @ w_star
    r_query = query["y"] - query["x"] @ w_star
    exact = -_kernel(x[train], r_train, query["x"], r_query, _stationary_covariance(x))
    _within(result.influence, exact, result.std_error)
    assert result.influence.shape == (4, 3) and result.query_indices is None
    supporting = result.supporting(query=1, k=2)
    assert list(supporting.index) == list(train[np.argsort(result.influence[:, 1])[:2]])
    assert supporting["influence"].is_monotonic_increasing
    assert result.opposing(query=1, k=1)["influence"].item() == result.influence[:, 1].max()
    np.testing.assert_allclose(result.influence_function(), NBETA * result.influence)


def test_with_every_default_the_kernel_and_bif_are_exact_within_three_standard_errors(
        regression):
    """sampler="auto" runs the exact MALA at this n, so the draws follow the local posterior
    itself, N(w*, Sigma) with Sigma = (n beta / n X^T X + gamma I)^-1 (no step-size term; the
    defaults: gamma = 1, n beta = n / log n, the plan's adaptive length): every entry within
    3 of its reported standard errors (over 12 keys of benchmarks/observed_defaults.py: 3.9%
    of the kernel's entries beyond 2 se, 0.0% beyond 3)."""
    problem, params, x, y, w_star, query = regression
    sigma = np.linalg.inv(1 / np.log(N) * x.T @ x + np.eye(2))
    residuals = y - x @ w_star
    examples, train = np.array([0, 3, 7, 12, 25]), np.array([1, 4, 9, 30])
    quiet = RunPlan(progress=False)
    kernel = slt.loss_kernel(problem, params, jax.random.key(6), examples, plan=quiet)
    influence = slt.bif(problem, params, jax.random.key(7), query, train=train, plan=quiet)
    assert kernel.run.sampler == influence.run.sampler == "MALA"
    exact = _kernel(x[examples], residuals[examples], x[examples], residuals[examples], sigma)
    upper = np.triu_indices(len(examples))
    _within(kernel.covariance[upper], exact[upper], kernel.covariance_std_error[upper], k=3.0)
    r_query = query["y"] - query["x"] @ w_star
    _within(influence.influence, -_kernel(x[train], residuals[train], query["x"], r_query,
                                          sigma), influence.std_error, k=3.0)
    assert not kernel.warnings and not influence.warnings


def test_auto_is_mala_up_to_sixteen_minibatches_of_examples_and_sgld_beyond():
    from slt.estimators.local.observed import EXACT_MAX_BATCHES, attribution_sampler
    from slt.samplers import MALA

    def problem_of(n):
        return Problem.from_loss(_gaussian_nll, {"w": jnp.zeros(2)},
                                 {"x": np.zeros((n, 2)), "y": np.zeros(n)})

    largest = EXACT_MAX_BATCHES * SGLD().batch_size
    assert attribution_sampler(problem_of(largest), "auto") == MALA()
    assert attribution_sampler(problem_of(largest + 1), "auto") == SGLD()
    chosen = SGLD(step_size=1e-3)
    assert attribution_sampler(problem_of(10), chosen) is chosen
    with pytest.raises(slt.InputError, match="sampler must be \"auto\" or"):
        attribution_sampler(problem_of(10), "mala")


def test_susceptibilities_match_the_gaussian_closed_form(regression):
    """chi_{C,S} = -Cov_C(L_q, L_S - L_q) is a bilinear form of the kernel of the chains
    restricted to C (Sigma on C's block); here q is all training data, S a training subset or
    the query set, C one weight or both."""
    problem, params, x, y, w_star, query = regression
    components = {"w0": {"w": np.array([True, False])}, "both": {"w": np.array([True, True])}}
    first = np.arange(10)
    result = slt.susceptibilities(problem, params, jax.random.key(3),
                                  {"first": first, "query": query}, components=components,
                                  **RUN)
    x_all = np.concatenate([x, query["x"]])
    r_all = np.concatenate([y - x @ w_star, query["y"] - query["x"] @ w_star])
    reference = np.r_[np.full(N, 1 / N), np.zeros(3)]
    shifts = np.stack([np.r_[np.isin(np.arange(N), first) / 10, np.zeros(3)],
                       np.r_[np.zeros(N), np.full(3, 1 / 3)]]) - reference
    for row, mask in enumerate(mask["w"] for mask in components.values()):
        kernel = _kernel(x_all, r_all, x_all, r_all, _stationary_covariance(x, mask))
        _within(result.susceptibility[row], -shifts @ kernel @ reference, result.std_error[row])
    assert result.table().shape == (2, 2) and list(result.table().columns) == ["first", "query"]
    assert result.reference_size == N and result.subset_sizes.tolist() == [10, 3]
    assert result.runs[0].sampled_weights == 1 and result.runs[1].sampled_weights == 2


def _logistic_nll(params, batch):
    logits = batch["x"] @ params["w"]
    return jax.nn.softplus(logits) - batch["y"] * logits


def test_regular_limit_bif_is_the_classical_influence_function():
    """Logistic regression at n = 2000 (n beta = n / log n = 263): n beta BIF against the
    classical influence function -grad l_q^T H^{-1} grad l_i with the exact Hessian of L_n at
    the MLE, over every training example x 5 test queries. Expected deviations: the SGLD step
    inflates the posterior covariance by about eps A / 4 (+3% here) and gamma / (n beta)
    shrinks it (-2%); the issue asks for correlation >= 0.95 and the scale within 10%
    (measured: 0.9996 and 0.98). The losses are observed every 5th step: the chains'
    autocorrelation time is about 1 / (eps n beta h_min) = 20 steps, so little is lost."""
    rng = np.random.default_rng(4)
    n, w_true = 2000, np.array([1.0, -1.0, 0.5])
    x = rng.standard_normal((n + 5, 3))
    y = (rng.random(n + 5) < 1 / (1 + np.exp(-x @ w_true))).astype(float)
    w = np.zeros(3)
    for _ in range(30):  # Newton's method: the MLE to machine precision
        p = 1 / (1 + np.exp(-x[:n] @ w))
        hessian = (x[:n] * (p * (1 - p))[:, None]).T @ x[:n] / n
        w = w - np.linalg.solve(hessian, x[:n].T @ (p - y[:n]) / n)
    p = 1 / (1 + np.exp(-x @ w))
    hessian = (x[:n] * (p[:n] * (1 - p[:n]))[:, None]).T @ x[:n] / n
    gradients = (p - y)[:, None] * x  # grad l at w*, training examples then queries
    classical = -gradients[:n] @ np.linalg.solve(hessian, gradients[n:].T)
    problem = Problem.from_loss(_logistic_nll, {"w": jnp.zeros(3)}, {"x": x[:n], "y": y[:n]})
    result = slt.bif(problem, {"w": jnp.asarray(w)}, jax.random.key(5),
                     {"x": x[n:], "y": y[n:]},
                     sampler=SGLD(step_size=2e-3, batch_size=n, mala_every=0),
                     plan=RunPlan(num_chains=8, num_samples=2000, num_warmup=500,
                                  observe_every=5, progress=False))
    scaled = result.influence_function()
    correlation = np.corrcoef(scaled.ravel(), classical.ravel())[0, 1]
    scale = np.sum(scaled * classical) / np.sum(classical**2)
    assert correlation >= 0.95 and abs(scale - 1) <= 0.10, (correlation, scale)
    assert result.influence.shape == (n, 5)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda p, w: slt.loss_kernel(p, w, jax.random.key(0), np.array([], int)), "empty"),
        (lambda p, w: slt.loss_kernel(p, w, jax.random.key(0), np.array([0, 40])),
         "index 40 outside the training data"),
        (lambda p, w: slt.loss_kernel(p, w, jax.random.key(0), np.array([0.5])),
         "integer indices"),
        (lambda p, w: slt.bif(p, w, jax.random.key(0), {"x": np.zeros((2, 3)),
                                                        "y": np.zeros(2)}),
         r"query\['x'\] has shape \(2, 3\); examples of data\['x'\] have shape \(m, 2\)"),
        (lambda p, w: slt.bif(p, w, jax.random.key(0), {"x": np.zeros((2, 2))}),
         r"query has keys \['x'\]; the problem's data have \['x', 'y'\]"),
        (lambda p, w: slt.bif(p, w, jax.random.key(0), {"x": np.zeros((2, 2)),
                                                        "y": np.zeros(3)}),
         "different numbers of examples"),
        (lambda p, w: slt.bif(p, w, jax.random.key(0), np.array([0]),
                              plan=RunPlan(observe_every=0)), "observe_every"),
        (lambda p, w: slt.bif(p, w, jax.random.key(0), np.array([0]),
                              sampler=SGLD(extrapolate=True)),
         r"SGLD\(extrapolate=True\) is not supported"),
        (lambda p, w: slt.susceptibilities(p, w, jax.random.key(0), [np.arange(3)],
                                           components={"w0": {"w": np.array([True])}}),
         r"part 'w0': restrict_to\['w'\] has shape \(1,\)"),
        (lambda p, w: slt.susceptibilities(p, w, jax.random.key(0), {}), "subsets is empty"),
        (lambda p, w: slt.susceptibilities(p, w, jax.random.key(0),
                                           {"none": np.array([], int)}),
         "subset 'none' is empty"),
        (lambda p, w: slt.susceptibilities(p, w, jax.random.key(0), slt.DataShifts(
            [np.arange(2)], reference={"x": np.zeros((1, 2)), "y": np.zeros(1)})),
         "reference must be None or a 1-D array of indices"),
        (lambda p, w: slt.susceptibilities(p, w, jax.random.key(0),
                                           {"far": np.array([0, 99])}),
         "subset 'far' has index 99 outside the training data"),
        (lambda p, w: slt.susceptibilities(p, w, jax.random.key(0), slt.DataShifts(
            [np.arange(2)], reference=np.array([0.5]))),
         "reference must be a 1-D array of integer indices"),
    ],
)
def test_bad_input_is_refused_before_sampling(regression, call, message):
    problem, params, *_ = regression
    with pytest.raises(slt.InputError, match=message):
        call(problem, params)


def test_susceptibilities_gather_the_observed_examples_once(regression, monkeypatch):
    """Subsets and a reference given as indices are checked, not gathered one by one: an eager
    gather compiles once per number of indices (~30 ms on CPU; ten digit classes of different
    sizes cost 2.4 s of a notebook's 5.6 s call). Only the union of their indices is taken."""
    from slt.estimators.local.susceptibilities import _readouts

    problem, _, x, *_ = regression
    taken = []
    take = type(problem).take
    monkeypatch.setattr(type(problem), "take",
                        lambda self, indices, data=None: taken.append(len(indices))
                        or take(self, indices, data))
    subsets = {f"S{size}": np.arange(size) for size in range(1, 8)}
    examples, x_readout, y_readout, sizes = _readouts(problem, subsets, np.arange(2, 30))
    assert taken == [30]  # the union 0..29, once
    np.testing.assert_array_equal(examples["x"], x[:30])
    assert sizes.tolist() == [28, *range(1, 8)]
    np.testing.assert_allclose(x_readout.sum(), 1.0)
    np.testing.assert_allclose(y_readout.sum(axis=1), 0.0, atol=1e-12)
