"""Whole Equinox modules as params (`slt.modules`): the float arrays are sampled, the other
leaves (activation functions, a dropout's rate and flag) held fixed; the same lambda_hat as the
explicit `eqx.partition`, bit for bit, with the same key; head masks through `llc_table`."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt

eqx = pytest.importorskip("equinox")

PLAN = slt.RunPlan(num_chains=2, num_samples=20, num_warmup=10, progress=False)
SGLD = slt.samplers.SGLD(step_size=1e-4, mala_every=0)  # no MALA check: one program less


def nll(model, batch):
    out = jax.vmap(model)(batch["x"])
    return jnp.sum((out - batch["y"]) ** 2 / 2 + 0.5 * jnp.log(2 * jnp.pi), axis=1)


@pytest.fixture(scope="module")
def case():
    model = eqx.nn.MLP(2, 1, 3, 1, activation=jax.nn.tanh, key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (32, 2))
    data = {"x": x, "y": jax.vmap(model)(x) + 0.1 * jax.random.normal(jax.random.key(2),
                                                                        (32, 1))}
    return model, data


def test_a_module_with_an_activation_goes_in_whole(case):
    model, data = case
    problem = slt.Problem.from_loss(nll, model, data)
    assert problem.dim == 2 * 3 + 3 + 3 + 1
    assert problem.site_names == ("layers/0/weight", "layers/0/bias", "layers/1/weight",
                                  "layers/1/bias")
    back = problem.unravel(problem.ravel(model))  # a module again, its activations kept
    np.testing.assert_array_equal(jax.vmap(back)(data["x"]), jax.vmap(model)(data["x"]))
    assert float(problem.loss(model)) == pytest.approx(float(jnp.mean(nll(model, data))))


@pytest.fixture(scope="module")
def attention_case():
    """A whole `eqx.nn.MultiheadAttention` (its dropout holds a float rate and a bool flag)
    and the problem of its `eqx.partition(module, eqx.is_inexact_array)` weights."""
    module = eqx.nn.MultiheadAttention(2, 4, qk_size=2, vo_size=2, key=jax.random.key(0))
    x = jax.random.normal(jax.random.key(1), (8, 3, 4))
    data = {"x": x, "y": jax.vmap(lambda s: module(s, s, s))(x)
            + 0.1 * jax.random.normal(jax.random.key(2), (8, 3, 4))}

    def attention_nll(m, batch):
        out = jax.vmap(lambda s: m(s, s, s))(batch["x"])
        return jnp.sum((out - batch["y"]) ** 2 / 2 + 0.5 * jnp.log(2 * jnp.pi), axis=(1, 2))

    weights, fixed = eqx.partition(module, eqx.is_inexact_array)
    whole = slt.Problem.from_loss(attention_nll, module, data)
    split = slt.Problem.from_loss(lambda w, b: attention_nll(eqx.combine(w, fixed), b),
                                  weights, data)
    return module, weights, whole, split


def test_a_whole_module_is_the_partitioned_problem(attention_case):
    """The samplers see a problem only through ravel, unravel and loglik: equal at random
    points, the chains of the two problems are the same (run bit for bit: the slow test)."""
    module, weights, whole, split = attention_case
    assert whole.dim == split.dim == 4 * 4 * 4
    np.testing.assert_array_equal(whole.ravel(module), split.ravel(weights))
    points = jax.random.normal(jax.random.key(4), (3, whole.dim))
    for point in points:
        np.testing.assert_array_equal(whole.loglik(whole.unravel(point), whole.data),
                                      split.loglik(split.unravel(point), split.data))


def run_heads(problem, params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", slt.LocalRunWarning)
        return slt.llc_table(problem, params, jax.random.key(3),
                             slt.parts.heads(params, "equinox", 2), sampler=SGLD, plan=PLAN)


def test_a_head_mask_runs_in_llc_table_on_a_whole_module(attention_case):
    module, _, whole, _ = attention_case
    table = run_heads(whole, module)
    assert table.parts == ("H0", "H1")
    counts = slt.parts.preview(module, slt.parts.heads(module, "equinox", 2)).loc["total"]
    # 4 projections (4, 4), half of each a head
    assert list(table.summary()["sampled_weights"]) == [counts["H0"], counts["H1"]] == [
        32, 32]


@pytest.mark.slow
def test_a_whole_module_gives_the_partitioned_lambda_hat_bit_for_bit(attention_case):
    module, weights, whole, split = attention_case
    tables = [run_heads(whole, module), run_heads(split, weights)]
    for head in ("H0", "H1"):
        np.testing.assert_array_equal(tables[0][head].llc_trace(), tables[1][head].llc_trace())


def test_other_pytrees_still_refuse_non_float_leaves(case):
    _, data = case
    with pytest.raises(slt.InputError, match=r"params\['flag'\] has dtype bool"):
        slt.Problem.from_loss(lambda p, b: jnp.zeros(32), {"w": jnp.ones(2),
                                                           "flag": np.array(True)}, data)
    model, _ = case
    problem = slt.Problem.from_loss(nll, model, data)
    with pytest.raises(slt.InputError, match="structure of the module the problem was built"):
        problem.loss(eqx.nn.MLP(2, 1, 3, 2, key=jax.random.key(0)))
