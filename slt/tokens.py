"""Language models as Problems: next-token cross-entropy over sequences (`Problem.from_tokens`).

The examples are the sequences. For n sequences of T tokens, a model's logits
`logits_fn(params, tokens) -> (b, T, V)` (position t's logits predict token t + 1) and a mask
m (n, T) of the **target** positions that count, the per-sequence negative log-likelihood is

    NLL_i(w) = sum_{t=1}^{T-1} m[i, t] * (-log softmax(logits_i[t - 1])[tokens[i, t]])

(column 0 of m is never a target: no position predicts the first token), computed stably as
logsumexp(logits) - logits[target], without a one-hot of the vocabulary, in at least float32
(bfloat16 logits are upcast before the logsumexp). L_n(w) = (1/n) sum_i NLL_i(w): slt's
convention, summed token losses per sequence, mean over sequences. Every estimator then works
unchanged; an SGLD minibatch is a batch of sequences.

**devinterp's n_beta.** devinterp 2.0.1 (`devinterp.slt.llc.llc` / `sample`) draws from
exp(-n_beta * lbar(w) - (localization / 2) |w - w*|^2), lbar the mean of its per-token losses
over the batch and the T - 1 loss positions of each sequence (`_loss.mean()` over a
(batch, T - 1) array), with the step (lr / 2) (-n_beta grad lbar - localization (w - w*)) +
sqrt(lr) N(0, 1), and reports n_beta (E[lbar] - lbar(w*)). With m loss positions per sequence,
lbar = L_n / m, so its posterior is slt's exp(-nbeta L_n - (gamma / 2) |w - w*|^2) at

    nbeta = n_beta / m,   gamma = localization,   step_size = lr,

and its lambda_hat n_beta (E[L_n] - L_n(w*)) / m is slt's nbeta (E[L_n] - L_n(w*)): the same
number. For devinterp's own loss, m = T - 1 for every sequence, a masked loss included when
its loss_fn writes zeros at the positions that do not count (its mean still divides by T - 1):
the conversion is then exact. A loss_fn that divides by the counted tokens of each batch has a
normaliser that varies from batch to batch; `nbeta_from_devinterp` with m the mean number of
counted tokens per sequence matches it on average only, and the two posteriors differ slightly.

Example:
  >>> nbeta_from_devinterp(1000.0, tokens_per_sequence=255)   # T = 256 tokens, no mask
  3.9215686274509802
  >>> nbeta_to_devinterp(3.9215686274509802, tokens_per_sequence=255)
  1000.0
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from slt.validation import InputError, require_callable, require_positive

__all__ = ["check_logits", "nbeta_from_devinterp", "nbeta_to_devinterp", "next_token_nll",
           "token_data"]

Params = Any


def nbeta_from_devinterp(n_beta: float, tokens_per_sequence: float) -> float:
    """slt's nbeta from devinterp's n_beta: n_beta / m (module doc).

    Args:
      n_beta: devinterp's inverse temperature, applied to the mean per-token loss.
      tokens_per_sequence: m, the loss positions of a sequence that devinterp's mean divides
        by: T - 1 for sequences of T tokens (masked or not, with devinterp's own loss); the
        mean number of counted tokens per sequence for a loss normalised by its counted
        tokens (then approximately: module doc).

    Returns:
      nbeta for `slt.LocalPosterior`, applied to L_n, the mean over sequences of their summed
      token losses; lambda_hat is the same number in both libraries.

    Raises:
      InputError: either argument not a finite number > 0.
    """
    return require_positive("n_beta", n_beta) / require_positive(
        "tokens_per_sequence", tokens_per_sequence)


def nbeta_to_devinterp(nbeta: float, tokens_per_sequence: float) -> float:
    """devinterp's n_beta from slt's nbeta: nbeta * m, the inverse of `nbeta_from_devinterp`.

    Raises:
      InputError: either argument not a finite number > 0.
    """
    return require_positive("nbeta", nbeta) * require_positive(
        "tokens_per_sequence", tokens_per_sequence)


def token_data(tokens: Any, loss_mask: Any = None) -> dict[str, np.ndarray]:
    """The data of a token Problem: {"tokens": (n, T) int32, "loss_mask": (n, T) bool}.

    Args:
      tokens: integer array (n, T), n >= 1 sequences of T >= 2 tokens.
      loss_mask: booleans (or 0 / 1) of shape (n, T) marking the target positions that count;
        column 0 must be False (token 0 is no position's target). Default: positions
        1 ... T - 1 of every sequence.

    Raises:
      InputError: tokens not integers, not 2-D, T < 2, negative; a mask of another shape,
        not boolean, marking column 0 or no position at all.
    """
    array = np.asarray(tokens)
    if array.dtype.kind not in "iu":
        raise InputError(f"tokens must be an integer array (n, T), got dtype {array.dtype}")
    if array.ndim != 2 or array.shape[0] < 1 or array.shape[1] < 2:
        raise InputError(f"tokens must have shape (n, T), n >= 1 sequences of T >= 2 tokens; "
                         f"got shape {array.shape}")
    if array.min() < 0 or array.max() > np.iinfo(np.int32).max:
        raise InputError(f"tokens must lie in [0, V); got values in [{array.min()}, "
                         f"{array.max()}]")
    if loss_mask is None:
        mask = np.ones(array.shape, bool)
        mask[:, 0] = False
    else:
        mask = np.asarray(loss_mask)
        if mask.shape != array.shape:
            raise InputError(f"loss_mask must have the shape of tokens, {array.shape}; got "
                             f"{mask.shape}")
        if mask.dtype != bool and not (mask.dtype.kind in "iu" and np.isin(mask, (0, 1)).all()):
            raise InputError(f"loss_mask must hold booleans (or 0 / 1), got dtype {mask.dtype}")
        mask = mask.astype(bool)
        if mask[:, 0].any():
            raise InputError(
                "loss_mask marks column 0 as a target, but no position predicts token 0: "
                "loss_mask[i, t] says whether token t (predicted from position t - 1) counts. "
                "A mask of the inputs whose next token counts is this one shifted right by one "
                "(np.pad(mask[:, :-1], ((0, 0), (1, 0))))")
        if not mask.any():
            raise InputError("loss_mask counts no token: L_n would be 0 everywhere")
    return {"tokens": array.astype(np.int32), "loss_mask": mask}


def next_token_nll(logits_fn: Callable[[Params, jax.Array], jax.Array]
                   ) -> Callable[[Params, dict], jax.Array]:
    """nll(params, batch) -> (b,): each sequence's summed masked next-token cross-entropy
    NLL_i (module doc) of `logits_fn` on a batch of `token_data`."""
    require_callable("logits_fn", logits_fn)

    def nll(params: Params, batch: dict) -> jax.Array:
        tokens = batch["tokens"]
        logits = logits_fn(params, tokens)[:, :-1]
        logits = logits.astype(jnp.promote_types(logits.dtype, jnp.float32))
        targets = jnp.take_along_axis(logits, tokens[:, 1:, None], axis=-1)[..., 0]
        per_token = jax.nn.logsumexp(logits, axis=-1) - targets
        return jnp.sum(jnp.where(batch["loss_mask"][:, 1:], per_token, 0.0), axis=1)

    return nll


def check_logits(logits_fn: Callable, params: Params, data: dict) -> int:
    """The vocabulary size V of `logits_fn`, read off its output shape on the first sequences
    (traced, not run); the tokens must lie in [0, V).

    Raises:
      InputError: logits_fn fails on tokens of shape (b, T) or does not return (b, T, V)
        float logits; a token >= V.
    """
    tokens = data["tokens"]
    head = jax.ShapeDtypeStruct((min(2, tokens.shape[0]), tokens.shape[1]), tokens.dtype)
    try:
        logits = jax.eval_shape(logits_fn, params, head)
    except TypeError as error:
        raise InputError(f"logits_fn(params, tokens) failed on tokens of shape {head.shape}: "
                         f"{error}") from None
    shape = getattr(logits, "shape", None)
    if (shape is None or len(shape) != 3 or tuple(shape[:2]) != head.shape
            or not jnp.issubdtype(logits.dtype, jnp.floating)):
        got = shape if shape is not None else type(logits).__name__
        raise InputError(f"logits_fn(params, tokens) must return float logits of shape "
                         f"(b, T, V) = ({head.shape[0]}, {head.shape[1]}, V) for tokens of shape "
                         f"{head.shape}; got {got}")
    vocabulary = int(shape[2])
    if int(tokens.max()) >= vocabulary:
        raise InputError(f"tokens must lie in [0, V) = [0, {vocabulary}) (V from logits_fn's "
                         f"output); the largest is {int(tokens.max())}")
    return vocabulary
