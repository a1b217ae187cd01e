"""`slt.parts` selection by name: globs and regular expressions, the layer / attention / MLP /
embedding conveniences on common layouts, mask arithmetic, `preview`, refusals."""

import re

import jax
import numpy as np
import pytest

import slt

TRANSFORMER = {  # the notebook's 2-layer attention-only transformer, plus an MLP
    "embed": np.ones((5, 4)), "pos_embed": np.ones((3, 4)),
    "blocks": [{"W_Q": np.ones((2, 4, 2)), "W_O": np.ones((2, 2, 4)), "b_O": np.ones(4),
                "mlp": {"W_in": np.ones((4, 8)), "b_in": np.ones(8)}} for _ in range(2)],
    "unembed": np.ones((4, 5)), "b_U": np.ones(5),
}
LINEN = {"params": {"Dense_0": {"kernel": np.ones((2, 3)), "bias": np.ones(3)},
                    "Dense_1": {"kernel": np.ones((3, 1)), "bias": np.ones(1)}}}


def selected(params, mask):
    """{leaf name: number of weights selected}, leaves with any."""
    return {name: int(np.sum(leaf)) for name, leaf
            in zip(slt.prediction.leaf_names(params), jax.tree.leaves(mask), strict=True)
            if np.any(leaf)}


def test_globs_and_regular_expressions_select_whole_leaves():
    assert selected(TRANSFORMER, slt.parts.matching(TRANSFORMER, "blocks/1/W_*")) == {
        "blocks/1/W_O": 16, "blocks/1/W_Q": 16}
    assert set(selected(TRANSFORMER, slt.parts.matching(TRANSFORMER, re.compile(r"b_[OU]$")))
               ) == {"blocks/0/b_O", "blocks/1/b_O", "b_U"}
    assert set(selected(LINEN, slt.parts.matching(LINEN, ["*Dense_1/kernel", "*/bias"]))) == {
        "params/Dense_0/bias", "params/Dense_1/bias", "params/Dense_1/kernel"}


def test_layers_and_kinds_are_recognised_by_name():
    assert set(selected(TRANSFORMER, slt.parts.layer(TRANSFORMER, 1))) == {
        "blocks/1/W_O", "blocks/1/W_Q", "blocks/1/b_O", "blocks/1/mlp/W_in", "blocks/1/mlp/b_in"}
    assert set(selected(LINEN, slt.parts.layer(LINEN, 0))) == {"params/Dense_0/bias",
                                                               "params/Dense_0/kernel"}
    assert set(selected(TRANSFORMER, slt.parts.attention(TRANSFORMER))) == {
        f"blocks/{i}/{n}" for i in (0, 1) for n in ("W_Q", "W_O", "b_O")}
    assert set(selected(TRANSFORMER, slt.parts.mlp(TRANSFORMER))) == {
        f"blocks/{i}/mlp/{n}" for i in (0, 1) for n in ("W_in", "b_in")}
    assert set(selected(TRANSFORMER, slt.parts.embedding(TRANSFORMER))) == {"embed", "pos_embed"}
    assert set(selected(TRANSFORMER, slt.parts.unembedding(TRANSFORMER))) == {"unembed", "b_U"}
    neox = {"gpt_neox": {"embed_in": np.ones(2), "layers": [
        {"attention": {"dense": {"weight": np.ones(2)}}, "mlp": {"dense_h_to_4h": np.ones(2)}}]},
        "embed_out": np.ones(2)}
    assert set(selected(neox, slt.parts.embedding(neox))) == {"gpt_neox/embed_in"}
    assert set(selected(neox, slt.parts.unembedding(neox))) == {"embed_out"}
    assert set(selected(neox, slt.parts.attention(neox))) == {
        "gpt_neox/layers/0/attention/dense/weight"}
    nnx = {"attention": {"query": {"kernel": np.ones(2)}, "out": {"kernel": np.ones(2)}},
           "head": {"out": {"kernel": np.ones(2)}}}  # "out" is attention beside a query only
    assert set(selected(nnx, slt.parts.attention(nnx))) == {"attention/query/kernel",
                                                            "attention/out/kernel"}


def test_mask_arithmetic_and_preview():
    attention = slt.parts.attention(TRANSFORMER)
    heads_only = slt.parts.difference(attention, slt.parts.matching(TRANSFORMER, "*b_O"))
    layer0 = slt.parts.intersection(heads_only, slt.parts.layer(TRANSFORMER, 0))
    both = slt.parts.union(layer0, slt.parts.embedding(TRANSFORMER))
    assert selected(TRANSFORMER, both) == {"blocks/0/W_Q": 16, "blocks/0/W_O": 16,
                                           "embed": 20, "pos_embed": 12}
    table = slt.parts.preview(TRANSFORMER, {"attention": attention, "layer 0": layer0})
    assert table.loc["blocks/0/W_Q", "shared"] == 16  # in both parts
    assert table.loc["blocks/1/W_Q", "shared"] == 0
    assert table.loc["total", "attention"] == 2 * (16 + 16 + 4)
    assert table.loc["total", "weights"] == sum(np.size(a) for a in jax.tree.leaves(TRANSFORMER))
    assert table.loc["total", "unselected"] == table.loc["total", "weights"] - 2 * (16 + 16 + 4)
    one = slt.parts.preview(TRANSFORMER, attention)  # a single mask
    assert list(one.columns) == ["shape", "weights", "mask", "unselected", "shared"]


@pytest.mark.parametrize(("call", "message"), [
    (lambda: slt.parts.matching(TRANSFORMER, "*/W_K"),
     "pattern '\\*/W_K' matches no weight of params; its weights are: b_U, blocks/0/W_O"),
    (lambda: slt.parts.matching(TRANSFORMER, 3), "pattern must be a glob"),
    (lambda: slt.parts.layer(TRANSFORMER, 2),
     r"layer 2 matches no weight of params; the layers found are \[0, 1\]"),
    (lambda: slt.parts.mlp(LINEN), "mlp .* matches no weight of params; its weights are: "
                                   "params/Dense_0/bias"),
    (lambda: slt.parts.union({"w": np.array([True])}, {"v": np.array([True])}),
     "mask 1 has another structure than mask 0"),
    (lambda: slt.parts.union({"w": np.array([1.0])}), "mask 0 is not a pytree of booleans"),
    (lambda: slt.parts.preview({"w": np.ones(2)}, {"a": {"w": np.ones(2)}}),
     r"part 'a': parts\['a'\]\['w'\] must be True / False or a boolean array"),
])
def test_bad_selections_are_named(call, message):
    with pytest.raises(slt.InputError, match=message):
        call()
