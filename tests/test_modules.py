"""Whole Equinox modules as params (`slt.modules`): the float arrays are sampled, the other
leaves (activation functions, a dropout's rate and flag) held fixed; the same lambda_hat as the
explicit `eqx.partition`, bit for bit, with the same key."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt

eqx = pytest.importorskip("equinox")

PLAN = slt.RunPlan(num_chains=2, num_samples=20, num_warmup=10, progress=False)
SGLD = slt.samplers.SGLD(step_size=1e-4)


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


def test_a_whole_module_gives_the_partitioned_lambda_hat(case):
    model, data = case
    problem = slt.Problem.from_loss(nll, model, data)
    weights, fixed = eqx.partition(model, eqx.is_inexact_array)
    partitioned = slt.Problem.from_loss(lambda w, batch: nll(eqx.combine(w, fixed), batch),
                                        weights, data)
    assert problem.dim == partitioned.dim == 2 * 3 + 3 + 3 + 1
    assert problem.site_names == partitioned.site_names
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", slt.LocalRunWarning)
        whole = slt.llc(problem, model, jax.random.key(3), sampler=SGLD, plan=PLAN)
        split = slt.llc(partitioned, weights, jax.random.key(3), sampler=SGLD, plan=PLAN)
        table = slt.llc_table(problem, model, jax.random.key(3),
                              {"layer 0": slt.parts.layer(model, 0)}, sampler=SGLD, plan=PLAN)
    np.testing.assert_array_equal(whole.llc_trace(), split.llc_trace())
    assert table.summary()["sampled_weights"].item() == 2 * 3 + 3
    back = problem.unravel(problem.ravel(model))  # a module again, its activation kept
    np.testing.assert_array_equal(jax.vmap(back)(data["x"]), jax.vmap(model)(data["x"]))
    assert float(problem.loss(model)) == pytest.approx(float(jnp.mean(nll(model, data))))


def test_an_attention_module_with_a_dropout_flag_is_accepted():
    module = eqx.nn.MultiheadAttention(2, 4, key=jax.random.key(0))  # dropout: a float, a bool
    x = jax.random.normal(jax.random.key(1), (8, 3, 4))
    data = {"x": x, "y": jax.vmap(lambda s: module(s, s, s))(x)}

    def attention_nll(m, batch):
        out = jax.vmap(lambda s: m(s, s, s))(batch["x"])
        return jnp.sum((out - batch["y"]) ** 2 / 2, axis=(1, 2))

    problem = slt.Problem.from_loss(attention_nll, module, data)
    assert problem.dim == sum(np.size(leaf) for leaf in jax.tree.leaves(module)
                              if eqx.is_inexact_array(leaf))


def test_other_pytrees_still_refuse_non_float_leaves(case):
    _, data = case
    with pytest.raises(slt.InputError, match=r"params\['flag'\] has dtype bool"):
        slt.Problem.from_loss(lambda p, b: jnp.zeros(32), {"w": jnp.ones(2),
                                                           "flag": np.array(True)}, data)
    model, _ = case
    problem = slt.Problem.from_loss(nll, model, data)
    with pytest.raises(slt.InputError, match="structure of the module the problem was built"):
        problem.loss(eqx.nn.MLP(2, 1, 3, 2, key=jax.random.key(0)))
