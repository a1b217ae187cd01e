"""`slt.parts.heads` on fused grouped-query projections (`slt.parts.FusedQKV`): Phi-3's
qkv_proj ("qkv" order), Falcon's query_key_value and GPT-BigCode's c_attn ("grouped" order).

The reference is how HF transformers splits the fused axis (`split` below), written apart from
`FusedQKV.readers`: every row of a fused leaf gets the code of its role and head ("q3", "k1"),
and each query head's part must select exactly the rows coded q_h, k_{h // r}, v_{h // r}
(r = H / H_kv). The same weights split into separate q, k, v projections give the same parts
under the "grouped_query" layout, and with H_kv = H the fused axis is the (3 h d) or (h 3 d)
arrangement of `HeadAxis`. NumPy only: no program is compiled."""

import re

import jax
import numpy as np
import pytest

import slt
from slt.prediction import leaf_names

H, DH, D = 4, 2, 3  # query heads, head width, model width


def split(fused, order, num_kv_heads):
    """q (H d_head, ...), k and v (H_kv d_head, ...) of a fused axis (axis 0), as HF
    transformers takes them: Phi-3 the first H d_head rows, the next H_kv d_head, the rest;
    Falcon (and GPT-BigCode) views the axis as (H_kv, H / H_kv + 2, d_head): q = [:, :-2],
    k = [:, -2], v = [:, -1]."""
    rest = fused.shape[1:]
    if order == "qkv":
        return np.split(fused, [H * DH, (H + num_kv_heads) * DH])
    blocks = fused.reshape(num_kv_heads, H // num_kv_heads + 2, DH, *rest)
    return (blocks[:, :-2].reshape(H * DH, *rest), blocks[:, -2].reshape(-1, *rest),
            blocks[:, -1].reshape(-1, *rest))


def codes(order, num_kv_heads):
    """The role and head of every row of the fused axis: "q0", ..., "k0", ..., "v0", ...."""
    rows = np.arange((H + 2 * num_kv_heads) * DH)
    code = np.empty(rows.size, object)
    for role, index in zip("qkv", split(rows, order, num_kv_heads), strict=True):
        code[index] = [f"{role}{i // DH}" for i in range(index.size)]
    return code


def fused_attention(order, num_kv_heads, seed=0):
    rng = np.random.default_rng(seed)
    rows = (H + 2 * num_kv_heads) * DH
    return {"qkv": rng.normal(size=(rows, D)), "qkv_bias": rng.normal(size=rows),
            "out": rng.normal(size=(D, H * DH)), "out_bias": rng.normal(size=D)}


def fused_layout(order):
    return {"qkv$": slt.parts.FusedQKV(0, order), "qkv_bias": slt.parts.FusedQKV(0, order),
            "out$": slt.parts.HeadAxis(1, "(h d)")}


CASES = [("qkv", 2), ("grouped", 2), ("qkv", 1), ("grouped", 1)]


@pytest.mark.parametrize(("order", "num_kv_heads"), CASES)
def test_each_head_holds_its_query_rows_and_its_groups_key_and_value_rows(order, num_kv_heads):
    params = fused_attention(order, num_kv_heads)
    parts = slt.parts.heads(params, fused_layout(order), H, num_kv_heads=num_kv_heads)
    assert list(parts) == [f"H{h}" for h in range(H)]
    code, group = codes(order, num_kv_heads), H // num_kv_heads
    for h, mask in enumerate(parts.values()):
        expected = np.isin(code, [f"q{h}", f"k{h // group}", f"v{h // group}"])
        assert expected.sum() == 3 * DH
        np.testing.assert_array_equal(mask["qkv"], np.broadcast_to(expected[:, None], (
            len(code), D)))
        np.testing.assert_array_equal(mask["qkv_bias"], expected)
        np.testing.assert_array_equal(mask["out"][0], np.arange(H * DH) // DH == h)
        assert not np.any(mask["out_bias"])  # the output bias belongs to no head
    for a in range(H):  # heads of different groups are disjoint; one group shares k and v
        for b in range(a + 1, H):
            overlap = np.asarray(parts[f"H{a}"]["qkv"]) & np.asarray(parts[f"H{b}"]["qkv"])
            assert overlap.sum() == (2 * DH * D if a // group == b // group else 0)
    union = slt.parts.union(*parts.values())
    assert np.all(union["qkv"]) and np.all(union["qkv_bias"]) and np.all(union["out"])
    table = slt.parts.preview(params, parts)
    assert table.loc["qkv", "shared"] == 2 * num_kv_heads * DH * D  # every k and v weight
    assert list(table.loc["qkv", list(parts)]) == [3 * DH * D] * H
    assert table.loc["qkv", "unselected"] == 0 and table.loc["out_bias", "unselected"] == D


PRESETS = {  # preset: (order, the names of its fused leaves and output weight, PyTorch's)
    "phi3": ("qkv", "self_attn/qkv_proj/weight", None, "self_attn/o_proj/weight"),
    "falcon": ("grouped", "self_attention/query_key_value/weight",
               "self_attention/query_key_value/bias", "self_attention/dense/weight"),
    "gpt_bigcode": ("grouped", "attn/c_attn/weight", "attn/c_attn/bias", "attn/c_proj/weight"),
}


def nest(flat):
    """{"a/b": x} -> {"a": {"b": x}}."""
    tree = {}
    for name, value in flat.items():
        *path, last = name.split("/")
        node = tree
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    return tree


@pytest.mark.parametrize("num_kv_heads", [2, 1])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_fused_presets_equal_the_separate_projections(preset, num_kv_heads):
    """The preset's parts on a two-layer model equal, row for row, the "grouped_query" parts
    of the same weights split into q_proj, k_proj, v_proj (Flax kernels: transposed)."""
    order, weight, bias, out = PRESETS[preset]
    layers = []
    for seed in (1, 2):
        attention = fused_attention(order, num_kv_heads, seed)
        layer = {weight: attention["qkv"], out: attention["out"]}
        if bias:
            layer[bias] = attention["qkv_bias"]
        layer["mlp/c_proj/weight"] = np.ones((D, 4 * D))  # no attention weight
        layers.append(nest(layer))
    fused = slt.parts.heads({"transformer": {"h": layers}}, preset, H,
                            num_kv_heads=num_kv_heads)
    assert list(fused) == [f"L{layer}.H{h}" for layer in (0, 1) for h in range(H)]
    for index, layer in enumerate(layers):
        flat = dict(zip(leaf_names(layer), jax.tree.leaves(layer), strict=True))
        separate = {"o_proj": {"kernel": flat[out].T}}
        for name, kernel in zip("qkv", split(flat[weight], order, num_kv_heads), strict=True):
            separate[f"{name}_proj"] = {"kernel": kernel.T}
        if bias:
            for name, vector in zip("qkv", split(flat[bias], order, num_kv_heads), strict=True):
                separate[f"{name}_proj"]["bias"] = vector
        parts = slt.parts.heads(separate, "grouped_query", H, num_kv_heads=num_kv_heads)
        for h in range(H):
            mask = dict(zip(leaf_names(layer),
                            jax.tree.leaves(fused[f"L{index}.H{h}"]["transformer"]["h"][index]),
                            strict=True))
            for name, rows in zip("qkv", split(np.asarray(mask[weight]), order, num_kv_heads),
                                  strict=True):
                np.testing.assert_array_equal(rows, parts[f"H{h}"][f"{name}_proj"]["kernel"].T)
            if bias:
                for name, rows in zip("qkv", split(np.asarray(mask[bias]), order, num_kv_heads),
                                      strict=True):
                    np.testing.assert_array_equal(rows, parts[f"H{h}"][f"{name}_proj"]["bias"])
            np.testing.assert_array_equal(mask[out], parts[f"H{h}"]["o_proj"]["kernel"].T)
            assert not np.any(mask["mlp/c_proj/weight"])
            other = fused[f"L{1 - index}.H{h}"]["transformer"]["h"][index]  # other layer's
            assert not any(np.any(leaf) for leaf in jax.tree.leaves(other))


@pytest.mark.parametrize(("order", "arrangement"), [("qkv", "(3 h d)"), ("grouped", "(h 3 d)")])
def test_one_kv_head_per_query_head_is_the_plain_fused_arrangement(order, arrangement):
    params = fused_attention(order, H)
    fused = slt.parts.heads(params, fused_layout(order), H, num_kv_heads=H)
    plain = slt.parts.heads(params, {"qkv$": slt.parts.HeadAxis(0, arrangement),
                                     "qkv_bias": slt.parts.HeadAxis(0, arrangement),
                                     "out$": slt.parts.HeadAxis(1, "(h d)")}, H)
    assert jax.tree.all(jax.tree.map(np.array_equal, fused, plain))
    assert slt.parts.preview(params, fused).loc["total", "shared"] == 0


def test_with_one_kv_head_both_orders_agree():
    params = fused_attention("qkv", 1)
    assert jax.tree.all(jax.tree.map(
        np.array_equal, *(slt.parts.heads(params, fused_layout(order), H, num_kv_heads=1)
                          for order in ("qkv", "grouped"))))


FALCON = {"self_attention": {"query_key_value": {"weight": np.ones(((H + 4) * DH, D))},
                             "dense": {"weight": np.ones((D, H * DH))}}}


@pytest.mark.parametrize(("call", "message"), [
    (lambda: slt.parts.heads(FALCON, "falcon", H),
     "self_attention/query_key_value/weight is a fused grouped-query projection "
     "(FusedQKV(axis=0, order='grouped')): give num_kv_heads"),
    (lambda: slt.parts.heads(FALCON, "falcon", H, num_kv_heads=1),
     "self_attention/query_key_value/weight's axis 0 has size 16, which does not split into "
     "4 query and 1 key and value heads: H + 2 H_kv = 6 blocks"),
    (lambda: slt.parts.heads(FALCON, "falcon", H, num_kv_heads=3),
     "num_kv_heads = 3 must divide num_heads = 4"),
    (lambda: slt.parts.heads(FALCON, {"query_key_value/weight": slt.parts.FusedQKV(2)}, H,
                             num_kv_heads=2),
     "self_attention/query_key_value/weight has shape (16, 3): no axis 2"),
    (lambda: slt.parts.FusedQKV(0, "(h 3 d)"), "order must be one of 'qkv', 'grouped'"),
    (lambda: slt.parts.heads(FALCON, {"dense": "grouped"}, H),
     "a slt.parts.HeadAxis or slt.parts.FusedQKV"),
])
def test_bad_fused_layouts_are_named(call, message):
    with pytest.raises(slt.InputError, match=re.escape(message)):
        call()
