"""One part per attention head: the head's query, key, value and output weights (and biases).

Where a leaf keeps its heads is data, a `HeadAxis`: the axis that holds them and how that axis
is arranged, in einops' notation: "h" (the axis is the heads, one slice each), "(h d)" (H
contiguous blocks, head-major), "(h 3 d)" (per head, its q, k and v blocks in turn: GPT-NeoX's
fused query_key_value), "(3 h d)" (q of every head, then k, then v: GPT-2's c_attn). Numbers are
fixed sizes, h the number of heads on that leaf, and one other letter is inferred from the
axis' size.

A fused grouped-query projection, one axis of (H + 2 H_kv) d_head rows holding the queries of
H heads and the keys and values of H_kv heads, is a `FusedQKV`: the axis and the order of its
blocks of d_head rows (q_h: query head h's block; k_g, v_g: kv head g's; r = H / H_kv). It is
a value of its own rather than an arrangement: its H query blocks and 2 H_kv key and value
blocks make no product of factors, and a row may belong to several heads (a key row to the r
query heads of its group). The two orders in use:

- "qkv", [q_0 .. q_{H-1} | k_0 .. k_{H_kv-1} | v_0 .. v_{H_kv-1}]: Phi-3's qkv_proj, vLLM's
  QKVParallelLinear (its fused qkv_proj of Llama, Qwen2, ..., on one device).
- "grouped", per kv head g in turn [q_{g r} .. q_{g r + r - 1} | k_g | v_g]: Falcon's
  query_key_value (all three of its variants: H_kv = H, 1, or config.num_kv_heads) and
  GPT-BigCode's c_attn (H_kv = H, or 1 with multi_query).

With H_kv = H they are HeadAxis(axis, "(3 h d)") and HeadAxis(axis, "(h 3 d)"); with H_kv = 1
the two orders coincide. A layout maps regular expressions (searched in `leaf_names`' names) to
`HeadAxis`es and `FusedQKV`s; `heads` reads any layout, and `LAYOUTS` holds the presets:

- "transformer_lens", TransformerLens-style arrays: W_Q, W_K, W_V (H, d_model, d_head), W_O
  (H, d_head, d_model), b_Q, b_K, b_V (H, d_head).
- "flax_nnx", `flax.nnx.MultiHeadAttention` (its `nnx.State` of `nnx.Param`s, or the pure
  dict): query, key, value kernels (in, H, d_head) and biases (H, d_head), out kernel
  (H, d_head, out). Flax Linen's `MultiHeadDotProductAttention` has the same names and shapes
  ("params/MultiHeadDotProductAttention_0/query/kernel": layer 0).
- "equinox", `equinox.nn.MultiheadAttention`: query_proj, key_proj, value_proj weights
  (H d_head, in) and biases (H d_head,), output_proj weight (out, H d_head).
- "gpt_neox", GPT-NeoX / Pythia in PyTorch's layout: attention/query_key_value weight
  (H 3 d_head, d) and bias (H 3 d_head,) (HF transformers views its output as (H, 3 d_head)
  and takes q, k, v as the thirds of each head's block), attention/dense weight (d, H d_head).
- "grouped_query", grouped-query attention under Llama's names with Flax kernels (in, out):
  q_proj kernel (d, H d_head), k_proj and v_proj kernels (d, H_kv d_head), o_proj kernel
  (H d_head, d), and the biases of q_proj, k_proj, v_proj.
- "phi3", Phi-3 in PyTorch's layout: self_attn/qkv_proj weight ((H + 2 H_kv) d_head, d),
  `FusedQKV` "qkv" (and its bias, where there is one), and self_attn/o_proj weight
  (d, H d_head).
- "falcon", Falcon in PyTorch's layout: self_attention/query_key_value weight and bias (with
  config.bias) ((H + 2 H_kv) d_head, d), `FusedQKV` "grouped", and self_attention/dense
  weight (d, H d_head).
- "gpt_bigcode", GPT-BigCode (SantaCoder, StarCoder) in PyTorch's layout: attn/c_attn weight
  and bias ((H + 2 H_kv) d_head, d), `FusedQKV` "grouped", and attn/c_proj weight (d, H d_head).

The fused presets need num_kv_heads: H_kv of the model (H for multi-head attention, 1 for
multi-query).

Conventions:

- The output bias (TransformerLens' b_O, NNX's out/bias, Equinox's output_proj/bias, NeoX's
  attention/dense/bias) is added after the heads are summed: it belongs to no single head and
  is in no head's part (`slt.parts.attention` includes it).
- Grouped-query attention: H query heads share H_kv key/value heads, query head h reading kv
  head h // (H / H_kv). A query head's part holds its query and output weights and the key and
  value weights of the kv head it reads, whether those are separate leaves (`HeadAxis` with
  `kv`) or blocks of a fused one (`FusedQKV`); the H / H_kv query heads of a group then share
  their kv weights: those parts overlap (`slt.parts.preview` counts the shared weights).
- Parts are named "L{layer}.H{head}", the layer of the attention module by
  `slt.parts.layer_index` ("blocks/1/W_Q": layer 1); "H{head}" when params holds one attention
  module outside any layer; "{module path}.H{head}" when the layers do not tell modules apart.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from slt.parts.select import Mask, is_weight, layer_index, leaf_listing
from slt.prediction import leaf_names
from slt.validation import InputError, require_instance, require_int, require_one_of, set_field

__all__ = ["LAYOUTS", "FusedQKV", "HeadAxis", "heads"]


@dataclass(frozen=True)
class HeadAxis:
    """How one leaf's weights split among attention heads.

    Attributes:
      axis: the axis that holds the heads (negative counts from the end).
      arrangement: that axis as factors, einops-style: "h", "(h d)", "(h 3 d)", "(3 h d)"
        (the module's docstring); h is the head factor.
      kv: the leaf holds the key / value heads of grouped-query attention (H_kv of them:
        `heads`' num_kv_heads) rather than one per query head.

    Example:
      >>> slt.parts.HeadAxis(0, "(h 3 d)")
      HeadAxis(axis=0, arrangement='(h 3 d)', kv=False)
    """

    axis: int
    arrangement: str = "h"
    kv: bool = False

    def __post_init__(self):
        set_field(self, "axis", require_int("axis", self.axis))
        factors = self.factors()
        symbols = [factor for factor in factors if not factor.isdigit()]
        if (factors.count("h") != 1 or len(symbols) > 2 or len(set(symbols)) < len(symbols)
                or not all(re.fullmatch(r"[A-Za-z]\w*|\d+", f) for f in factors)):
            raise InputError(
                f"arrangement must name the head factor h once, with at most one other "
                f"unknown factor ('h', '(h d)', '(h 3 d)', '(3 h d)'); got {self.arrangement!r}")

    def factors(self) -> list[str]:
        """The arrangement's factors, in order ("(h 3 d)" -> ["h", "3", "d"])."""
        return str(self.arrangement).strip().removeprefix("(").removesuffix(")").split()

    def slots(self, name: str, shape: tuple, count: int) -> np.ndarray:
        """The head (0 .. count - 1) of every index along the axis of a leaf of `shape`.

        Raises:
          InputError: the leaf has no such axis, or the axis' size does not split into
            `count` heads as arranged; the message names the leaf.
        """
        size = _axis_size(name, shape, self.axis)
        sizes = [count if f == "h" else int(f) if f.isdigit() else None
                 for f in self.factors()]
        known = int(np.prod([s for s in sizes if s is not None]))
        if size % known or (None not in sizes and size != known):
            raise InputError(
                f"{name}'s axis {self.axis} has size {size}, which does not split into "
                f"{count} heads as {self.arrangement!r}")
        sizes = [size // known if s is None else s for s in sizes]
        return np.indices(sizes)[self.factors().index("h")].reshape(-1)

    def readers(self, name: str, shape: tuple, num_heads: int,
                num_kv_heads: int | None) -> tuple[np.ndarray, np.ndarray]:
        """The query heads whose parts hold each index along the axis (`FusedQKV.readers`):
        one head each, or for a `kv` leaf the H / H_kv query heads reading its kv head
        (num_kv_heads None: H_kv = H)."""
        count = num_kv_heads if self.kv and num_kv_heads is not None else num_heads
        group = num_heads // count
        first = self.slots(name, shape, count) * group
        return first, np.full_like(first, group)


@dataclass(frozen=True)
class FusedQKV:
    """A fused grouped-query projection: one axis holding the query rows of H heads and the key
    and value rows of H_kv heads, (H + 2 H_kv) blocks of d_head rows.

    Query head h reads kv head h // r, r = H / H_kv; its part holds its query block q_h and the
    blocks k_{h // r} and v_{h // r}, which the r query heads of its group share. The blocks
    follow each other along the axis in one of two orders (the module's docstring names the
    models):

    - "qkv": q_0 .. q_{H-1}, then k_0 .. k_{H_kv-1}, then v_0 .. v_{H_kv-1}.
    - "grouped": for each kv head g in turn, q_{g r} .. q_{g r + r - 1}, k_g, v_g.

    Attributes:
      axis: the fused axis (negative counts from the end); PyTorch's weight (out, in): 0.
      order: "qkv" or "grouped".

    Example:
      >>> qkv = np.zeros((8, 3))  # H = 2 query heads, H_kv = 1, d_head = 2: q0 q1 k v
      >>> parts = slt.parts.heads({"qkv": qkv}, {"qkv": slt.parts.FusedQKV(0)}, 2,
      ...                         num_kv_heads=1)
      >>> parts["H1"]["qkv"][:, 0]  # q1's rows and the shared k and v rows
      array([False, False,  True,  True,  True,  True,  True,  True])
    """

    axis: int
    order: str = "qkv"

    def __post_init__(self):
        set_field(self, "axis", require_int("axis", self.axis))
        require_one_of("order", self.order, ("qkv", "grouped"))

    def readers(self, name: str, shape: tuple, num_heads: int,
                num_kv_heads: int | None) -> tuple[np.ndarray, np.ndarray]:
        """The query heads whose parts hold each index along the axis of a leaf of `shape`.

        Returns:
          (first, count), integer arrays over the axis: index i is in the parts of query heads
          first[i] .. first[i] + count[i] - 1 (a query row: its head, count 1; a key or value
          row of kv head g: heads g r .. g r + r - 1, count r).

        Raises:
          InputError: num_kv_heads not given, or the leaf has no such axis, or its size is not
            a multiple of H + 2 H_kv; the message names the leaf.
        """
        if num_kv_heads is None:
            raise InputError(
                f"{name} is a fused grouped-query projection ({self}): give num_kv_heads, its "
                f"number of key / value heads (num_heads for multi-head attention, 1 for "
                f"multi-query)")
        size = _axis_size(name, shape, self.axis)
        num_blocks = num_heads + 2 * num_kv_heads
        if size % num_blocks:
            raise InputError(
                f"{name}'s axis {self.axis} has size {size}, which does not split into "
                f"{num_heads} query and {num_kv_heads} key and value heads: H + 2 H_kv = "
                f"{num_blocks} blocks of equal size")
        group = num_heads // num_kv_heads
        # per block (first, count): a query block its head, a kv block its group's heads
        query = np.stack([np.arange(num_heads), np.ones(num_heads, int)], axis=-1)
        kv = np.stack([np.arange(num_kv_heads) * group, np.full(num_kv_heads, group)], axis=-1)
        if self.order == "qkv":
            blocks = np.concatenate([query, kv, kv])
        else:
            blocks = np.concatenate([query.reshape(num_kv_heads, group, 2), kv[:, None],
                                     kv[:, None]], axis=1).reshape(num_blocks, 2)
        rows = np.repeat(blocks, size // num_blocks, axis=0)  # each block: d_head rows
        return rows[:, 0], rows[:, 1]


def _axis_size(name: str, shape: tuple, axis: int) -> int:
    if not -len(shape) <= axis < len(shape):
        raise InputError(f"{name} has shape {shape}: no axis {axis} to split into heads")
    return shape[axis]


def _layouts() -> dict[str, dict[str, HeadAxis | FusedQKV]]:
    """The presets, each pattern anchored at the start of a leaf name's component and at
    its end (NNX States name each variable's array "value": an optional "/value" after)."""
    presets = {
        "transformer_lens": {
            r"[Wb]_[QKV]": HeadAxis(0),
            r"W_O": HeadAxis(0),
        },
        "flax_nnx": {
            r"(query|key|value)/kernel": HeadAxis(1),
            r"(query|key|value)/bias": HeadAxis(0),
            r"out/kernel": HeadAxis(0),
        },
        "equinox": {
            r"(query|key|value)_proj/(weight|bias)": HeadAxis(0, "(h d)"),
            r"output_proj/weight": HeadAxis(1, "(h d)"),
        },
        "gpt_neox": {
            r"attention/query_key_value/(weight|bias)": HeadAxis(0, "(h 3 d)"),
            r"attention/dense/weight": HeadAxis(1, "(h d)"),
        },
        "grouped_query": {
            r"q_proj/kernel": HeadAxis(1, "(h d)"),
            r"q_proj/bias": HeadAxis(0, "(h d)"),
            r"[kv]_proj/kernel": HeadAxis(1, "(h d)", kv=True),
            r"[kv]_proj/bias": HeadAxis(0, "(h d)", kv=True),
            r"o_proj/kernel": HeadAxis(0, "(h d)"),
        },
        "phi3": {
            r"self_attn/qkv_proj/(weight|bias)": FusedQKV(0, "qkv"),
            r"self_attn/o_proj/weight": HeadAxis(1, "(h d)"),
        },
        "falcon": {
            r"self_attention/query_key_value/(weight|bias)": FusedQKV(0, "grouped"),
            r"self_attention/dense/weight": HeadAxis(1, "(h d)"),
        },
        "gpt_bigcode": {
            r"attn/c_attn/(weight|bias)": FusedQKV(0, "grouped"),
            r"attn/c_proj/weight": HeadAxis(1, "(h d)"),
        },
    }
    return {name: {r"(^|/)" + pattern + r"(/value)?$": axis for pattern, axis in preset.items()}
            for name, preset in presets.items()}


LAYOUTS: dict[str, dict[str, HeadAxis | FusedQKV]] = _layouts()
"""The preset layouts, by name (the module's table): {leaf name regex: `HeadAxis` or
`FusedQKV`}."""


def _resolve_layout(layout: str | Mapping) -> dict[re.Pattern, HeadAxis | FusedQKV]:
    if isinstance(layout, str):
        if layout not in LAYOUTS:
            raise InputError(f"unknown head layout {layout!r}; the presets are "
                             f"{', '.join(map(repr, LAYOUTS))}, or give "
                             "{leaf name regex: slt.parts.HeadAxis or FusedQKV}")
        layout = LAYOUTS[layout]
    require_instance("layout", layout, Mapping, "a preset's name or a dict "
                     "{leaf name regex: slt.parts.HeadAxis or slt.parts.FusedQKV}")
    resolved = {}
    for pattern, axis in layout.items():
        require_instance(f"layout[{pattern!r}]", axis, HeadAxis | FusedQKV,
                         "a slt.parts.HeadAxis or slt.parts.FusedQKV")
        try:
            resolved[re.compile(pattern)] = axis
        except (TypeError, re.error) as error:
            raise InputError(f"layout key {pattern!r} is not a regular expression: {error}"
                             ) from None
    return resolved


def heads(params: Any, layout: str | Mapping[str, HeadAxis | FusedQKV], num_heads: int, *,
          num_kv_heads: int | None = None) -> dict[str, Mask]:
    """A mask per attention head, ready for `slt.llc_table`'s parts.

    Args:
      params: the parameter pytree (a dict, a Flax NNX State, an Equinox module, ...).
      layout: a preset's name (`LAYOUTS`: "transformer_lens", "flax_nnx", "equinox",
        "gpt_neox", "grouped_query", "phi3", "falcon", "gpt_bigcode") or a dict {regex
        searched in leaf names: `HeadAxis` or `FusedQKV`}.
        The part of a leaf's name before the match is its attention module's path (the
        leaves of one module share it).
      num_heads: H, the number of (query) heads of every attention module.
      num_kv_heads: H_kv, the number of key / value heads of grouped-query attention (H_kv
        divides H), for the leaves marked `kv` (default H) and the `FusedQKV` leaves (no
        default: a fused leaf without it is an error).

    Returns:
      {"L{layer}.H{head}": mask} for every module and head, in order (the module docstring
      says how parts are named and which weights a head holds).

    Raises:
      InputError: an unknown preset, num_heads or num_kv_heads not a positive integer (or
        H_kv not dividing H), a layout matching no leaf (the message lists the leaf names),
        a leaf matched by two patterns, a leaf whose axis does not split into its heads, or
        a `FusedQKV` leaf without num_kv_heads.

    Example:
      >>> block = {"W_Q": np.ones((2, 3, 1)), "W_K": np.ones((2, 3, 1)),
      ...          "W_V": np.ones((2, 3, 1)), "W_O": np.ones((2, 1, 3)), "b_O": np.ones(3)}
      >>> parts = slt.parts.heads({"blocks": [block, block]}, "transformer_lens", 2)
      >>> list(parts)
      ['L0.H0', 'L0.H1', 'L1.H0', 'L1.H1']
      >>> parts["L0.H1"]["blocks"][0]["W_Q"][:, 0, 0]   # head 1's slice of W_Q
      array([False,  True])
    """
    layout = _resolve_layout(layout)
    num_heads = require_int("num_heads", num_heads, minimum=1)
    if num_kv_heads is not None:
        num_kv_heads = require_int("num_kv_heads", num_kv_heads, minimum=1)
        if num_heads % num_kv_heads:
            raise InputError(
                f"num_kv_heads = {num_kv_heads} must divide num_heads = {num_heads}")
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    modules: dict[str, int | None] = {}  # module path -> its layer
    found = []  # per leaf: (module path, axis, the query heads reading each index) or None
    for name, (path, leaf) in zip(leaf_names(params), flat, strict=True):
        matches = [(expression.search(name), axis) for expression, axis in layout.items()
                   if is_weight(leaf) and expression.search(name)]
        if len(matches) > 1:
            raise InputError(f"{name} matches several patterns of the layout: "
                             f"{[m.re.pattern for m, _ in matches]}")
        if not matches:
            found.append(None)
            continue
        match, axis = matches[0]
        module = name[:match.start()]
        modules.setdefault(module, layer_index(path))
        found.append((module, axis.axis,
                      axis.readers(name, np.shape(leaf), num_heads, num_kv_heads)))
    if not modules:
        raise InputError(f"the head layout {[e.pattern for e in layout]} matches no weight of "
                         f"params; its weights are: {leaf_listing(params)}")
    labels = _module_labels(modules)
    structure = jax.tree_util.tree_structure(params)
    parts = {}
    for module, label in labels.items():
        for head in range(num_heads):
            leaves = []
            for (_, leaf), entry in zip(flat, found, strict=True):
                if entry is None or entry[0] != module:
                    leaves.append(np.zeros(np.shape(leaf), bool))
                    continue
                _, axis, (first, count) = entry
                selected = (first <= head) & (head < first + count)
                shape = [1] * np.ndim(leaf)
                shape[axis] = -1
                leaves.append(np.broadcast_to(selected.reshape(shape), np.shape(leaf)))
            parts[f"{label}H{head}"] = jax.tree_util.tree_unflatten(structure, leaves)
    return parts


def _module_labels(modules: dict[str, int | None]) -> dict[str, str]:
    """Each attention module's prefix for its heads' names: "L{layer}." where the layers tell
    the modules apart, "" for a lone module outside any layer, else "{module path}."."""
    layers = list(modules.values())
    if None not in layers and len(set(layers)) == len(layers):
        return {module: f"L{layer}." for module, layer in modules.items()}
    if len(modules) == 1 and layers == [None]:
        return {module: "" for module in modules}
    return {module: f"{module.rstrip('/') or 'root'}." for module in modules}
