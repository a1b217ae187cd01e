"""One part per attention head: the head's query, key, value and output weights (and biases).

Where a leaf keeps its heads is data, a `HeadAxis`: the axis that holds them and how that axis
is arranged, in einops' notation: "h" (the axis is the heads, one slice each), "(h d)" (H
contiguous blocks, head-major), "(h 3 d)" (per head, its q, k and v blocks in turn: GPT-NeoX's
fused query_key_value), "(3 h d)" (q of every head, then k, then v: GPT-2's c_attn). Numbers are
fixed sizes, h the number of heads on that leaf, and one other letter is inferred from the
axis' size. A layout maps regular expressions (searched in `leaf_names`' names) to `HeadAxis`es;
`heads` reads any layout, and `LAYOUTS` holds the presets:

- "transformer_lens", TransformerLens-style arrays: W_Q, W_K, W_V (H, d_model, d_head), W_O
  (H, d_head, d_model), b_Q, b_K, b_V (H, d_head).
- "flax_nnx", `flax.nnx.MultiHeadAttention` (its `nnx.State` of `nnx.Param`s, or the pure
  dict): query, key, value kernels (in, H, d_head) and biases (H, d_head), out kernel
  (H, d_head, out).
- "equinox", `equinox.nn.MultiheadAttention`: query_proj, key_proj, value_proj weights
  (H d_head, in) and biases (H d_head,), output_proj weight (out, H d_head).
- "gpt_neox", GPT-NeoX / Pythia in PyTorch's layout: attention/query_key_value weight
  (H 3 d_head, d) and bias (H 3 d_head,) (HF transformers views its output as (H, 3 d_head)
  and takes q, k, v as the thirds of each head's block), attention/dense weight (d, H d_head).
- "grouped_query", grouped-query attention under Llama's names with Flax kernels (in, out):
  q_proj kernel (d, H d_head), k_proj and v_proj kernels (d, H_kv d_head), o_proj kernel
  (H d_head, d), and the biases of q_proj, k_proj, v_proj.

Conventions:

- The output bias (TransformerLens' b_O, NNX's out/bias, Equinox's output_proj/bias, NeoX's
  attention/dense/bias) is added after the heads are summed: it belongs to no single head and
  is in no head's part (`slt.parts.attention` includes it).
- Grouped-query attention: H query heads share H_kv key/value heads, query head h reading kv
  head h // (H / H_kv). A query head's part holds its query and output weights and the key and
  value weights of the kv head it reads; the H / H_kv query heads of a group then share their
  kv weights: those parts overlap (`slt.parts.preview` counts the shared weights).
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
from slt.validation import InputError, require_instance, require_int, set_field

__all__ = ["LAYOUTS", "HeadAxis", "heads"]


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
        if not -len(shape) <= self.axis < len(shape):
            raise InputError(f"{name} has shape {shape}: no axis {self.axis} to split into heads")
        size = shape[self.axis]
        sizes = [count if f == "h" else int(f) if f.isdigit() else None
                 for f in self.factors()]
        known = int(np.prod([s for s in sizes if s is not None]))
        if size % known or (None not in sizes and size != known):
            raise InputError(
                f"{name}'s axis {self.axis} has size {size}, which does not split into "
                f"{count} heads as {self.arrangement!r}")
        sizes = [size // known if s is None else s for s in sizes]
        return np.indices(sizes)[self.factors().index("h")].reshape(-1)


def _layouts() -> dict[str, dict[str, HeadAxis]]:
    key, end = r"(^|/)", r"(/value)?$"  # NNX States name each variable's array "value"
    return {
        "transformer_lens": {
            key + r"[Wb]_[QKV]" + end: HeadAxis(0),
            key + r"W_O" + end: HeadAxis(0),
        },
        "flax_nnx": {
            key + r"(query|key|value)/kernel" + end: HeadAxis(1),
            key + r"(query|key|value)/bias" + end: HeadAxis(0),
            key + r"out/kernel" + end: HeadAxis(0),
        },
        "equinox": {
            key + r"(query|key|value)_proj/(weight|bias)" + end: HeadAxis(0, "(h d)"),
            key + r"output_proj/weight" + end: HeadAxis(1, "(h d)"),
        },
        "gpt_neox": {
            key + r"attention/query_key_value/(weight|bias)" + end: HeadAxis(0, "(h 3 d)"),
            key + r"attention/dense/weight" + end: HeadAxis(1, "(h d)"),
        },
        "grouped_query": {
            key + r"q_proj/kernel" + end: HeadAxis(1, "(h d)"),
            key + r"q_proj/bias" + end: HeadAxis(0, "(h d)"),
            key + r"[kv]_proj/kernel" + end: HeadAxis(1, "(h d)", kv=True),
            key + r"[kv]_proj/bias" + end: HeadAxis(0, "(h d)", kv=True),
            key + r"o_proj/kernel" + end: HeadAxis(0, "(h d)"),
        },
    }


LAYOUTS: dict[str, dict[str, HeadAxis]] = _layouts()
"""The preset layouts, by name (the module's table): {leaf name regex: `HeadAxis`}."""


def _resolve_layout(layout: str | Mapping) -> dict[re.Pattern, HeadAxis]:
    if isinstance(layout, str):
        if layout not in LAYOUTS:
            raise InputError(f"unknown head layout {layout!r}; the presets are "
                             f"{', '.join(map(repr, LAYOUTS))}, or give "
                             "{leaf name regex: slt.parts.HeadAxis}")
        layout = LAYOUTS[layout]
    require_instance("layout", layout, Mapping,
                     "a preset's name or a dict {leaf name regex: slt.parts.HeadAxis}")
    resolved = {}
    for pattern, axis in layout.items():
        require_instance(f"layout[{pattern!r}]", axis, HeadAxis, "a slt.parts.HeadAxis")
        try:
            resolved[re.compile(pattern)] = axis
        except (TypeError, re.error) as error:
            raise InputError(f"layout key {pattern!r} is not a regular expression: {error}"
                             ) from None
    return resolved


def heads(params: Any, layout: str | Mapping[str, HeadAxis], num_heads: int, *,
          num_kv_heads: int | None = None) -> dict[str, Mask]:
    """A mask per attention head, ready for `slt.llc_table`'s parts.

    Args:
      params: the parameter pytree (a dict, a Flax NNX State, an Equinox module, ...).
      layout: a preset's name (`LAYOUTS`: "transformer_lens", "flax_nnx", "equinox",
        "gpt_neox", "grouped_query") or a dict {regex searched in leaf names: `HeadAxis`}.
        The part of a leaf's name before the match is its attention module's path (the
        leaves of one module share it).
      num_heads: H, the number of (query) heads of every attention module.
      num_kv_heads: H_kv for the leaves marked `kv` (grouped-query attention; H_kv divides
        H); default H.

    Returns:
      {"L{layer}.H{head}": mask} for every module and head, in order (the module docstring
      says how parts are named and which weights a head holds).

    Raises:
      InputError: an unknown preset, num_heads or num_kv_heads not a positive integer (or
        H_kv not dividing H), a layout matching no leaf (the message lists the leaf names),
        a leaf matched by two patterns, or a leaf whose axis does not split into its heads.

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
    num_kv_heads = num_heads if num_kv_heads is None else require_int(
        "num_kv_heads", num_kv_heads, minimum=1)
    if num_heads % num_kv_heads:
        raise InputError(f"num_kv_heads = {num_kv_heads} must divide num_heads = {num_heads}")
    flat = jax.tree_util.tree_flatten_with_path(params)[0]
    modules: dict[str, int | None] = {}  # module path -> its layer
    found = []  # per leaf: (module path, head of each index along the axis, HeadAxis) or None
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
        count = num_kv_heads if axis.kv else num_heads
        slots = axis.slots(name, np.shape(leaf), count) * (num_heads // count)
        module = name[:match.start()]
        modules.setdefault(module, layer_index(path))
        found.append((module, slots, axis))
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
                _, slots, axis = entry
                # query head h reads kv slot h // (H / H_kv): slots were scaled to query heads
                group = num_heads // (num_kv_heads if axis.kv else num_heads)
                selected = slots == head - head % group
                shape = [1] * np.ndim(leaf)
                shape[axis.axis] = -1
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
