"""Record SGLD draws of the pre-redesign API (commit db8932c) for the bitwise test."""
import warnings
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
import slt
warnings.simplefilter("ignore")

spec = slt.models.reduced_rank_regression(3, 2, 3)
truth = slt.models.random_low_rank(jax.random.key(5), [3, 2, 3], 1)
problem = spec.problem(spec.simulate(jax.random.key(6), truth, 400))
params = problem.unconstrain(truth)
base = dict(num_chains=2, num_warmup=40, num_samples=60, batch_size=64, chunk_size=25,
            progress=False)
out = {}
def keep(name, r):
    out[f"{name}/loss"] = r.loss_trace
    out[f"{name}/center"] = r.center_loss_trace
    out[f"{name}/step"] = np.asarray(r.step_size)
    out[f"{name}/num_warmup"] = np.asarray(r.num_warmup)
keep("plain", slt.llc(problem, params, jax.random.key(10), step_size=1e-3, **base))
keep("rmsprop", slt.llc(problem, params, jax.random.key(11), step_size=1e-4,
                        preconditioner="rmsprop", gamma=10.0, nbeta=50.0, **base))
keep("restricted", slt.llc(problem, params, jax.random.key(12), step_size=1e-3,
                           restrict_to={"W1": True, "W2": False}, include_prior=True, **base))
keep("extrapolated", slt.llc(problem, params, jax.random.key(13), step_size=1e-3,
                             extrapolate=True, mala_every=0, **base))
keep("auto", slt.llc(problem, params, jax.random.key(14), step_size="auto", **base))
table = slt.llc_table(problem, params, jax.random.key(15), step_size=1e-3, **base)
for name, r in zip(table.parts, table.results):
    keep(f"table_{name}", r)
kernel = slt.loss_kernel(problem, params, jax.random.key(16), np.arange(5), step_size=1e-3,
                         **base)
out["kernel/covariance"] = kernel.covariance
out["kernel/loss_gain"] = kernel.loss_gain
np.savez("tests/data/sgld_reference.npz", **out)
print({k: np.asarray(v).shape for k, v in out.items()})
print(out["auto/step"], out["auto/num_warmup"])
