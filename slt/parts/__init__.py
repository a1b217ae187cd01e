"""Parts of a network by name: masks for `slt.llc_table` and `slt.LocalPosterior(restrict_to=)`.

Select weights by the names of their leaves (`matching`: a glob or a regular expression;
`layer`, `attention`, `mlp`, `embedding`, `unembedding`: the common layouts, recognised by
name), combine masks (`union`, `intersection`, `difference`), split attention into one part
per head (`heads`, with the layouts of TransformerLens, Flax NNX, Equinox, GPT-NeoX,
grouped-query attention and the fused grouped-query projections of Phi-3, Falcon and
GPT-BigCode in `LAYOUTS`, or your own `HeadAxis`es and `FusedQKV`s), and see what a set of
parts selects before running (`preview`).

Example:
  >>> block = {"W_Q": np.ones((2, 3, 1)), "W_K": np.ones((2, 3, 1)),
  ...          "W_V": np.ones((2, 3, 1)), "W_O": np.ones((2, 1, 3)), "b_O": np.ones(3)}
  >>> params = {"embed": np.ones((5, 3)), "blocks": [block]}
  >>> parts = slt.parts.heads(params, "transformer_lens", num_heads=2)
  >>> slt.parts.preview(params, parts)[["weights", "L0.H0", "L0.H1", "shared"]]
                weights  L0.H0  L0.H1  shared
  leaf
  blocks/0/W_K        6      3      3       0
  blocks/0/W_O        6      3      3       0
  blocks/0/W_Q        6      3      3       0
  blocks/0/W_V        6      3      3       0
  blocks/0/b_O        3      0      0       0
  embed              15      0      0       0
  total              42     12     12       0
"""

from slt.parts import select
from slt.parts.counts import preview
from slt.parts.heads import LAYOUTS, FusedQKV, HeadAxis, heads
from slt.parts.select import *  # noqa: F403  (its public names, its __all__)

__all__ = ["LAYOUTS", "FusedQKV", "HeadAxis", "heads", "preview", *select.__all__]
