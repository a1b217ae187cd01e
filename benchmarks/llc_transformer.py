"""lambda_hat of a transformer and of each of its heads: slt against devinterp 2.0.1.

GPU run (one NVIDIA H100/H200, no network; devinterp and the packages it needs travel as wheels
in .whl/, fetched as benchmarks/gpu_wheels.txt says):

    cd <repo root>
    pip install --no-deps --no-index .whl/*.whl --target /tmp/site
    PYTHONPATH=/tmp/site:. python3 benchmarks/llc_transformer.py --device gpu

(`--sizes hoogland,pythia` is the default; both sizes, about 3 to 5 minutes estimated.) The
GPU machine seen: Python 3.12.3, torch 2.11.0+cu130, JAX 0.11.2, transformers 5.17.0, pyarrow
25.0.1, huggingface_hub 1.33.0, fsspec 2026.7.0: the wheels' requirements hold. It writes
$OUT/llc_transformer_gpu.json as it goes (each finished measurement is saved at once), prints
progress to stderr and the results to stdout; `--gpu-report FILE` renders their tables.
`--device gpu --dry-run` runs the same code at tiny sizes (on a CPU too, with
SLT_BENCH_DEVINTERP_PYTHON naming a python with devinterp). CPU (this machine): `python -m
benchmarks.llc_transformer` (the section of benchmarks/RESULTS.md); `--dry-run`: tiny sizes,
a smoke test (a minute on an idle machine).

The model: a 2-layer attention-only transformer in TransformerLens's layout, no layer norm, no
MLP (L = 2 layers, H = 4 heads, d_model D = 32, d_head Dh = 8 by default), in plain JAX here
(`init_params`, `forward`), trained with Adam on an induction task (Markov-chain text with a
repeated segment, `induction_tokens`). Its PyTorch twin (benchmarks/transformer_twin.py, run
by benchmarks/devinterp_runner.py in the devinterp venv) is loaded with the same weights from
an .npz; its per-token losses on the same tokens are checked against JAX's (float32).

The loss and the temperature. slt: L_n(w) = (1/n) sum over the n sequences of the sequence's
negative log-likelihood, the sum over its m = T - 1 next-token targets of the token
cross-entropy (`Problem.from_loss` with a per-sequence loss). devinterp 2.0.1: its SGLD takes
the gradient of the MEAN per-token loss over the minibatch's sequences and positions
(`sample_single_chain`: `_loss.mean().backward()`; `SGLD.step`: dw = n_beta grad + gamma
(w - w*), w -= (lr / 2) dw + sqrt(lr) N(0, I) on the masked weights) and its lambda_hat is
n_beta (mean per-token loss - init loss) (`compute_llc`). The mean per-token loss is L_n / m,
so slt's n beta = n_beta / m gives the same posterior and the same lambda_hat; lr = epsilon
and localization = gamma carry over as they are (as in benchmarks/llc_speed.py).

The parts. A head (l, h) is W_Q[h], W_K[h], W_V[h], W_O[h], b_Q[h], b_K[h], b_V[h] of layer l
(b_O is shared by the layer's heads: in no head), all other weights held at w*: slt
`LocalPosterior(restrict_to=mask)` masks through `slt.llc_trajectory(..., parts)` (every head at
every checkpoint in one program), devinterp 2.0.1 `llc(...,
param_masks=create_param_masks(model, "l0h1"))` (its own masks for TransformerLens models; the
same weights), one `llc` call per head per checkpoint as a devinterp user loops.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))  # run as a script (the GPU command) or as a module

from benchmarks import pythia_shaped  # noqa: E402

GPT_NEOX = "gpt_neox.embed_in.weight"  # the key that marks a GPT-NeoX parameter dict

# the spec's model, and the sizes of each run
SIZES = {
    "cpu": {"vocab": 16, "length": 32, "layers": 2, "heads": 4, "d_model": 32, "d_head": 8,
            "sequences": 1024, "train_steps": 2000, "checkpoints": (0, 200, 2000)},
    "dry": {"vocab": 8, "length": 12, "layers": 2, "heads": 2, "d_model": 8, "d_head": 4,
            "sequences": 128, "train_steps": 60, "checkpoints": (0, 60)},
    # Hoogland et al. 2024's size: 2-layer attention-only, d_model 256, 8 heads; V = 5000,
    # T = 256: 3.2M parameters (2.6M of them in the embeddings)
    "hoogland": {"vocab": 5000, "length": 256, "layers": 2, "heads": 8, "d_model": 256,
                 "d_head": 32, "sequences": 2048, "train_steps": 300, "checkpoints": (300,)},
    # Pythia-70M's shape (GPT-NeoX layout, rotary positions: benchmarks/pythia_shaped.py),
    # 70.4M parameters, on sequences of 128 tokens
    "pythia": {"architecture": "gpt_neox", "vocab": 50_304, "length": 128, "layers": 6,
               "heads": 8, "d_model": 512, "d_head": 64, "d_mlp": 2048, "sequences": 256,
               "train_steps": 200, "checkpoints": (200,)},
    "pythia-dry": {"architecture": "gpt_neox", "vocab": 2000, "length": 16, "layers": 2,
                   "heads": 2, "d_model": 16, "d_head": 8, "d_mlp": 64, "sequences": 64,
                   "train_steps": 20, "checkpoints": (20,)},
}
# the SGLD settings of both sides: epsilon, gamma, chains, steps, batch (sequences); n beta is
# slt's (per sequence), devinterp's n_beta = m x this. The draws are a whole number of passes
# over the n // batch minibatches: devinterp's chains replay one fixed cycle of them
# (`itertools.cycle`), so its draws' mean L_b(w*) is then L_n(w*) exactly, not a partial
# cycle's (which biases its lambda_hat by n beta times that difference).
SAMPLING = {
    "cpu": {"num_chains": 4, "num_warmup": 64, "num_samples": 128, "step_size": 3e-5,
            "gamma": 100.0, "batch_size": 32},
    "dry": {"num_chains": 2, "num_warmup": 8, "num_samples": 16, "step_size": 1e-4,
            "gamma": 100.0, "batch_size": 16},
    "hoogland": {"num_chains": 4, "num_warmup": 50, "num_samples": 200, "step_size": 1e-5,
                 "gamma": 100.0, "batch_size": 8},
    "pythia": {"num_chains": 4, "num_warmup": 50, "num_samples": 100, "step_size": 1e-6,
               "gamma": 100.0, "batch_size": 8},
    "pythia-dry": {"num_chains": 2, "num_warmup": 4, "num_samples": 16, "step_size": 1e-6,
                   "gamma": 100.0, "batch_size": 16},
}
ROUNDS = 2
DEVINTERP_VERSION = "2.0.1"
GPU_RESULTS = "llc_transformer_gpu.json"
TWIN_CHUNK = 128  # sequences per block of the twin check's losses, on both sides


_STARTED = time.perf_counter()


def log(message: str) -> None:
    """A progress line on stderr, with the seconds since the benchmark's module was loaded."""
    seconds = time.perf_counter() - _STARTED
    print(f"llc_transformer [{seconds:6.1f} s]: {message}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- the model


def init_params(key, size: dict) -> dict:
    """Random weights of the spec's layout: {"embed": (V, D), "pos_embed": (T, D), "blocks":
    [{"W_Q", "W_K", "W_V": (H, D, Dh), "W_O": (H, Dh, D), "b_Q", "b_K", "b_V": (H, Dh), "b_O":
    (D,)} per layer], "unembed": (D, V), "b_U": (V,)}; weights N(0, 1 / fan-in), biases 0."""
    import jax
    import jax.numpy as jnp

    V, T, D, H, Dh = (size[k] for k in ("vocab", "length", "d_model", "heads", "d_head"))
    keys = iter(jax.random.split(key, 3 + 4 * size["layers"]))

    def normal(shape, fan_in):
        return jax.random.normal(next(keys), shape, jnp.float32) / np.sqrt(fan_in)

    blocks = [{"W_Q": normal((H, D, Dh), D), "W_K": normal((H, D, Dh), D),
               "W_V": normal((H, D, Dh), D), "W_O": normal((H, Dh, D), H * Dh),
               "b_Q": jnp.zeros((H, Dh)), "b_K": jnp.zeros((H, Dh)), "b_V": jnp.zeros((H, Dh)),
               "b_O": jnp.zeros(D)} for _ in range(size["layers"])]
    return {"embed": normal((V, D), 1.0), "pos_embed": normal((T, D), 1.0), "blocks": blocks,
            "unembed": normal((D, V), D), "b_U": jnp.zeros(V)}


def forward(params: dict, tokens):
    """Logits (batch, T, V) of integer tokens (batch, T); position t predicts token t + 1.
    (A GPT-NeoX parameter dict: `pythia_shaped.forward`.)"""
    import jax
    import jax.numpy as jnp

    if GPT_NEOX in params:
        return pythia_shaped.forward(params, tokens)
    length = tokens.shape[1]
    x = params["embed"][tokens] + params["pos_embed"][:length]
    causal = jnp.tril(jnp.ones((length, length), bool))
    for block in params["blocks"]:
        q, k, v = (jnp.einsum("btd,hde->bhte", x, block[f"W_{name}"]) + block[f"b_{name}"][:, None]
                   for name in "QKV")
        scores = jnp.einsum("bhse,bhte->bhst", q, k) / np.sqrt(q.shape[-1])
        attention = jax.nn.softmax(jnp.where(causal, scores, -jnp.inf), axis=-1)
        z = attention @ v
        x = x + jnp.einsum("bhte,hed->btd", z, block["W_O"]) + block["b_O"]
    return x @ params["unembed"] + params["b_U"]


def per_token_nll(params: dict, tokens):
    """Cross-entropy of token t + 1 given tokens 0..t: (batch, T - 1)."""
    import jax
    import jax.numpy as jnp

    log_probs = jax.nn.log_softmax(forward(params, tokens)[:, :-1], axis=-1)
    return -jnp.take_along_axis(log_probs, tokens[:, 1:, None], axis=-1)[..., 0]


def per_sequence_nll(params: dict, batch: dict):
    """slt's per-example loss: each sequence's summed next-token cross-entropy, (batch,)."""
    return per_token_nll(params, batch["tokens"]).sum(axis=1)


def induction_tokens(seed: int, size: dict) -> np.ndarray:
    """`sequences` token sequences of length T over V tokens (int32): a Markov chain (each
    token's next-token probabilities a Dirichlet(0.3) draw over every token, for V <= 1024,
    else over 64 random successors; so a few next tokens dominate), then a segment of length
    T // 4 from the first half copied over a place in the second half, so that an induction
    head can predict the copy from its first token on."""
    rng = np.random.default_rng(seed)
    V, T, n = size["vocab"], size["length"], size["sequences"]
    width = V if V <= 1024 else 64
    transitions = rng.dirichlet(np.full(width, 0.3), size=V)
    successors = (np.broadcast_to(np.arange(V), (V, V)) if width == V
                  else rng.integers(V, size=(V, width)))
    cumulative = np.cumsum(transitions, axis=1)
    tokens = np.empty((n, T), np.int64)
    tokens[:, 0] = rng.integers(V, size=n)
    for t in range(1, T):
        previous = tokens[:, t - 1]
        choice = np.minimum((cumulative[previous] < rng.random((n, 1))).sum(axis=1), width - 1)
        tokens[:, t] = successors[previous, choice]
    segment = T // 4
    for row in tokens:
        source = rng.integers(0, T // 2 - segment + 1)
        target = rng.integers(T // 2, T - segment + 1)
        row[target:target + segment] = row[source:source + segment]
    return tokens.astype(np.int32)


def train(seed: int, size: dict, tokens: np.ndarray) -> list[dict]:
    """Adam (learning rate 3e-3; 1e-3 for GPT-NeoX) on the mean per-token loss over
    minibatches of 64 sequences, from `init_params` (GPT-NeoX: `pythia_shaped.init_params`);
    the parameters at each of size["checkpoints"] (training steps)."""
    import jax
    import jax.numpy as jnp
    import optax

    optimizer = optax.adam(3e-3 if size.get("architecture") != "gpt_neox" else 1e-3)
    initial = pythia_shaped.init_params if size.get("architecture") == "gpt_neox" else init_params
    params = initial(jax.random.key(seed), size)
    state = optimizer.init(params)

    @jax.jit
    def step(params, state, batch):
        gradient = jax.grad(lambda p: per_token_nll(p, batch).mean())(params)
        updates, state = optimizer.update(gradient, state)
        return optax.apply_updates(params, updates), state

    rng = np.random.default_rng(seed + 1)
    checkpoints, wanted = [], set(size["checkpoints"])
    for index in range(size["train_steps"] + 1):
        if index in wanted:
            checkpoints.append(jax.tree.map(jnp.asarray, params))
        if index < size["train_steps"]:
            batch = jnp.asarray(tokens[rng.integers(len(tokens), size=64)])
            params, state = step(params, state, batch)
    return checkpoints


def flat_weights(params: dict) -> dict[str, np.ndarray]:
    """{"embed": ..., "blocks.0.W_Q": ..., ...}: the names of the .npz the twin reads (a
    GPT-NeoX dict: HuggingFace's state dict, `pythia_shaped.flat_weights`)."""
    if GPT_NEOX in params:
        return pythia_shaped.flat_weights(params)
    flat = {name: np.asarray(params[name], np.float32)
            for name in ("embed", "pos_embed", "unembed", "b_U")}
    for layer, block in enumerate(params["blocks"]):
        flat.update({f"blocks.{layer}.{leaf}": np.asarray(value, np.float32)
                     for leaf, value in block.items()})
    return flat


def head_parts(params: dict) -> dict[str, dict]:
    """{"l0h0": mask, ...}: each head's weights as `LocalPosterior.restrict_to` masks
    (devinterp's restriction strings as the names); a GPT-NeoX dict's:
    `pythia_shaped.head_parts`."""
    import jax

    if GPT_NEOX in params:
        return pythia_shaped.head_parts(params)
    heads = params["blocks"][0]["W_Q"].shape[0]
    parts = {}
    for layer in range(len(params["blocks"])):
        for head in range(heads):
            mask = jax.tree.map(lambda leaf: np.zeros(np.shape(leaf), bool), params)
            for name, value in mask["blocks"][layer].items():
                if name != "b_O":
                    value[head] = True
            parts[f"l{layer}h{head}"] = mask
    return parts


# ----------------------------------------------------------------------------- slt's side


def slt_problem(tokens: np.ndarray, params: dict):
    """The slt Problem: per-sequence loss on the sequences, float32."""
    from slt import Problem

    return Problem.from_loss(per_sequence_nll, params, {"tokens": tokens}, x64=False)


def slt_settings(config: dict, restrict_to=None) -> dict:
    """`llc`'s posterior, sampler and plan for the chain settings `config`
    (`benchmarks.llc_speed.slt_values`: no MALA measurement, no progress bar), every chain
    started at w* as devinterp's (`RunPlan(start="center")`; slt's default dispersed start,
    with this short warmup, left λ̂ at the trained checkpoints 15-100% above devinterp's:
    benchmarks/RESULTS.md)."""
    from dataclasses import replace

    from benchmarks.llc_speed import slt_values

    values = slt_values(config, restrict_to=restrict_to)
    return {**values, "plan": replace(values["plan"], start="center")}


def slt_parts(problem, checkpoints: list[dict], key, parts: dict, config: dict):
    """lambda_hat ± se of every part at every checkpoint with slt: (means, ses), each
    (checkpoint, part); wall and CPU seconds. One `slt.llc_trajectory(..., parts=parts)`:
    every part's chains at every checkpoint vmapped in one program."""
    import slt
    from benchmarks.llc_speed import _cpu_seconds

    cpu, start = _cpu_seconds(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # early checkpoints are no minima: llc says so
        result = slt.llc_trajectory(problem, checkpoints, key, parts, **slt_settings(config))
    wall, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    return result.llc_means, result.std_errors, wall, cpu


def slt_full(problem, checkpoints, key, config):
    """The whole model's lambda_hat ± se at every checkpoint: one `slt.llc_trajectory`."""
    import slt
    from benchmarks.llc_speed import _cpu_seconds

    cpu, start = _cpu_seconds(), time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = slt.llc_trajectory(problem, checkpoints, key, **slt_settings(config))
    return (result.llc_means, result.std_errors, time.perf_counter() - start,
            _cpu_seconds() - cpu, result.run_time)


# ----------------------------------------------------------------------------- devinterp's side


def devinterp_parts(worker, checkpoints: list[int], parts: list[str], config: dict, seed: int,
                    nbeta: float) -> dict:
    """One devinterp 2.0.1 `llc` call per part per checkpoint (a user's loop): means and
    standard errors (checkpoint, part) over its draws alone (burn-in dropped, as slt), its
    own `llc_mean` (burn-in included), wall and CPU seconds summed over the calls.

    The standard error is slt's (`trace_statistics`: sd / sqrt(bulk ESS)) of the per-draw
    n_beta (mean per-token loss - init loss); devinterp's chains share their minibatches
    (`match_sampling_input_ids_across_chains`), so it understates the minibatch part of the
    error."""
    from slt.samplers.run_length import trace_statistics

    reply = worker.run({**config, "nbeta": nbeta, "seed": seed, "checkpoints": checkpoints,
                        "parts": parts})
    shape = (len(checkpoints), len(parts))
    stats = [trace_statistics(nbeta * (np.asarray(losses) - init))
             for losses, init in zip(reply["draw_losses"], reply["init_loss"], strict=True)]
    return {"means": np.array([s[0] for s in stats]).reshape(shape),
            "ses": np.array([s[1] for s in stats]).reshape(shape),
            "llc_mean": np.array(reply["llc_mean"]).reshape(shape),
            "wall": float(sum(reply["wall"])), "cpu": float(sum(reply["cpu"])),
            "call_walls": reply["wall"]}


def devinterp_python(device: str) -> Path:
    """The python that runs devinterp: the benchmark's devinterp 2.0.1 venv on CPU (created
    on first use), this python on the GPU machine (devinterp from the wheels on PYTHONPATH;
    SLT_BENCH_DEVINTERP_PYTHON names another, for a smoke test of `--device gpu --dry-run`
    on a machine without a GPU)."""
    if device == "gpu":
        return Path(os.environ.get("SLT_BENCH_DEVINTERP_PYTHON", sys.executable))
    from benchmarks.llc_speed import ensure_devinterp_venv

    return ensure_devinterp_venv(DEVINTERP_VERSION)


def write_npz(path: Path, tokens: np.ndarray, checkpoints: list[dict]) -> None:
    """The .npz the runner's "transformer" kind reads: the tokens and every checkpoint's
    weights stacked on a leading axis."""
    flats = [flat_weights(point) for point in checkpoints]
    neox = GPT_NEOX in checkpoints[0]
    heads = (checkpoints[0]["gpt_neox.layers.0.attention.query_key_value.weight"] if neox
             else checkpoints[0]["blocks"][0]["W_Q"]).shape[0]
    np.savez(path, kind=np.array("transformer"), heads=np.array(heads),
             architecture=np.array("gpt_neox" if neox else "attention_only"), tokens=tokens,
             checkpoints=np.array(len(checkpoints)), weight_names=np.array(list(flats[0])),
             **{name: np.stack([flat[name] for flat in flats]) for name in flats[0]})


def twin_check(worker, params: dict, tokens: np.ndarray, checkpoint: int, folder: Path,
               device: str = "cpu") -> float:
    """max |per-token loss of the torch twin - JAX's| on every sequence at a checkpoint
    (both sides in blocks of `TWIN_CHUNK` sequences: at the Hoogland size all 2 048
    sequences' logits at once need about 20 GB)."""
    import jax

    path = folder / "twin_losses.npy"
    worker.run({"losses_path": str(path), "checkpoint": checkpoint, "seed": 0,
                "chunk": TWIN_CHUNK, "device": "cuda" if device == "gpu" else "cpu"})
    losses = jax.jit(per_token_nll)
    jax_losses = np.concatenate([np.asarray(losses(params, tokens[start:start + TWIN_CHUNK]))
                                 for start in range(0, len(tokens), TWIN_CHUNK)])
    return float(np.max(np.abs(np.load(path) - jax_losses)))


def masks_check(worker, parts: dict, folder: Path) -> list[str]:
    """The parts whose devinterp masks (`create_param_masks(model, part)` on the twin) select
    other weights than slt's masks `parts`; empty when every part selects the same."""
    path = folder / "masks.npz"
    worker.run({"masks_path": str(path), "parts": list(parts), "seed": 0})
    theirs = dict(np.load(path))
    differ = []
    for part, mask in parts.items():
        ours = {name: value > 0.5 for name, value in flat_weights(mask).items() if value.any()}
        named = {key.split(":", 1)[1]: value for key, value in theirs.items()
                 if key.startswith(f"{part}:")}
        if set(ours) != set(named) or any(not np.array_equal(ours[name], named[name])
                                          for name in ours):
            differ.append(part)
    return differ


# ----------------------------------------------------------------------------- CPU measurement


def measure(seed: int = 0, size_name: str = "cpu", rounds: int = ROUNDS) -> dict:
    """Train, check the twin, then lambda_hat of the model and every head at every checkpoint
    from both libraries, the heads' trajectory timed in `rounds` interleaved rounds."""
    import jax

    from benchmarks.llc_speed import DevinterpWorker

    size = SIZES[size_name]
    load = [os.getloadavg()]
    tokens = induction_tokens(seed, size)
    log(f"training {size['train_steps']} steps")
    checkpoints = train(seed, size, tokens)
    problem = slt_problem(tokens, checkpoints[-1])
    m = size["length"] - 1
    nbeta = float(problem.n / np.log(problem.n))  # slt's default, per sequence
    config = {**SAMPLING[size_name], "nbeta": nbeta}  # devinterp's n_beta: nbeta * m
    parts = head_parts(checkpoints[-1])
    folder = Path(tempfile.mkdtemp(prefix="slt-llc-transformer-"))
    npz = folder / "transformer.npz"
    write_npz(npz, tokens, checkpoints)
    worker = DevinterpWorker(devinterp_python("cpu"), npz, folder)
    indices = list(range(len(checkpoints)))
    try:
        out = {"size": size, "config": config, "nbeta": nbeta, "m": m, "dim": problem.dim,
               "slt_start": "center", "slt_call": "one `llc_trajectory(..., parts)` call",
               "n": problem.n, "info": worker.info, "parts": list(parts),
               "train_loss": [float(problem.loss(point)) / m for point in checkpoints],
               "head_dim": int(sum(np.sum(leaf) for leaf in
                                   jax.tree.leaves(parts["l0h0"])))}
        out["twin_max_difference"] = twin_check(worker, checkpoints[-1], tokens,
                                                indices[-1], folder)
        log(f"twin: max |torch - JAX| per-token loss {out['twin_max_difference']:.2g}")
        out["masks_differ"] = masks_check(worker, parts, folder)
        key = jax.random.key(seed)
        log("slt: compiling (first call, not timed)")
        first = slt_parts(problem, checkpoints, key, parts, config)  # the same program as timed
        out["slt_first_call"] = first[2]
        full = slt_full(problem, checkpoints, jax.random.fold_in(key, 1), config)
        out["slt_full"] = {"means": full[0].tolist(), "ses": full[1].tolist()}
        log(f"the whole model at {len(indices)} checkpoints: devinterp 2.0.1")
        reply = devinterp_parts(worker, indices, ["full"], config, seed, nbeta * m)
        out["devinterp_full"] = {name: np.asarray(reply[name])[:, 0].tolist()
                                 for name in ("means", "ses", "llc_mean")}
        walls = {"slt": [], "devinterp": []}
        for index in range(rounds):
            load.append(os.getloadavg())
            means, ses, wall, cpu = slt_parts(problem, checkpoints, key, parts, config)
            walls["slt"].append((wall, cpu))
            log(f"round {index + 1}/{rounds}: slt {wall:.2f} s")
            reply = devinterp_parts(worker, indices, list(parts), config, seed + index,
                                    nbeta * m)
            walls["devinterp"].append((reply["wall"], reply["cpu"]))
            log(f"round {index + 1}/{rounds}: devinterp 2.0.1 {reply['wall']:.1f} s")
        load.append(os.getloadavg())
        out["slt_heads"] = {"means": means.tolist(), "ses": ses.tolist()}
        out["devinterp_heads"] = {name: np.asarray(reply[name]).tolist()
                                  for name in ("means", "ses", "llc_mean")}
        out["devinterp_call_walls"] = reply["call_walls"]
        out["median"] = {name: np.median(np.array(values), axis=0).tolist()
                         for name, values in walls.items()}
        out["rounds"] = walls
        out["load"] = load
    finally:
        worker.close()
        shutil.rmtree(folder)  # the .npz, the checks' files, the runner's log
    return out


# ----------------------------------------------------------------------------- report


def agreement(slt_means, slt_ses, devinterp_means, devinterp_ses) -> np.ndarray:
    """|slt - devinterp| in combined standard errors, elementwise."""
    return np.abs(np.asarray(slt_means) - devinterp_means) / np.hypot(slt_ses, devinterp_ses)


def report(raw: dict) -> str:
    """The Markdown section from `measure`'s raw numbers."""
    size, config, parts = raw["size"], raw["config"], raw["parts"]
    steps = config["num_warmup"] + config["num_samples"]
    count = len(size["checkpoints"])
    chain_steps = len(parts) * count * config["num_chains"] * steps
    slt_wall, slt_cpu = raw["median"]["slt"]
    di_wall, di_cpu = raw["median"]["devinterp"]
    wall_ratio, cpu_ratio = di_wall / slt_wall, di_cpu / slt_cpu
    loads = np.array(raw["load"])[:, 0]
    z_heads = agreement(raw["slt_heads"]["means"], raw["slt_heads"]["ses"],
                        raw["devinterp_heads"]["means"], raw["devinterp_heads"]["ses"])
    z_full = agreement(raw["slt_full"]["means"], raw["slt_full"]["ses"],
                       raw["devinterp_full"]["means"], raw["devinterp_full"]["ses"])
    rows = []
    for c, step in enumerate(size["checkpoints"]):
        cells = [("model", *(np.asarray(raw[side][key])[c] for side in ("slt_full",
                 "devinterp_full") for key in ("means", "ses")),
                  raw["devinterp_full"]["llc_mean"][c], z_full[c])]
        cells += [(name, *(np.asarray(raw[side][key])[c, p] for side in ("slt_heads",
                   "devinterp_heads") for key in ("means", "ses")),
                   raw["devinterp_heads"]["llc_mean"][c][p], z_heads[c, p])
                  for p, name in enumerate(parts)]
        for name, ours, our_se, theirs, their_se, as_returned, z in cells:
            rows.append(f"| {step} | {name} | {ours:.3g} ± {our_se:.2g} | {theirs:.3g} ± "
                        f"{their_se:.2g} | {as_returned:.3g} | {z:.2f} | "
                        f"{'yes' if z <= 2 else '**no**'} |")
    passed = int(np.sum(z_heads <= 2) + np.sum(z_full <= 2))
    total = z_heads.size + z_full.size
    info = raw["info"]
    verdict = "**met**" if min(wall_ratio, cpu_ratio) >= 10 else "**missed**"
    return "\n".join([
        "## λ̂ of a transformer's heads: slt against devinterp 2.0.1",
        "",
        "benchmarks/llc_transformer.py (its docstring states the model, the loss and how the "
        "settings map). A 2-layer attention-only transformer in TransformerLens's layout, no "
        f"layer norm or MLP (H = {size['heads']} heads per layer, d_model {size['d_model']}, "
        f"d_head {size['d_head']}, V = {size['vocab']}, T = {size['length']}; d = "
        f"{raw['dim']:,}, {raw['head_dim']:,} weights per head), trained with Adam on an "
        f"induction task (n = {raw['n']:,} Markov-chain sequences with a repeated segment); "
        f"checkpoints at training steps {', '.join(map(str, size['checkpoints']))} (mean "
        "per-token loss "
        f"{', '.join(f'{loss:.3f}' for loss in raw['train_loss'])}). slt in JAX (float32, "
        "`Problem.from_loss` with the per-sequence loss), devinterp 2.0.1 on the PyTorch twin "
        f"(benchmarks/transformer_twin.py, torch {info['torch']}, {info['threads']} thread) "
        "loaded with the same weights: its per-token losses equal JAX's to "
        f"{raw['twin_max_difference']:.1g} (max over every token, last checkpoint)"
        + ("" if "masks_differ" not in raw else
           ", and devinterp's `create_param_masks` selects the same weights as slt's masks "
           "for " + ("every head" if not raw["masks_differ"] else
                     f"every head but {', '.join(raw['masks_differ'])}")) + ". Same "
        f"settings on both sides: ε = {config['step_size']:g}, γ = {config['gamma']:g}, "
        f"{config['num_chains']} chains × ({config['num_warmup']} warmup + "
        f"{config['num_samples']} draws), minibatches of {config['batch_size']} sequences, "
        f"nβ = n / log n = {raw['nbeta']:.1f} per sequence in slt = devinterp's n_beta "
        f"{raw['nbeta'] * raw['m']:.0f} on its mean per-token loss (m = {raw['m']} targets per "
        "sequence), SGLD without MALA (`SGLD(mala_every=0)`); "
        + ("slt's chains start at its default dispersed points around w* (`RunPlan(start="
           "\"dispersed\")`), devinterp's at w*, so over the short warmup they approach the "
           "posterior from different sides. " if raw.get("slt_start") != "center" else
           "every chain starts at w* (slt `RunPlan(start=\"center\")`, devinterp's own). ")
        + "Heads: slt " + ("`llc_table` per checkpoint, its heads in one program, "
                           if "slt_call" not in raw else
                           "`llc_trajectory(problem, checkpoints, key, parts)`, every head at "
                           "every checkpoint in one program, ")
        + "one `restrict_to` mask per head; devinterp "
        "`llc(model, dataset, observables={}, param_masks=create_param_masks(model, \"l0h1\"), "
        "...)` with its default per-token cross-entropy, one call per head per checkpoint. "
        "devinterp's λ̂ here is over its draws (its `llc_mean`, which also averages the burn-in "
        "steps, in its own column); the standard errors of both are sd / √ESS of the per-draw "
        "values (devinterp's chains share their minibatches, so its error is understated).",
        "",
        f"Agreement: {passed} of {total} within two combined standard errors.",
        "",
        "| step | part | slt λ̂ ± se | devinterp 2.0.1 λ̂ ± se (draws) | devinterp `llc_mean` | "
        "|diff| / combined se | within 2 se |",
        "|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"The {len(parts)}-head trajectory ({len(parts)} heads × {count} checkpoints × "
        f"{config['num_chains']} chains × {steps} steps), medians of {len(raw['rounds']['slt'])} "
        "interleaved rounds:",
        "",
        "| computation | wall s | CPU s | devinterp / slt, wall (CPU) |",
        "|---|---|---|---|",
        f"| devinterp 2.0.1, {len(parts) * count} `llc` calls | {di_wall:.1f} | {di_cpu:.1f} | 1 |",
        f"| slt, {raw.get('slt_call', f'{count} `llc_table` calls ({len(parts)} heads each)')}"
        f" | {slt_wall:.2f} | "
        f"{slt_cpu:.2f} | **{wall_ratio:.1f}× ({cpu_ratio:.1f}×)** |",
        "",
        f"Per chain-step (one minibatch gradient of {config['batch_size']} sequences × "
        f"{size['length']} tokens and the update): slt {1e3 * slt_wall / chain_steps:.2f} ms "
        f"wall ({1e3 * slt_cpu / chain_steps:.2f} ms CPU), devinterp "
        f"{1e3 * di_wall / chain_steps:.2f} ms wall ({1e3 * di_cpu / chain_steps:.2f} ms CPU), "
        "each call's fixed costs included.",
        "",
        f"Target ≥ 10× by wall and CPU time: {verdict}. slt's first call (compilation) took "
        f"{raw['slt_first_call']:.1f} s, not counted. Load average (1 min) during the run: "
        f"{loads.min():.1f}–{loads.max():.1f} on this 2-core machine (shared).",
        "",
        "The GPU figures (`--device gpu`, the command at the top of benchmarks/llc_transformer.py) "
        "are rendered apart by `--gpu-report llc_transformer_gpu.json`: per size the twin's "
        "check, the model's own forward + backward per step in JAX and torch, λ̂ of the whole "
        "model and of head l0h0 with both libraries' draws per second, and every head's λ̂ at "
        "the Hoogland size.",
        "",
    ])


def run(key=None) -> str:
    """The Markdown section, measured in a child process (float32)."""
    seed = 0
    if key is not None:
        import jax

        seed = int(jax.random.randint(key, (), 0, 2**31 - 1))
    return subprocess.run([sys.executable, "-m", "benchmarks.llc_transformer", "--seed",
                           str(seed)], cwd=ROOT, check=True, stdout=subprocess.PIPE,
                          text=True).stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--sizes", default="hoogland,pythia",
                        help="GPU: comma-separated sizes (hoogland, pythia)")
    parser.add_argument("--gpu-parts", default="full,l0h0,heads",
                        help="GPU: the measurements (full, l0h0, heads: every head's "
                             "trajectory at the sizes that have one), each for every size or, "
                             "written SIZE:PART, for one; a run that must fit a short lease "
                             "names only those an earlier run lacks")
    parser.add_argument("--dry-run", action="store_true", help="tiny sizes, one round")
    parser.add_argument("--report", metavar="RAW_JSON", help="render a raw.json's section")
    parser.add_argument("--gpu-report", metavar="GPU_JSON",
                        help="render the tables of a llc_transformer_gpu.json")
    arguments = parser.parse_args()
    if arguments.report:
        print(report(json.loads(Path(arguments.report).read_text())))
        return
    if arguments.gpu_report:
        from benchmarks.llc_transformer_gpu import gpu_report

        print(gpu_report(json.loads(Path(arguments.gpu_report).read_text())))
        return
    if arguments.device == "gpu":
        # the devinterp runner's torch shares the GPU: JAX takes memory as it needs it
        os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
        from benchmarks.llc_transformer_gpu import measure_gpu

        measure_gpu(arguments.sizes.split(","), arguments.seed, dry=arguments.dry_run,
                    parts=arguments.gpu_parts.split(","))
        return
    import jax

    jax.config.update("jax_enable_x64", False)
    raw = measure(arguments.seed, "dry" if arguments.dry_run else "cpu",
                  1 if arguments.dry_run else ROUNDS)
    path = Path(tempfile.gettempdir()) / "llc_transformer_raw.json"
    path.write_text(json.dumps(raw, indent=1))
    log(f"raw numbers in {path}")
    print(report(raw))


if __name__ == "__main__":
    main()
