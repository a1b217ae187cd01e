"""NumPyro model builders. Each returns a `ModelSpec`: the model, its documented prior, its
parameter count d, and `simulate(key, true_params, n)`. Besides them, a small attention-only
transformer in plain JAX with a language task that needs induction (`slt.models.transformer`:
`transformer_init`, `transformer_forward`, `bigram_transitions`, `induction_sequences`,
`head_scores`), for `Problem.from_tokens`.

>>> spec = slt.models.reduced_rank_regression(3, 2, 3)    # y = W2 W1 x + eps, rank <= 2
>>> true_values = {"W1": jnp.ones((2, 3)), "W2": jnp.ones((3, 2))}
>>> data = spec.simulate(jax.random.key(0), true_values, n=100)
>>> problem = spec.problem(data)
>>> problem
Problem(model, n=100, dim=12, sites=['W1', 'W2'], dtype=float64)
"""

from slt.models.base import ModelSpec
from slt.models.linear import (
    deep_linear_network,
    linear_regression,
    random_low_rank,
    reduced_rank_regression,
)
from slt.models.mixtures import fixed_component_mixture, gaussian_mixture, two_component_mixture
from slt.models.networks import ACTIVATIONS, two_layer_network
from slt.models.toys import normal_crossing, product_model
from slt.models.transformer import (
    bigram_transitions,
    head_scores,
    induction_sequences,
    transformer_forward,
    transformer_init,
)

__all__ = [
    "ACTIVATIONS",
    "ModelSpec",
    "bigram_transitions",
    "deep_linear_network",
    "fixed_component_mixture",
    "gaussian_mixture",
    "head_scores",
    "induction_sequences",
    "linear_regression",
    "normal_crossing",
    "product_model",
    "random_low_rank",
    "reduced_rank_regression",
    "transformer_forward",
    "transformer_init",
    "two_component_mixture",
    "two_layer_network",
]
