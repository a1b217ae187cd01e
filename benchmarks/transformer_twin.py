"""The PyTorch twin of benchmarks/llc_transformer.py's attention-only transformer (torch only).

Imported by benchmarks/devinterp_runner.py in a devinterp venv (torch + devinterp, no JAX). The
model is the one slt samples in JAX, with the same weights: a TransformerLens-layout
attention-only transformer without layer norm or MLP,

    x = W_E[tokens] + W_pos[:T]
    per block: q = einsum("btd,hde->bhte", x, W_Q) + b_Q[:, None]   (k, v alike)
               attention = softmax(q kᵀ / sqrt(d_head), causal)
               x = x + einsum("bhte,hed->btd", attention @ v, W_O) + b_O
    logits = x @ W_U + b_U                  (position t predicts token t + 1)

Its parameters carry TransformerLens's names (`embed.W_E`, `pos_embed.W_pos`,
`blocks.{l}.attn.W_Q` (H, D, Dh), ..., `blocks.{l}.attn.b_O` (D,), `unembed.W_U`, `unembed.b_U`)
and it has a `cfg` with `n_heads` and `d_model`, a forward taking `return_type="logits"` and a
`to(..., print_details=False)`: devinterp 2.0.1 treats such a module as a TransformerLens
`HookedTransformer` (`devinterp.slt.sampler.is_transformer_lens_model`), so its
`create_param_masks(model, "l0h1")` builds a head's masks and its default per-token
cross-entropy reads the logits, as for a TransformerLens user. TransformerLens itself is not
installed: its `HookedTransformer(attn_only=True, normalization_type=None)` computes the same
function with the same parameter names.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import torch
from torch import nn

# slt's parameter names (the JAX pytree, flattened with "/" for the blocks) -> torch's
BLOCK_NAMES = {"W_Q": "attn.W_Q", "W_K": "attn.W_K", "W_V": "attn.W_V", "W_O": "attn.W_O",
               "b_Q": "attn.b_Q", "b_K": "attn.b_K", "b_V": "attn.b_V", "b_O": "attn.b_O"}
TOP_NAMES = {"embed": "embed.W_E", "pos_embed": "pos_embed.W_pos", "unembed": "unembed.W_U",
             "b_U": "unembed.b_U"}


def torch_name(flat_name: str) -> str:
    """The torch parameter name of a flat .npz name: "embed" -> "embed.W_E",
    "blocks.1.W_Q" -> "blocks.1.attn.W_Q"."""
    if flat_name in TOP_NAMES:
        return TOP_NAMES[flat_name]
    _, layer, leaf = flat_name.split(".")
    return f"blocks.{layer}.{BLOCK_NAMES[leaf]}"


def flat_name(name: str) -> str:
    """The .npz name of a torch parameter name (`torch_name`'s inverse; GPT-NeoX names are
    the same on both sides but the unembedding, transformers 5's "lm_head.weight")."""
    inverse = {value: key for key, value in TOP_NAMES.items()}
    if name in inverse:
        return inverse[name]
    if name.startswith("blocks.") and ".attn." in name:
        return name.replace(".attn.", ".")
    return {"lm_head.weight": "embed_out.weight"}.get(name, name)


class _Weights(nn.Module):
    """A container of named parameters (TransformerLens's `embed`, `attn`, ... submodules)."""

    def __init__(self, **weights: torch.Tensor):
        super().__init__()
        for name, value in weights.items():
            setattr(self, name, nn.Parameter(value))


class _Block(nn.Module):
    def __init__(self, weights: dict[str, torch.Tensor]):
        super().__init__()
        self.attn = _Weights(**weights)


class AttentionOnlyTransformer(nn.Module):
    """The attention-only transformer at given weights (float32 tensors in slt's layout).

    Args:
      weights: {flat name: array}: "embed" (V, D), "pos_embed" (T, D), "unembed" (D, V), "b_U"
        (V,) and "blocks.{l}.{W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O}" for l = 0 .. L - 1.
    """

    def __init__(self, weights: dict[str, np.ndarray]):
        super().__init__()
        tensors = {name: torch.from_numpy(np.array(value, np.float32))
                   for name, value in weights.items()}
        self.embed = _Weights(W_E=tensors["embed"])
        self.pos_embed = _Weights(W_pos=tensors["pos_embed"])
        layers = sorted({int(name.split(".")[1]) for name in tensors if name.startswith("blocks.")})
        self.blocks = nn.ModuleList(
            _Block({leaf: tensors[f"blocks.{layer}.{leaf}"] for leaf in BLOCK_NAMES})
            for layer in layers)
        self.unembed = _Weights(W_U=tensors["unembed"], b_U=tensors["b_U"])
        heads, d_model, d_head = tensors["blocks.0.W_Q"].shape
        self.cfg = SimpleNamespace(n_heads=heads, d_model=d_model, d_head=d_head,
                                   n_layers=len(layers), d_vocab=tensors["embed"].shape[0],
                                   n_ctx=tensors["pos_embed"].shape[0])

    def to(self, *args, print_details: bool = True, **kwargs):  # TransformerLens's signature
        return super().to(*args, **kwargs)

    def forward(self, input_ids: torch.Tensor, return_type: str = "logits") -> torch.Tensor:
        """Logits (batch, T, V) of integer tokens (batch, T)."""
        length = input_ids.shape[1]
        x = self.embed.W_E[input_ids] + self.pos_embed.W_pos[:length]
        causal = torch.ones(length, length, dtype=torch.bool, device=x.device).tril()
        scale = 1 / math.sqrt(self.cfg.d_head)
        for block in self.blocks:
            attn = block.attn
            q = torch.einsum("btd,hde->bhte", x, attn.W_Q) + attn.b_Q[:, None]
            k = torch.einsum("btd,hde->bhte", x, attn.W_K) + attn.b_K[:, None]
            v = torch.einsum("btd,hde->bhte", x, attn.W_V) + attn.b_V[:, None]
            scores = (q @ k.transpose(-1, -2) * scale).masked_fill(~causal, -math.inf)
            z = torch.softmax(scores, dim=-1) @ v
            x = x + torch.einsum("bhte,hed->btd", z, attn.W_O) + attn.b_O
        return x @ self.unembed.W_U + self.unembed.b_U


def per_token_loss(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of token t + 1 given tokens 0..t, (batch, T - 1): devinterp's default
    per-token loss (`devinterp.slt.lm_loss.compute_per_token_loss`), called as it calls it."""
    from devinterp.slt.lm_loss import compute_per_token_loss

    return compute_per_token_loss(model, input_ids)


def gpt_neox_model(weights: dict[str, np.ndarray], heads: int) -> nn.Module:
    """HuggingFace's `GPTNeoXForCausalLM` at given weights (its state dict as NumPy arrays):
    the twin of benchmarks/pythia_shaped.py (rotary on a quarter of each head, base 10000,
    parallel residual, exact GELU, untied unembedding), built from a config, no download."""
    import transformers

    shapes = {name: np.shape(value) for name, value in weights.items()}
    vocab, d_model = shapes["gpt_neox.embed_in.weight"]
    settings = dict(vocab_size=vocab, hidden_size=d_model, num_attention_heads=heads,
                    num_hidden_layers=sum(name.endswith("attention.dense.bias") for name in shapes),
                    intermediate_size=shapes["gpt_neox.layers.0.mlp.dense_h_to_4h.weight"][0],
                    hidden_act="gelu", layer_norm_eps=1e-5, use_parallel_residual=True,
                    tie_word_embeddings=False, attention_dropout=0.0, hidden_dropout=0.0,
                    max_position_embeddings=2048)
    try:  # transformers 5: rope_parameters
        config = transformers.GPTNeoXConfig(**settings, rope_parameters={
            "rope_type": "default", "rope_theta": 10_000.0, "partial_rotary_factor": 0.25})
    except TypeError:  # transformers 4
        config = transformers.GPTNeoXConfig(**settings, rotary_pct=0.25, rotary_emb_base=10_000)
    model = transformers.GPTNeoXForCausalLM(config)
    state = {name: torch.from_numpy(np.array(value, np.float32)) for name, value in weights.items()}
    if "lm_head.weight" in dict(model.named_parameters()):  # transformers 5's name
        state["lm_head.weight"] = state.pop("embed_out.weight")
    model.load_state_dict(state, strict=False)
    missing = {name for name, _ in model.named_parameters()} - set(state)
    if missing:
        raise ValueError(f"weights missing for {sorted(missing)}")
    return model
