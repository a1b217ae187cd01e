"""Parts of a network chosen by the names of its weights, and set operations on them.

A part is a **mask**: a pytree with the structure of the parameters whose leaves are booleans,
one per weight (an array of the leaf's shape) or one per leaf (True / False for the whole
leaf), as `slt.LocalPosterior(restrict_to=...)` and `slt.llc_table(..., parts={name: mask})`
take it. The functions here return masks with an array of the leaf's shape at every leaf.

Leaves are named as `slt.prediction.leaf_names` names them: the keys on the path joined by
"/" ("blocks/0/W_Q", "params/Dense_0/kernel", "layers/0/weight"; a Flax NNX `State` of
`nnx.Param`s adds the variable's "/value": "query/kernel/value"). Only **weights** are ever
selected: float arrays. Other leaves (an Equinox module's activation functions, flags, integer
buffers, Python floats such as a dropout rate) are held fixed by slt and get False.

The conveniences recognise the common layouts by these names:

- `layer(params, i)`: i is the first index on the leaf's path ("blocks/0/...", "layers/0/...",
  "h/0/..."), or, with no index on the path, the number of its first "<name>_<i>" key (Flax
  Linen's "Dense_0", "layers_0").
- `attention`: a key contains "attn" or "attention" (any case: GPT-2's "attn/c_attn",
  GPT-NeoX's "attention/dense", Linen's "MultiHeadDotProductAttention_0"), or the name ends in
  TransformerLens' W_Q, W_K, W_V, W_O, b_Q, b_K, b_V, b_O; in Flax NNX `MultiHeadAttention`'s
  query, key, value or out followed by kernel or bias; in Equinox `MultiheadAttention`'s
  query_proj, key_proj, value_proj or output_proj followed by weight or bias; or in Llama's
  q_proj, k_proj, v_proj, o_proj followed by kernel, weight or bias.
- `mlp`: a key contains "mlp", "ffn" or "feed_forward" (any case), or the name ends in
  TransformerLens' W_in, W_out, b_in, b_out.
- `embedding` (token and positional): a key contains "embed" but not "unembed" ("embed",
  "pos_embed", "embed_tokens", "embed_in"; not GPT-NeoX's "embed_out"), or is "wte", "wpe",
  "W_E" or "W_pos".
- `unembedding`: a key contains "unembed" or is "lm_head", "embed_out", "W_U" or "b_U".

Each refuses with an `InputError` naming what it looked for and listing leaf names when
nothing matches. Masks combine with `union`, `intersection` and `difference`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slt.prediction import leaf_names
from slt.validation import InputError

__all__ = [
    "attention",
    "difference",
    "embedding",
    "intersection",
    "layer",
    "layer_index",
    "leaf_masks",
    "matching",
    "mlp",
    "unembedding",
    "union",
]

Mask = Any

# How `attention`, `mlp`, `embedding` and `unembedding` recognise their leaves (the module's
# table): regular expressions searched in the leaf's name.
_KEY = r"(^|/)"
_END = r"(/value)?$"  # a Flax NNX State of nnx.Params names each variable's array "value"
KINDS = {
    "attention": (
        _KEY + r"[^/]*(?i:attn|attention)[^/]*(/|$)",
        _KEY + r"[Wb]_[QKVO]" + _END,
        _KEY + r"(query|key|value|out)/(kernel|bias)" + _END,
        _KEY + r"(query|key|value|output)_proj/(weight|bias)" + _END,
        _KEY + r"[qkvo]_proj/(kernel|weight|bias)" + _END,
    ),
    "mlp": (
        _KEY + r"[^/]*(?i:mlp|ffn|feed_forward)[^/]*(/|$)",
        _KEY + r"[Wb]_(in|out)" + _END,
    ),
    "embedding": (
        _KEY + r"(?![^/]*(?i:unembed))(?!embed_out(/|$))[^/]*(?i:embed)[^/]*(/|$)",
        _KEY + r"(wte|wpe|W_E|W_pos)(/|$)",
    ),
    "unembedding": (
        _KEY + r"[^/]*(?i:unembed)[^/]*(/|$)",
        _KEY + r"(lm_head|embed_out|W_U|b_U)(/|$)",
    ),
}
_SHOWN_NAMES = 12  # leaf names an error message lists


def is_weight(leaf: Any) -> bool:
    """Whether slt samples this leaf: a float array (JAX or NumPy), as Equinox's
    `is_inexact_array` (Python floats, integer and boolean arrays, functions are not)."""
    return (isinstance(leaf, np.ndarray | jax.Array)
            and jnp.issubdtype(leaf.dtype, jnp.floating))


def _named_leaves(params: Any) -> list[tuple[str, Any]]:
    return list(zip(leaf_names(params), jax.tree_util.tree_leaves(params), strict=True))


def _mask(params: Any, select: Callable[[str, tuple], np.ndarray | bool]) -> Mask:
    """The mask with `select(name, path)` (a bool, or a boolean array broadcasting to the
    leaf's shape) at each weight and False elsewhere, as an array of the leaf's shape."""
    paths = [path for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
    leaves = [np.broadcast_to(np.asarray(select(name, path), bool), np.shape(leaf))
              if is_weight(leaf) else np.zeros(np.shape(leaf), bool)
              for (name, leaf), path in zip(_named_leaves(params), paths, strict=True)]
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(params), leaves)


def leaf_listing(params: Any) -> str:
    """The first few weight leaves' names, for an error message."""
    names = [name for name, leaf in _named_leaves(params) if is_weight(leaf)]
    shown = ", ".join(names[:_SHOWN_NAMES])
    more = f", ... ({len(names)} in all)" if len(names) > _SHOWN_NAMES else ""
    return f"{shown}{more}" if names else "(none: params holds no float array)"


def _selected(params: Any, mask: Mask, what: str) -> Mask:
    """`mask` if it selects a weight, else an InputError naming `what`."""
    if not any(np.any(leaf) for leaf in jax.tree_util.tree_leaves(mask)):
        raise InputError(f"{what} matches no weight of params; its weights are: "
                         f"{leaf_listing(params)}")
    return mask


def matching(params: Any, pattern: str | re.Pattern | Sequence[str | re.Pattern]) -> Mask:
    """The weights whose leaf name matches `pattern` (every weight of such a leaf).

    Args:
      params: the parameter pytree (a dict, a Flax NNX State, an Equinox module, ...).
      pattern: a glob (a str: `fnmatch`'s "*", "?", "[...]", matched against the whole name,
        "*" crossing "/": "blocks/*/W_[QK]", "*kernel*"), a compiled regular expression
        (`re.compile(...)`, searched in the name), or a sequence of them (any may match).

    Returns:
      A mask (an array of the leaf's shape at every leaf).

    Raises:
      InputError: a pattern that is not a str or a compiled regular expression, or nothing
        matching (the message names the pattern and lists the leaf names).

    Example:
      >>> params = {"blocks": [{"W_Q": np.ones((2, 3, 1)), "b_O": np.ones(3)}],
      ...           "embed": np.ones((4, 3))}
      >>> mask = slt.parts.matching(params, "blocks/*/W_*")
      >>> [bool(leaf.all()) for leaf in jax.tree.leaves(mask)]
      [True, False, False]
      >>> slt.parts.matching({"W_Q": np.ones(2), "b": np.ones(1)}, "W_K")
      Traceback (most recent call last):
      slt.validation.InputError: pattern 'W_K' matches no weight of params; its weights are: W_Q, b
    """
    patterns = [pattern] if isinstance(pattern, str | re.Pattern) else list(pattern)
    for each in patterns:
        if not isinstance(each, str | re.Pattern):
            raise InputError("pattern must be a glob (str), a compiled regular expression or "
                             f"a sequence of them; got {type(each).__name__} {each!r}")

    def matches(name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, each) if isinstance(each, str)
                   else each.search(name) is not None for each in patterns)

    shown = pattern if isinstance(pattern, str) else (
        pattern.pattern if isinstance(pattern, re.Pattern) else patterns)
    return _selected(params, _mask(params, lambda name, _: matches(name)),
                     f"pattern {shown!r}")


def _kind(params: Any, kind: str) -> Mask:
    expressions = [re.compile(expression) for expression in KINDS[kind]]
    mask = _mask(params, lambda name, _: any(expression.search(name)
                                             for expression in expressions))
    return _selected(params, mask, f"{kind} (recognised by slt.parts' names table)")


def attention(params: Any) -> Mask:
    """Every attention weight, biases included (the output bias too, which belongs to no
    single head); recognised by name (the module's table).

    Raises:
      InputError: no leaf recognised (the message lists the leaf names).

    Example:
      >>> params = {"blocks": [{"W_Q": np.ones((2, 3, 1)), "b_O": np.ones(3),
      ...                       "mlp": {"W_in": np.ones((3, 4))}}]}
      >>> [bool(leaf.all()) for leaf in jax.tree.leaves(slt.parts.attention(params))]
      [True, True, False]
    """
    return _kind(params, "attention")


def mlp(params: Any) -> Mask:
    """Every weight of the MLP (feed-forward) blocks, recognised by name (the module's table).

    Raises:
      InputError: no leaf recognised (the message lists the leaf names).
    """
    return _kind(params, "mlp")


def embedding(params: Any) -> Mask:
    """The token and positional embeddings, recognised by name (the module's table; the
    unembedding is `unembedding`).

    Raises:
      InputError: no leaf recognised (the message lists the leaf names).
    """
    return _kind(params, "embedding")


def unembedding(params: Any) -> Mask:
    """The unembedding (the read-out to the vocabulary, its bias included), recognised by
    name (the module's table).

    Raises:
      InputError: no leaf recognised (the message lists the leaf names).
    """
    return _kind(params, "unembedding")


def layer_index(path: tuple) -> int | None:
    """The layer a leaf's path (`jax.tree_util` keys) lies in: its first integer key (a list
    index, or a dict key that is an int or a string of digits), else the number of its first
    key of the form "<name>_<digits>" (Flax Linen's "Dense_0"); None without either."""
    keys = [getattr(key, name) for key in path
            for name in ("idx", "key", "name") if hasattr(key, name)]
    for key in keys:
        if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
            return int(key)
    for key in keys:
        found = re.fullmatch(r"[A-Za-z]\w*?_(\d+)", str(key))
        if found:
            return int(found.group(1))
    return None


def layer(params: Any, index: int) -> Mask:
    """Every weight of layer `index` (`layer_index`: "blocks/0/...", "layers/0/...",
    "params/Dense_0/...").

    Raises:
      InputError: no weight in that layer (the message lists the layers found).

    Example:
      >>> params = {"blocks": [{"W_Q": np.ones((2, 3, 1))}, {"W_Q": np.ones((2, 3, 1))}],
      ...           "embed": np.ones((4, 3))}
      >>> [bool(leaf.all()) for leaf in jax.tree.leaves(slt.parts.layer(params, 1))]
      [False, True, False]
    """
    mask = _mask(params, lambda _, path: layer_index(path) == index)
    present = sorted({layer_index(path) for path, leaf
                      in jax.tree_util.tree_flatten_with_path(params)[0]
                      if is_weight(leaf)} - {None})
    if not any(np.any(leaf) for leaf in jax.tree_util.tree_leaves(mask)):
        raise InputError(f"layer {index!r} matches no weight of params; the layers found are "
                         f"{present} (by slt.parts.layer_index); its weights are: "
                         f"{leaf_listing(params)}")
    return mask


def leaf_masks(params: Any, mask: Mask, name: str = "mask") -> list[np.ndarray]:
    """The boolean arrays of `mask`, one per leaf of `params` (`tree_leaves` order), each
    broadcast to its leaf's shape.

    Raises:
      InputError: `mask` without the structure of params, a leaf that is not a boolean (or a
        boolean array), or one of another shape than its leaf's; the message names it.
    """
    structure = jax.tree_util.tree_structure(params)
    try:
        leaves = structure.flatten_up_to(mask)
    except (TypeError, ValueError) as error:
        raise InputError(f"{name} must be a pytree of booleans with the structure of params "
                         f"({structure}): {error}") from None
    paths = [path for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
    full = []
    for path, leaf, template in zip(paths, leaves, jax.tree_util.tree_leaves(params), strict=True):
        where = f"{name}{jax.tree_util.keystr(path)}"
        leaf = np.asarray(leaf)
        if leaf.dtype != bool:
            raise InputError(f"{where} must be True / False or a boolean array, got {leaf.dtype}")
        if leaf.shape not in ((), np.shape(template)):
            raise InputError(
                f"{where} has shape {leaf.shape}; a leaf's mask is one boolean or an array of "
                f"its shape {np.shape(template)}"
            )
        full.append(np.broadcast_to(leaf, np.shape(template)))
    return full


def _combine(operation: Callable, masks: Sequence[Mask]) -> Mask:
    """`operation` folded over the masks' boolean leaves (broadcasting a leaf's True / False
    against another mask's array)."""
    structure = jax.tree_util.tree_structure(masks[0])
    combined = None
    for index, mask in enumerate(masks):
        try:
            leaves = [np.asarray(leaf) for leaf in structure.flatten_up_to(mask)]
        except (TypeError, ValueError) as error:
            raise InputError(f"mask {index} has another structure than mask 0: {error}"
                             ) from None
        if any(leaf.dtype != bool for leaf in leaves):
            raise InputError(f"mask {index} is not a pytree of booleans (a mask of "
                             "slt.parts.matching, slt.parts.heads, ...)")
        combined = leaves if combined is None else [
            operation(a, b) for a, b in zip(combined, leaves, strict=True)]
    return jax.tree_util.tree_unflatten(structure, combined)


def union(mask: Mask, *others: Mask) -> Mask:
    """The weights any of the masks selects (masks of the same structure; a leaf's True /
    False broadcasts against another mask's array).

    Raises:
      InputError: masks of different structures, or not of booleans.

    Example:
      >>> a, b = {"w": np.array([True, False])}, {"w": np.array([False, True])}
      >>> slt.parts.union(a, b)
      {'w': array([ True,  True])}
    """
    return _combine(np.logical_or, (mask, *others))


def intersection(mask: Mask, *others: Mask) -> Mask:
    """The weights every mask selects.

    Raises:
      InputError: masks of different structures, or not of booleans.
    """
    return _combine(np.logical_and, (mask, *others))


def difference(mask: Mask, *others: Mask) -> Mask:
    """The weights `mask` selects and none of `others` does ("all attention but the output
    bias": `difference(attention(params), matching(params, "*b_O"))`).

    Raises:
      InputError: masks of different structures, or not of booleans.

    Example:
      >>> a, b = {"w": np.array([True, True])}, {"w": np.array([False, True])}
      >>> slt.parts.difference(a, b)
      {'w': array([ True, False])}
    """
    return _combine(lambda a, b: a & ~b, (mask, *others))
