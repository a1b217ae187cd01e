"""What a set of parts selects, before running anything: weights per leaf and per part."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import numpy as np
import pandas as pd

from slt.parts.select import Mask, is_weight, leaf_masks
from slt.prediction import leaf_names
from slt.validation import InputError

__all__ = ["preview"]


def preview(params: Any, parts: Mapping[str, Mask] | Mask) -> pd.DataFrame:
    """How many weights of each leaf each part selects, and where parts overlap.

    Args:
      params: the parameter pytree.
      parts: {name: mask} (as `slt.llc_table` takes them) or one mask (named "mask").

    Returns:
      A DataFrame with one row per weight leaf (index: its `leaf_names` name) and a last row
      "total": columns "shape", "weights" (the leaf's size), one column per part (the
      weights of the leaf it selects), "unselected" (in no part) and "shared" (in two parts
      or more: overlapping parts, as grouped-query heads sharing their kv weights).

    Raises:
      InputError: parts empty, or a mask `slt.LocalPosterior`'s restrict_to would refuse
        (another structure, not boolean, a wrong shape); the message names the part.

    Example:
      >>> params = {"W": np.ones((2, 3)), "b": np.ones(3)}
      >>> parts = {"row0": {"W": np.array([[True] * 3, [False] * 3]), "b": False},
      ...          "b": {"W": False, "b": True}}
      >>> slt.parts.preview(params, parts)
              shape  weights  row0  b  unselected  shared
      leaf
      W      (2, 3)        6     3  0           3       0
      b        (3,)        3     0  3           0       0
      total                9     3  3           3       0
    """
    if not isinstance(parts, Mapping) or _is_mask(params, parts):
        parts = {"mask": parts}
    if not parts:
        raise InputError("parts is empty: give {name: mask} or one mask")
    counts = {}
    for name, mask in parts.items():
        try:
            counts[name] = leaf_masks(params, mask, name=f"parts[{name!r}]")
        except InputError as error:
            raise InputError(f"part {name!r}: {error}") from None
    leaves = jax.tree_util.tree_leaves(params)
    weights = [index for index, leaf in enumerate(leaves) if is_weight(leaf)]
    names = leaf_names(params)
    table = pd.DataFrame(
        {"shape": [str(np.shape(leaves[i])) for i in weights],
         "weights": [int(np.size(leaves[i])) for i in weights]}
        | {name: [int(masks[i].sum()) for i in weights] for name, masks in counts.items()},
        index=pd.Index([names[i] for i in weights], name="leaf"))
    covered = [sum(masks[i].astype(int) for masks in counts.values()) for i in weights]
    table["unselected"] = [int((count == 0).sum()) for count in covered]
    table["shared"] = [int((count > 1).sum()) for count in covered]
    total = table.drop(columns="shape").sum().to_frame("total").T.assign(shape="")
    return pd.concat([table, total[table.columns]]).rename_axis("leaf")


def _is_mask(params: Any, parts: Mapping) -> bool:
    """Whether `parts` is one mask of params (rather than {name: mask})."""
    try:
        leaf_masks(params, parts)
    except InputError:
        return False
    return True
