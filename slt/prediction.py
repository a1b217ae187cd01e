"""What a network's outputs say about its data: p(y | x, w) from a prediction function.

A network trained elsewhere (Flax, Equinox, plain JAX) gives outputs f(w, x); its loss says
how they meet the labels. `Prediction` names that observation model, so that slt can both
evaluate the per-example log-likelihood (every estimator) and differentiate the
distribution's natural parameter (the Fisher information, which for these families equals
the generalised Gauss-Newton matrix J^T F(eta) J):

| likelihood | outputs f(w, x) | p(y | x, w) | natural parameter |
|---|---|---|---|
| "gaussian" | means, shaped like y | N(y; f, scale^2) per entry, fixed scale | f / scale^2 |
| "bernoulli" | logits, shaped like y (0/1) | Bernoulli(sigmoid f) per entry | f |
| "categorical" | logits, y's shape + (K,) | Categorical(softmax f), integer y | log softmax f |
| "poisson" | log rates, shaped like y (counts) | Poisson(exp f) per entry | f |

The log-likelihood of an example sums over its entries and keeps every constant (for
"gaussian": -(y - f)^2 / (2 scale^2) - log scale - log(2 pi) / 2), as slt's L_n does.
`Problem.from_predict` builds a `Problem` from one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from numpyro.distributions import constraints

from slt.validation import InputError, call_naming_shapes

__all__ = ["LIKELIHOODS", "Prediction", "leaf_names"]

LIKELIHOODS = ("gaussian", "bernoulli", "categorical", "poisson")


def leaf_names(params: Any) -> tuple[str, ...]:
    """Readable names of a pytree's leaves, in `jax.tree_util.tree_leaves` order: the keys on
    the path joined by "/" ("W1", "params/Dense_0/kernel", "layers/0/b"); "w" for a bare
    array."""
    paths = [path for path, _ in jax.tree_util.tree_flatten_with_path(params)[0]]
    names = tuple(
        jax.tree_util.keystr(path, simple=True, separator="/") or "w" for path in paths
    )
    return names


@dataclass(frozen=True)
class Prediction:
    """An observation model given by a prediction function and a likelihood family.

    Attributes:
      predict_fn: `predict_fn(params, x) -> outputs` for a batch of inputs x (b, ...); pure
        and jittable. The outputs are the mean, logits or log rates of the module table.
      likelihood: one of `LIKELIHOODS`.
      scale: the Gaussian noise sd (a float, or an array broadcasting against one example's
        outputs: a scale per output); 1.0 and unused for the other families.
      input_name, output_name: the data keys of x and y.
    """

    predict_fn: Callable[[Any, jax.Array], jax.Array]
    likelihood: str
    scale: Any
    input_name: str
    output_name: str

    def distribution(self, outputs: jax.Array) -> dist.Distribution:
        """p(y | x, w) for the network outputs of a batch, one batch entry per entry of y."""
        if self.likelihood == "gaussian":
            return dist.Normal(outputs, jnp.asarray(self.scale, outputs.dtype))
        if self.likelihood == "bernoulli":
            return dist.BernoulliLogits(outputs)
        if self.likelihood == "poisson":
            return dist.Poisson(jnp.exp(outputs))
        return dist.CategoricalLogits(outputs)

    def loglik(self, params: Any, batch: Mapping[str, jax.Array]) -> jax.Array:
        """Per-example log p(y_i | x_i, w), shape (b,), summed over each example's entries."""
        outputs = self.predict_fn(params, batch[self.input_name])
        log_prob = self.distribution(outputs).log_prob(batch[self.output_name])
        return jnp.reshape(log_prob, (log_prob.shape[0], -1)).sum(axis=1)

    def nll(self, params: Any, batch: Mapping[str, jax.Array]) -> jax.Array:
        """Per-example negative log-likelihood, shape (b,) (what `Problem.from_loss` takes)."""
        return -self.loglik(params, batch)

    def numpyro_model(self, params: Any) -> Callable[..., None]:
        """The same observation model as a NumPyro model, for slt's geometry.

        One latent site per leaf of `params` (named by `leaf_names`, flat improper prior on
        the reals: the geometry never evaluates a prior), and the observed site
        `output_name` inside a plate over the examples. Called with the data as keyword
        arguments, like every model of a `Problem`.
        """
        leaves, treedef = jax.tree_util.tree_flatten(params)
        sites = tuple(zip(leaf_names(params), (np.shape(leaf) for leaf in leaves), strict=True))

        def model(**data):
            values = [numpyro.sample(name, dist.ImproperUniform(constraints.real, (), shape))
                      for name, shape in sites]
            outputs = self.predict_fn(jax.tree_util.tree_unflatten(treedef, values),
                                      data[self.input_name])
            fn = self.distribution(outputs)
            with numpyro.plate("data", outputs.shape[0]):
                numpyro.sample(self.output_name, fn.to_event(len(fn.batch_shape) - 1),
                               obs=data.get(self.output_name))

        model.__name__ = getattr(self.predict_fn, "__name__", "predict_fn")
        return model

    def check(self, params: Any, data: Mapping[str, jax.Array], where: str = "from_predict"
              ) -> None:
        """Raise InputError unless the outputs at `params` fit the data's y and the family.

        Checks the data keys, that predict_fn returns one finite row per example with y's
        shape (+ (K,) for "categorical"), that y holds what the family observes (0/1, labels
        in [0, K), non-negative counts), and that the Gaussian scale is one per output (it
        broadcasts against one example's outputs without enlarging them). `where` starts the
        messages: "from_predict", or the argument that gave `data` (a query set).
        """
        for role, key in (("inputs", self.input_name), ("outputs", self.output_name)):
            if key not in data:
                raise InputError(
                    f"{where}: the data have no {role} {key!r} (keys: {sorted(data)}); "
                    f"name them with {'x' if role == 'inputs' else 'y'}="
                )
        x, y = data[self.input_name], data[self.output_name]
        outputs = call_naming_shapes(lambda: self.predict_fn(params, x), "predict_fn(params, x)",
                                     data)
        expected = tuple(y.shape) + ((outputs.shape[-1],) if self.likelihood == "categorical"
                                     else ())
        if tuple(jnp.shape(outputs)) != expected or (
            self.likelihood == "categorical" and jnp.ndim(outputs) < 2
        ):
            what = "y's shape + (number of classes,)" if self.likelihood == "categorical" \
                else "y's shape"
            raise InputError(
                f"{where}: predict_fn(params, x) has shape {tuple(jnp.shape(outputs))}; "
                f"a {self.likelihood} likelihood needs {what}, y has shape {tuple(y.shape)}"
            )
        bad = ~np.isfinite(np.asarray(outputs))
        if bad.any():
            example = int(np.unravel_index(np.argmax(bad), bad.shape)[0])
            raise InputError(
                f"{where}: predict_fn(params, x) returned {int(bad.sum())} non-finite "
                f"output(s) (NaN or inf), the first for example {example} of "
                f"{self.input_name!r}: check the prediction function and params"
            )
        self._check_outputs(np.asarray(y), int(outputs.shape[-1]), where)
        if self.likelihood == "gaussian":
            self._check_scale(tuple(y.shape[1:]), outputs.dtype, where)

    def _check_scale(self, example_shape: tuple[int, ...], dtype, where: str) -> None:
        """The Gaussian sd: finite and > 0 in the outputs' float dtype (1e-50 is 0 in
        float32), and one per output: it broadcasts against one example's outputs without
        enlarging them (a scale of 3 entries for 1 output would count each example 3 times;
        one scale per example is not an observation model)."""
        scale = np.asarray(self.scale)
        if scale.dtype.kind in "iuf":
            with np.errstate(over="ignore", under="ignore"):
                scale = scale.astype(dtype)
        if scale.dtype.kind != "f" or not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
            raise InputError(f"{where}: scale must be finite and > 0 in {np.dtype(dtype)}, got "
                             f"{self.scale!r}")
        try:
            fits = np.broadcast_shapes(scale.shape, example_shape) == example_shape
        except ValueError:
            fits = False
        if not fits:
            raise InputError(
                f"{where}: scale has shape {scale.shape}; it must be a float or one sd per "
                f"output, broadcasting against one example's outputs {example_shape} "
                f"(y.shape[1:]) without enlarging them"
            )

    def _check_outputs(self, y: np.ndarray, num_classes: int, where: str) -> None:
        name = self.output_name
        if self.likelihood == "bernoulli" and not np.all((y == 0) | (y == 1)):
            raise InputError(f"{where}: a bernoulli likelihood needs {name} in {{0, 1}}")
        if self.likelihood == "poisson" and not np.all((y >= 0) & (y == np.round(y))):
            raise InputError(f"{where}: a poisson likelihood needs counts {name} >= 0")
        if self.likelihood == "categorical":
            if not np.issubdtype(y.dtype, np.integer):
                raise InputError(
                    f"{where}: a categorical likelihood needs integer class labels "
                    f"{name}, got dtype {y.dtype} (use y.astype(int))"
                )
            if np.any((y < 0) | (y >= num_classes)):
                raise InputError(
                    f"{where}: class labels {name} must lie in [0, {num_classes}) "
                    f"(predict_fn gives {num_classes} logits), got {y.min()}..{y.max()}"
                )
