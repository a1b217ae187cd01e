"""A Pythia-70M-shaped GPT-NeoX language model in plain JAX (benchmarks/llc_transformer.py's
GPU size "pythia"); its torch twin is HuggingFace's `GPTNeoXForCausalLM` with the same weights
(benchmarks/transformer_twin.py, `gpt_neox_model`).

Pythia-70M's layout (GPT-NeoX): token embedding (V, D), no learned positions (rotary position
embedding on the first quarter of each head's dimensions, base 10000, HuggingFace's
`rotate_half` convention), L layers of

    x = x + Attention(LayerNorm_1(x)) + MLP(LayerNorm_2(x))        (parallel residual)

with a fused query_key_value projection (3D, D) whose rows are (head, q/k/v, d_head)
interleaved, causal softmax attention scaled by 1 / sqrt(d_head), MLP D -> 4D -> D with exact
(erf) GELU, layer-norm eps 1e-5; a final layer norm and an untied unembedding (V, D), no bias.
Pythia-70M: L = 6, D = 512, 8 heads, MLP 2048, V = 50 304 (70.4M parameters).

Here the fused projection is stored as (H, 3, Dh, D) (bias (H, 3, Dh)) and the output
projection as (D, H, Dh), so that a head is an index of the arrays; `flat_weights` reshapes
them into HuggingFace's (3D, D), (3D,) and (D, D) under HuggingFace's parameter names.
"""

from __future__ import annotations

import numpy as np

ROTARY_FRACTION = 0.25  # Pythia's rotary_pct
ROTARY_BASE = 10_000.0
EPS = 1e-5


def _layer(index: int, name: str) -> str:
    return f"gpt_neox.layers.{index}.{name}"


def init_params(key, size: dict) -> dict:
    """Random weights {HuggingFace name: array} (the fused projections in the head-indexed
    shapes above): N(0, 0.02²) matrices and embeddings, layer norms 1 and 0, biases 0."""
    import jax
    import jax.numpy as jnp

    V, D, H, Dh, F = (size[k] for k in ("vocab", "d_model", "heads", "d_head", "d_mlp"))
    keys = iter(jax.random.split(key, 2 + 4 * size["layers"]))

    def normal(shape):
        return 0.02 * jax.random.normal(next(keys), shape, jnp.float32)

    params = {"gpt_neox.embed_in.weight": normal((V, D)), "embed_out.weight": normal((V, D)),
              "gpt_neox.final_layer_norm.weight": jnp.ones(D),
              "gpt_neox.final_layer_norm.bias": jnp.zeros(D)}
    for index in range(size["layers"]):
        params.update({
            _layer(index, "input_layernorm.weight"): jnp.ones(D),
            _layer(index, "input_layernorm.bias"): jnp.zeros(D),
            _layer(index, "post_attention_layernorm.weight"): jnp.ones(D),
            _layer(index, "post_attention_layernorm.bias"): jnp.zeros(D),
            _layer(index, "attention.query_key_value.weight"): normal((H, 3, Dh, D)),
            _layer(index, "attention.query_key_value.bias"): jnp.zeros((H, 3, Dh)),
            _layer(index, "attention.dense.weight"): normal((D, H, Dh)),
            _layer(index, "attention.dense.bias"): jnp.zeros(D),
            _layer(index, "mlp.dense_h_to_4h.weight"): normal((F, D)),
            _layer(index, "mlp.dense_h_to_4h.bias"): jnp.zeros(F),
            _layer(index, "mlp.dense_4h_to_h.weight"): normal((D, F)),
            _layer(index, "mlp.dense_4h_to_h.bias"): jnp.zeros(D),
        })
    return params


def _layer_norm(x, weight, bias):
    import jax.numpy as jnp

    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / jnp.sqrt(variance + EPS) * weight + bias


def _rotary(x):
    """Rotary position embedding on the first ROTARY_FRACTION of the last axis of x (batch,
    heads, T, Dh), HuggingFace's convention (frequencies repeated, `rotate_half`)."""
    import jax.numpy as jnp

    dims = int(x.shape[-1] * ROTARY_FRACTION)
    inverse = 1.0 / ROTARY_BASE ** (np.arange(0, dims, 2, dtype=np.float32) / dims)
    angles = np.arange(x.shape[-2], dtype=np.float32)[:, None] * inverse
    angles = np.concatenate([angles, angles], axis=-1)
    cos, sin = jnp.asarray(np.cos(angles)), jnp.asarray(np.sin(angles))
    rotated, passed = x[..., :dims], x[..., dims:]
    half = dims // 2
    turned = jnp.concatenate([-rotated[..., half:], rotated[..., :half]], axis=-1)
    return jnp.concatenate([rotated * cos + turned * sin, passed], axis=-1)


def forward(params: dict, tokens):
    """Logits (batch, T, V) of integer tokens (batch, T)."""
    import jax
    import jax.numpy as jnp

    length = tokens.shape[1]
    x = params["gpt_neox.embed_in.weight"][tokens]
    causal = jnp.tril(jnp.ones((length, length), bool))
    index = 0
    while _layer(index, "attention.dense.bias") in params:
        def p(name, index=index):
            return params[_layer(index, name)]

        h = _layer_norm(x, p("input_layernorm.weight"), p("input_layernorm.bias"))
        qkv = (jnp.einsum("btd,hced->bchte", h, p("attention.query_key_value.weight"))
               + p("attention.query_key_value.bias").transpose(1, 0, 2)[None, :, :, None])
        q, k, v = _rotary(qkv[:, 0]), _rotary(qkv[:, 1]), qkv[:, 2]
        scores = jnp.einsum("bhse,bhte->bhst", q, k) / np.sqrt(q.shape[-1])
        z = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1) @ v
        attention = jnp.einsum("bhte,dhe->btd", z, p("attention.dense.weight"))
        h2 = _layer_norm(x, p("post_attention_layernorm.weight"),
                         p("post_attention_layernorm.bias"))
        hidden = jax.nn.gelu(h2 @ p("mlp.dense_h_to_4h.weight").T + p("mlp.dense_h_to_4h.bias"),
                             approximate=False)
        mlp = hidden @ p("mlp.dense_4h_to_h.weight").T + p("mlp.dense_4h_to_h.bias")
        x = x + attention + p("attention.dense.bias") + mlp
        index += 1
    x = _layer_norm(x, params["gpt_neox.final_layer_norm.weight"],
                    params["gpt_neox.final_layer_norm.bias"])
    return x @ params["embed_out.weight"].T


def flat_weights(params: dict) -> dict[str, np.ndarray]:
    """HuggingFace's state dict (float32 NumPy): the fused projections reshaped to (3D, D),
    (3D,) and (D, D)."""
    flat = {}
    for name, value in params.items():
        value = np.asarray(value, np.float32)
        if name.endswith(("query_key_value.weight", "dense.weight")) and value.ndim > 2:
            value = value.reshape(-1, value.shape[-1]) if "query" in name else value.reshape(
                value.shape[0], -1)
        elif name.endswith("query_key_value.bias"):
            value = value.reshape(-1)
        flat[name] = value
    return flat


def head_parts(params: dict) -> dict[str, dict]:
    """{"l0h0": mask, ...}: a head's rows of the fused projection (weight and bias) and its
    columns of the output projection, as devinterp's `create_param_masks` selects them for
    GPT-NeoX (the output projection's bias is shared: in no head)."""
    heads = params[_layer(0, "attention.query_key_value.weight")].shape[0]
    parts, index = {}, 0
    while _layer(index, "attention.dense.bias") in params:
        for head in range(heads):
            mask = {name: np.zeros(np.shape(value), bool) for name, value in params.items()}
            mask[_layer(index, "attention.query_key_value.weight")][head] = True
            mask[_layer(index, "attention.query_key_value.bias")][head] = True
            mask[_layer(index, "attention.dense.weight")][:, head] = True
            parts[f"l{index}h{head}"] = mask
        index += 1
    return parts
