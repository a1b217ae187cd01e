"""`slt.parts.heads` on real attention modules (Flax NNX, Equinox) and on the TransformerLens,
GPT-NeoX and grouped-query layouts, checked by what attention computes: with the output bias
at zero, multi-head attention is the sum of its heads' contributions, each a function of that
head's weights only. So running the module with only head h's weights kept (all others zero:
a head whose value and output weights are zero adds nothing) gives head h's contribution, and
these sum to the whole output exactly when every head's mask holds exactly its own q, k, v and
output weights. A wrong split (GPT-NeoX's fused axis read as (3 h d)) fails it. A head mask
in `llc_table`, end to end: tests/test_modules.py."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import slt
from slt.parts.select import is_weight

eqx = pytest.importorskip("equinox")

H, D, DH, T = 2, 4, 2, 3  # heads, model width, head width, sequence length


def keep(params, mask):
    """params with every weight outside `mask` set to zero (other leaves as they are)."""
    return jax.tree_util.tree_map(
        lambda leaf, m: jnp.where(m, leaf, 0.0) if is_weight(leaf) else leaf, params, mask)


def assert_heads_sum_to_the_module(forward, params, parts):
    """`forward(params)` the module's output (jitted: one compilation for the H + 1 calls)."""
    forward = eqx.filter_jit(forward)
    whole = forward(keep(params, slt.parts.union(*parts.values())))
    contributions = [forward(keep(params, mask)) for mask in parts.values()]
    assert all(float(jnp.abs(c).max()) > 1e-3 for c in contributions)  # no head is empty
    np.testing.assert_allclose(sum(contributions), whole, rtol=1e-5, atol=1e-6)


def assert_disjoint_and_even(params, parts, split_leaves):
    table = slt.parts.preview(params, parts)
    assert table.loc["total", "shared"] == 0
    for leaf in split_leaves:  # H heads (of its module) hold 1/H of each leaf split by heads
        counts = [count for count in table.loc[leaf, list(parts)] if count]
        assert counts == [table.loc[leaf, "weights"] // H] * H


def normal(seed, *shapes):
    """Standard normal float32 arrays (NumPy's generator: no JAX program per shape)."""
    rng = np.random.default_rng(seed)
    arrays = [rng.normal(size=shape).astype(np.float32) for shape in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_like(shapes, seed):
    return dict(zip(shapes, normal(seed, *shapes.values()), strict=True))


def softmax_attention(q, k, v):
    """q, k, v (T, H, d) -> (T, H, d)."""
    weights = jax.nn.softmax(jnp.einsum("thd,shd->hts", q, k) / np.sqrt(q.shape[-1]), axis=-1)
    return jnp.einsum("hts,shd->thd", weights, v)


X = normal(9, (T, D))

# ---------------------------------------------------------------- TransformerLens layout

TL_BLOCK = {"W_Q": (H, D, DH), "W_K": (H, D, DH), "W_V": (H, D, DH), "W_O": (H, DH, D),
            "b_Q": (H, DH), "b_K": (H, DH), "b_V": (H, DH), "b_O": (D,)}


@pytest.fixture(scope="module")
def transformer():
    """The layout of the 2-layer attention-only transformer: embed, pos_embed, blocks,
    unembed, b_U."""
    return {"embed": normal(0, (5, D)), "pos_embed": normal(1, (T, D)),
            "blocks": [random_like(TL_BLOCK, 2), random_like(TL_BLOCK, 3)],
            "unembed": np.ones((D, 5), np.float32), "b_U": np.ones(5, np.float32)}


def tl_attention(block):
    q, k, v = (jnp.einsum("td,hde->the", X, block[f"W_{n}"]) + block[f"b_{n}"]
               for n in "QKV")
    return jnp.einsum("the,hed->td", softmax_attention(q, k, v), block["W_O"]) + block["b_O"]


def test_transformer_lens_heads(transformer):
    parts = slt.parts.heads(transformer, "transformer_lens", H)
    assert list(parts) == ["L0.H0", "L0.H1", "L1.H0", "L1.H1"]
    for layer in (0, 1):
        layer_parts = {name: mask for name, mask in parts.items() if name.startswith(f"L{layer}")}
        assert_heads_sum_to_the_module(
            lambda p, layer=layer: tl_attention(p["blocks"][layer]), transformer, layer_parts)
    assert_disjoint_and_even(transformer, parts,
                             [f"blocks/{i}/{n}" for i in (0, 1) for n in TL_BLOCK if n != "b_O"])
    # the heads are the attention weights but the output biases, which no head owns
    attention = slt.parts.difference(slt.parts.attention(transformer),
                                     slt.parts.matching(transformer, "*/b_O"))
    union = slt.parts.union(*parts.values())
    assert all(np.array_equal(a, b) for a, b in zip(jax.tree.leaves(union),
                                                    jax.tree.leaves(attention), strict=True))
    table = slt.parts.preview(transformer, parts)
    assert table.loc["blocks/0/b_O", "unselected"] == D
    assert table.loc["total", "L1.H1"] == sum(np.prod(s) for n, s in TL_BLOCK.items()
                                              if n != "b_O") // H


# ---------------------------------------------------------------- Flax NNX MultiHeadAttention


def test_flax_nnx_heads():
    nnx = pytest.importorskip("flax.nnx")
    module = nnx.MultiHeadAttention(num_heads=H, in_features=D, qkv_features=H * DH,
                                    out_features=D, decode=False, rngs=nnx.Rngs(0))
    graphdef, state = nnx.split(module, nnx.Param)
    state = jax.tree.map(lambda leaf: leaf + 0.5, state)  # nonzero biases
    parts = slt.parts.heads(state, "flax_nnx", H)
    assert list(parts) == ["H0", "H1"]
    assert_heads_sum_to_the_module(lambda s: nnx.merge(graphdef, s)(X), state, parts)
    assert_disjoint_and_even(state, parts, [f"{n}/{kind}/value" for n in ("query", "key",
                             "value") for kind in ("kernel", "bias")] + ["out/kernel/value"])
    # the State goes through Problem.from_loss, and a head's mask to the sampled weights
    data = {"x": np.broadcast_to(X, (4, T, D)), "y": np.zeros((4, T, D), np.float32)}
    problem = slt.Problem.from_loss(
        lambda s, batch: jnp.sum((jax.vmap(nnx.merge(graphdef, s))(batch["x"]) - batch["y"])
                                 ** 2, axis=(1, 2)), state, data)
    from slt.estimators.local.posterior import restriction_mask
    assert restriction_mask(problem, state, parts["H1"]).sum() == slt.parts.preview(
        state, parts).loc["total", "H1"] == 38
    pure = nnx.to_pure_dict(nnx.state(module, nnx.Param))  # the pure dict, too
    assert list(slt.parts.preview(pure, slt.parts.heads(pure, "flax_nnx", H)).loc["total"]
                ) == list(slt.parts.preview(state, parts).loc["total"])


# ---------------------------------------------------------------- Equinox MultiheadAttention


def test_equinox_heads():
    module = eqx.nn.MultiheadAttention(H, D, qk_size=DH, vo_size=DH, use_query_bias=True,
                                       use_key_bias=True, use_value_bias=True,
                                       use_output_bias=True, key=jax.random.key(1))
    module = jax.tree.map(lambda leaf: leaf + 0.5 if is_weight(leaf) else leaf, module)
    parts = slt.parts.heads(module, "equinox", H)
    assert_heads_sum_to_the_module(lambda m: m(X, X, X), module, parts)
    assert_disjoint_and_even(module, parts, [f"{n}_proj/{kind}" for n in ("query", "key",
                             "value") for kind in ("weight", "bias")] + ["output_proj/weight"])
    table = slt.parts.preview(module, parts)  # the dropout's rate and flag are no weights
    assert "dropout/p" not in table.index and table.loc["output_proj/bias", "unselected"] == D


# ---------------------------------------------------------------- GPT-NeoX fused qkv


def neox_attention(params, *, arrangement="(h 3 d)"):
    """GPT-NeoX's attention (HF transformers): the fused projection viewed as (H, 3 d_head)."""
    qkv = X @ params["attention"]["query_key_value"]["weight"].T \
        + params["attention"]["query_key_value"]["bias"]
    q, k, v = jnp.split(qkv.reshape(T, H, 3 * DH), 3, axis=-1)
    z = softmax_attention(q, k, v).reshape(T, H * DH)
    return z @ params["attention"]["dense"]["weight"].T + params["attention"]["dense"]["bias"]


@pytest.fixture(scope="module")
def neox():
    weight, bias, dense, dense_bias = normal(2, (3 * H * DH, D), (3 * H * DH,), (D, H * DH), (D,))
    return {"attention": {"query_key_value": {"weight": weight, "bias": bias},
                          "dense": {"weight": dense, "bias": dense_bias}}}


def test_gpt_neox_fused_heads(neox):
    parts = slt.parts.heads(neox, "gpt_neox", H)
    assert_heads_sum_to_the_module(neox_attention, neox, parts)
    assert_disjoint_and_even(neox, parts, ["attention/query_key_value/weight",
                                           "attention/query_key_value/bias",
                                           "attention/dense/weight"])


def test_a_wrong_fused_order_fails_the_check(neox):
    """The decomposition check can fail: q, k, v read as (3 h d), GPT-2's order, mix heads."""
    layout = dict(slt.parts.LAYOUTS["gpt_neox"])
    layout = {pattern: (slt.parts.HeadAxis(0, "(3 h d)") if "query_key_value" in pattern
                        else axis) for pattern, axis in layout.items()}
    with pytest.raises(AssertionError):
        assert_heads_sum_to_the_module(neox_attention, neox, slt.parts.heads(neox, layout, H))


# ---------------------------------------------------------------- grouped-query attention

HQ, HKV = 4, 2


def gqa_attention(params):
    q = (X @ params["q_proj"]["kernel"] + params["q_proj"]["bias"]).reshape(T, HQ, DH)
    k, v = ((X @ params[f"{n}_proj"]["kernel"]).reshape(T, HKV, DH) for n in "kv")
    k, v = (jnp.repeat(a, HQ // HKV, axis=1) for a in (k, v))  # query head h reads h // 2
    return softmax_attention(q, k, v).reshape(T, HQ * DH) @ params["o_proj"]["kernel"]


def test_grouped_query_heads_share_their_kv_heads():
    q, q_bias, k, v, o = normal(3, (D, HQ * DH), (HQ * DH,), (D, HKV * DH), (D, HKV * DH),
                                (HQ * DH, D))
    params = {"q_proj": {"kernel": q, "bias": q_bias}, "k_proj": {"kernel": k},
              "v_proj": {"kernel": v}, "o_proj": {"kernel": o}}
    parts = slt.parts.heads(params, "grouped_query", HQ, num_kv_heads=HKV)
    assert list(parts) == ["H0", "H1", "H2", "H3"]
    # each query head's own weights, with the kv head it reads: the sum holds only per group
    # once the shared kv weights are kept: head h's part alone computes its contribution
    forward = jax.jit(gqa_attention)
    contributions = [forward(keep(params, mask)) for mask in parts.values()]
    np.testing.assert_allclose(sum(contributions), forward(params), rtol=1e-5, atol=1e-6)
    table = slt.parts.preview(params, parts)
    assert table.loc["k_proj/kernel", "shared"] == D * HKV * DH  # every kv weight: 2 heads
    assert table.loc["q_proj/kernel", "shared"] == 0
    kv = lambda name: np.asarray(parts[name]["k_proj"]["kernel"])  # noqa: E731
    assert np.array_equal(kv("H0"), kv("H1")) and not np.any(kv("H0") & kv("H2"))


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(("call", "message"), [
    (lambda p: slt.parts.heads(p, "gpt2", H), "unknown head layout 'gpt2'"),
    (lambda p: slt.parts.heads(p, "transformer_lens", 3), "blocks/0/W_K's axis 0 has size 2"),
    (lambda p: slt.parts.heads(p, "transformer_lens", 2, num_kv_heads=3),
     "num_kv_heads = 3 must divide num_heads = 2"),
    (lambda p: slt.parts.heads(p, "equinox", H), "matches no weight of params; its weights "
                                                   "are: b_U, blocks/0/W_K"),
    (lambda p: slt.parts.heads(p, {"W_Q": "h"}, H), "a slt.parts.HeadAxis"),
    (lambda p: slt.parts.HeadAxis(0, "(d 3)"), "must name the head factor h once"),
])
def test_bad_head_layouts_are_named(transformer, call, message):
    with pytest.raises(slt.InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        call(transformer)
