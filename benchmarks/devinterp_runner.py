"""devinterp's side of the LLC speed benchmark, run in a devinterp venv (torch + devinterp only).

Started by `benchmarks/llc_speed.py` as a subprocess, in the venv of either devinterp version:

    benchmarks/.venv-devinterp/bin/python  benchmarks/devinterp_runner.py DATA.npz [THREADS]
    benchmarks/.venv-devinterp2/bin/python benchmarks/devinterp_runner.py DATA.npz [THREADS]

THREADS, if given, is passed to torch.set_num_threads (torch's intra-op threads).

DATA.npz (written by llc_speed.py or influence.py, the same arrays slt sees) holds `x`, `y`,
the problem kind `kind` ("rrr" or "dln": y = W_L ... W_1 x, no biases; "mlp": y = U tanh(V x +
b) + c, both with the Gaussian noise scale `noise`; "classifier": the logits U tanh(V x + b) + c
of the integer labels y, the cross-entropy loss) and w* (`W1`, `W2`, ... or `V`, `b`, `U`, `c`,
PyTorch's (out, in) weight layout). A file with `checkpoints` = T holds T parameter sets
instead, each array with a leading axis of length T (a training run's checkpoints). A file with
`x_query`, `y_query` holds query examples too (not sampled on; the BIF's queries).

The runner serves the installed devinterp version through its own public API:
  * 1.3.2: `devinterp.slt.sampler.estimate_learning_coeff_with_summary(model, loader,
    evaluate=...)` with a `DataLoader(TensorDataset(x, y), shuffle=True)`, given init_loss;
  * 2.0.1: `devinterp.slt.llc.llc(model, dataset, observables={}, lr=, n_beta=,
    localization=, loss_fn=, param_masks=, ...)`. 2.0.1 takes a HuggingFace `Dataset` with an
    "input_ids" column of integer sequences of one length >= 2 and a
    `loss_fn(model, input_ids) -> (batch, seq - 1)` per-token loss; a regression model uses it
    with each example's row index as its sequence [i, i] and a loss_fn that gathers x[i], y[i]
    and returns the per-example loss as one "token". It computes L_n(w*) itself (no init_loss
    argument) from `num_init_loss_batches` minibatches; its λ̂ (`compute_llc`) averages every
    step, burn-in included, so the runner also reports λ̂ over the draws alone, from the
    `loss_trace` it returns. Each call writes its per-step losses to a Zarr store, here a
    temporary folder deleted after the call (outside the timing);
  * 2.0.1's BIF: `devinterp.slt.bif.bif(model, dataset, observables, lr=, n_beta=, ...)` (the
    same sampling as `llc()`, with `observables` = {name: (Dataset, batches per draw)}; each
    observable's losses at every draw are stored, then `compute_bif` forms their covariance or
    correlation over the stacked chains x draws). Here the observables are every training
    example ("train", the rows of `x`) and every query ("query", rows len(x) + j for x_query):
    an observable evaluates batch_size x batches-per-draw examples drawn without replacement
    from its data set, so with exactly that many examples it sees each once per draw.

The "transformer" kind (benchmarks/llc_transformer.py): `tokens` (n, T) integer sequences,
`weight_names` and, under each name, a weight stacked over `checkpoints` training checkpoints:
of benchmarks/transformer_twin.py's attention-only transformer, or (`architecture` =
"gpt_neox", with `heads`) of HuggingFace's GPT-NeoX (`gpt_neox_model`). Its jobs: one with
"losses_path" saves the twin's per-token losses (n, T - 1) at "checkpoint" as .npy (the check
against JAX), "chunk" sequences at a time; one with "masks_path" saves devinterp's masks of
each of "parts" (.npz, keys "part:name" in the file's names); one with
"forward_backward_steps" times the twin's own forward and backward on a minibatch (plain
torch); otherwise one `llc` call per checkpoint
in "checkpoints" per part in "parts" ("full": every weight; "l0h1" and the like:
devinterp's `create_param_masks(model, part)`), on the sequences as a `Dataset` with
devinterp's default per-token cross-entropy (no loss_fn), answered with lists in that order,
each call's draws' losses included. "device" ("cpu" or "cuda") places the model.

Protocol: after loading torch, devinterp and the data it prints one JSON line (versions,
threads, RSS); then it reads one JSON job per line on stdin and answers each with one JSON
line: the wall and CPU time of one LLC estimate, lambda_hat, the RSS before it and the peak RSS
during it. A job with "restrict_to" (2.0.1) names the parameters to sample (devinterp's
`param_masks`, the others frozen); one with "trajectory" (2.0.1) loops over the file's
checkpoints (the first "checkpoints" of them, if given), one `llc` call each, as a user would,
and answers with lists, one entry per call. A job with "bif" (2.0.1) times one `bif` call and
writes Cov(l_i, l_q) of every training example i and query q (devinterp's covariance,
`compute_covariance=True`, rows and columns in the data's order) to the .npy file at
"influence_path", if given. A job with
"loader_batches" times the DataLoader alone instead, one with "torch_steps" SGLD hand-written
in plain torch (no devinterp, no DataLoader). It exits at end of input. Keeping the process
alive lets the parent interleave devinterp runs with slt runs without paying torch's import
time each round.

This file only calls devinterp's public API; nothing of devinterp is copied into slt.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import resource
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np


def _rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size of this process in MiB, from /proc/self/status."""
    with open("/proc/self/status") as status:
        fields = dict(line.split(":", 1) for line in status)
    return tuple(float(fields[name].split()[0]) / 1024 for name in ("VmRSS", "VmHWM"))


def _reset_peak_rss() -> bool:
    """Reset the peak RSS (VmHWM) to the current RSS (Linux `clear_refs` 5); False if refused."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _time_loader(x, y, job) -> dict:
    """Seconds per batch of the DataLoader alone, iterated as devinterp does (a fresh, reshuffled
    pass per epoch), to tell how much of devinterp's step is data loading."""
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(x, y), batch_size=job["batch_size"], shuffle=True)
    count, start = 0, time.perf_counter()
    while count < job["loader_batches"]:
        for _ in loader:
            count += 1
            if count == job["loader_batches"]:
                break
    return {"loader_seconds_per_batch": (time.perf_counter() - start) / count}


def _time_torch_sgld(model, evaluate, x, y, job) -> dict:
    """Seconds per step of SGLD hand-written in plain torch, without devinterp or a DataLoader:
    epoch permutations by `torch.randperm`, index gather, forward, backward, the same update
    w += -(eps / 2) (n beta grad L_b + gamma (w - w*)) + sqrt(eps) N(0, I). One chain."""
    import torch

    params = list(model.parameters())
    centers = [p.detach().clone() for p in params]
    eps, gamma, nbeta, batch = job["step_size"], job["gamma"], job["nbeta"], job["batch_size"]
    steps_per_epoch = x.shape[0] // batch
    order = torch.randperm(x.shape[0])
    start = time.perf_counter()
    for step in range(job["torch_steps"]):
        position = step % steps_per_epoch
        if position == 0 and step > 0:
            order = torch.randperm(x.shape[0])
        indices = order[position * batch:(position + 1) * batch]
        loss = evaluate(model, (x[indices], y[indices]))
        gradients = torch.autograd.grad(loss, params)
        with torch.no_grad():
            for p, gradient, center in zip(params, gradients, centers, strict=True):
                p.add_(nbeta * gradient + gamma * (p - center), alpha=-0.5 * eps)
                p.add_(torch.randn_like(p), alpha=eps**0.5)
    return {"torch_seconds_per_step": (time.perf_counter() - start) / job["torch_steps"]}


def _synchronize() -> None:
    """Wait for the GPU's queued work (if torch has a GPU), so that a timing covers it."""
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def _timed(estimate):
    """(estimate(), {"wall", "cpu", "rss_before_mb", "peak_rss_mb", "peak_is_run_only"})."""
    before, _ = _rss_mb()
    reset = _reset_peak_rss()
    cpu, start = _cpu_seconds(), time.perf_counter()
    result = estimate()
    _synchronize()
    wall = time.perf_counter() - start
    return result, {"wall": wall, "cpu": _cpu_seconds() - cpu, "rss_before_mb": before,
                    "peak_rss_mb": _rss_mb()[1], "peak_is_run_only": reset}


def _llc_v1(model, x, y, evaluate, job) -> dict:
    """devinterp 1.3.2: `estimate_learning_coeff_with_summary`, its default SGLD, over a
    shuffled DataLoader, given L_n(w*) as init_loss."""
    from devinterp.slt.sampler import estimate_learning_coeff_with_summary
    from torch.utils.data import DataLoader, TensorDataset

    loader = DataLoader(TensorDataset(x, y), batch_size=job["batch_size"], shuffle=True)
    results, timing = _timed(lambda: estimate_learning_coeff_with_summary(
        model,
        loader,
        evaluate=evaluate,
        optimizer_kwargs={"lr": job["step_size"], "localization": job["gamma"],
                          "nbeta": job["nbeta"]},
        num_chains=job["num_chains"],
        num_draws=job["num_samples"],  # devinterp's own keyword
        num_burnin_steps=job["num_warmup"],
        init_loss=job["init_loss"],
        cores=job["cores"],
        seed=job["seed"],
        device="cpu",
        verbose=False,
    ))
    return {**timing, "llc_mean": results["llc/mean"],
            "llc_per_chain": [results[f"llc-chain/{i}"] for i in range(job["num_chains"])]}


def _sampling_options(job, dataset, folder) -> dict:
    """The keyword arguments of 2.0.1's `sample` (through `llc` and `bif`) for a job: its
    default SGLD at the job's step size, n beta, localization, chains, draws and burn-in,
    L_n(w*) from one pass over the batches the chains see, a Zarr store in `folder`."""
    return {"lr": job["step_size"], "n_beta": job["nbeta"], "localization": job["gamma"],
            "num_chains": job["num_chains"], "num_draws": job["num_samples"],
            "num_burnin_steps": job["num_warmup"], "batch_size": job["batch_size"],
            "num_init_loss_batches": len(dataset) // job["batch_size"],
            "init_seed": job["seed"], "device": job.get("device", "cpu"),
            "output_path": Path(folder) / "samples.zarr"}


def _llc_v2(model, dataset, loss_fn, job, param_masks=None) -> dict:
    """devinterp 2.0.1: `llc()` with a loss_fn, its default SGLD, chains one after another.

    L_n(w*) is devinterp's own, from len(dataset) // batch_size minibatches: one pass over the
    data in the order its chains see (it cycles over one shuffle of the data, dropping the
    last incomplete batch); its default of 32 minibatches would see part of the data only.
    "llc_mean" is devinterp's (every step averaged, burn-in included); "llc_mean_draws" the
    same from its loss trace without the burn-in steps.
    """
    from devinterp.slt.llc import llc

    with tempfile.TemporaryDirectory() as folder:
        result, timing = _timed(lambda: llc(
            model=model, dataset=dataset, observables={}, param_masks=param_masks,
            loss_fn=loss_fn, **_sampling_options(job, dataset, folder)))
        trace = np.asarray(result["loss_trace"].values, dtype=np.float64)  # (chain, step)
        init_loss = float(result["init_loss"])
        per_chain = np.asarray(result["llc_per_chain"].values, dtype=np.float64)
        llc_mean = float(result["llc_mean"])
    draws = job["nbeta"] * (trace[:, job["num_warmup"]:].mean(axis=1) - init_loss)
    reply = {**timing, "llc_mean": llc_mean, "llc_per_chain": per_chain.tolist(),
             "llc_mean_draws": float(draws.mean()), "init_loss": init_loss}
    if job.get("return_trace"):  # the draws' losses (chain, draw), for a standard error
        reply["draw_losses"] = trace[:, job["num_warmup"]:].tolist()
    return reply


def _bif_v2(model, dataset, observables, loss_fn, job) -> dict:
    """devinterp 2.0.1: one `bif()` call, its default SGLD and its defaults but two: the
    covariance (compute_covariance=True; its default is the correlation) and
    correlation_method="sequence" (one "token" per example: the same numbers as its default
    "token", which forms a 2 x 2 covariance matrix per pair, with less work). Chains one after
    another; the covariance over the stacked chains x draws (its default "stack").

    `observables`: {"train": (Dataset of the training rows, batches per draw), "query":
    (Dataset of the query rows, batches per draw)}. The timing covers the call (sampling, the
    Zarr store, compute_bif); putting the matrix in the data's order and saving it do not count.
    """
    from devinterp.slt.bif import bif

    with tempfile.TemporaryDirectory() as folder:
        result, timing = _timed(lambda: bif(
            model=model, dataset=dataset, observables=observables, loss_fn=loss_fn,
            correlation_method="sequence", compute_covariance=True,
            **_sampling_options(job, dataset, folder)))
        if job.get("influence_path"):
            rows = np.asarray(result["input_ids"].values)[:, 0]  # each example's row index
            order = np.argsort(rows)  # the training rows 0..n-1, then the queries n, n+1, ...
            matrix = np.asarray(result["influences"].values, np.float64)[np.ix_(order, order)]
            train = len(observables["train"][0])
            np.save(job["influence_path"], matrix[:train, train:])
    return timing


def _serve(info: dict, answer) -> None:
    """Print the ready line (versions, threads, RSS and `info`), then answer each JSON job
    read from stdin with `answer(job)`'s JSON line (torch seeded with the job's seed first),
    until the end of input."""
    import torch

    print(json.dumps({"ready": True, "torch": torch.__version__,
                      "devinterp": importlib.metadata.version("devinterp"),
                      "threads": torch.get_num_threads(), "baseline_rss_mb": _rss_mb()[0],
                      "cuda": torch.cuda.is_available(), **info}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        torch.manual_seed(job["seed"])
        print(json.dumps(answer(job)), flush=True)


def _serve_transformer(arrays) -> None:
    """The "transformer" kind: benchmarks/transformer_twin.py's model at the file's
    checkpoints, on its token sequences; jobs as described in the module docstring."""
    import torch
    from datasets import Dataset
    from devinterp.slt.weight_restrictions import create_param_masks
    from transformer_twin import (
        AttentionOnlyTransformer,
        flat_name,
        gpt_neox_model,
        per_token_loss,
    )

    names = [str(name) for name in arrays["weight_names"]]
    tokens = np.asarray(arrays["tokens"], np.int64)
    dataset = Dataset.from_dict({"input_ids": tokens}).with_format("torch")
    neox = str(arrays["architecture"]) == "gpt_neox"

    def build_model(checkpoint: int) -> torch.nn.Module:
        weights = {name: arrays[name][checkpoint] for name in names}
        if neox:
            return gpt_neox_model(weights, int(arrays["heads"]))
        return AttentionOnlyTransformer(weights)

    def masks(model, part: str):  # devinterp's own: None (every weight) or "l0h1" and the like
        return None if part == "full" else create_param_masks(model, part)

    def answer(job: dict) -> dict:
        device = job.get("device", "cpu")
        if "losses_path" in job:  # the twin's per-token losses on every sequence, no timing
            model = build_model(job["checkpoint"]).to(device)
            chunk = job["chunk"]  # sequences per block: the GPU is shared with JAX's process
            with torch.no_grad():
                losses = np.concatenate([
                    per_token_loss(model, torch.from_numpy(tokens[start:start + chunk])
                                   .to(device)).cpu().numpy()
                    for start in range(0, len(tokens), chunk)])
            if device == "cuda":
                torch.cuda.empty_cache()
            np.save(job["losses_path"], losses)
            return {"saved": job["losses_path"]}
        if "masks_path" in job:  # devinterp's masks of each part, under the .npz's names
            model = build_model(0)
            np.savez(job["masks_path"], **{
                f"{part}:{flat_name(name)}": mask.numpy()
                for part in job["parts"] for name, mask in masks(model, part).items()})
            return {"saved": job["masks_path"]}
        if "forward_backward_steps" in job:
            return _time_forward_backward(build_model(job["checkpoint"]).to(device), tokens,
                                          job)
        calls = []  # one llc() per checkpoint per part, in the order a user loop runs them
        for checkpoint in job["checkpoints"]:
            for part in job["parts"]:
                model = build_model(checkpoint)
                calls.append(_llc_v2(model, dataset, None, {**job, "return_trace": True},
                                     masks(model, part)))
        return {name: [call[name] for call in calls]
                for name in ("wall", "cpu", "llc_mean", "llc_mean_draws", "draw_losses",
                             "init_loss", "peak_rss_mb")}

    _serve({"dtype": "float32", "dim": sum(p.numel() for p in build_model(0).parameters()),
            "checkpoints": int(arrays["checkpoints"]), "sequences": len(tokens)}, answer)


def _time_forward_backward(model, tokens, job) -> dict:
    """Seconds per step of the model's own forward and backward on a minibatch of
    `batch_size` sequences (the per-token cross-entropy devinterp uses, its mean, `backward`)
    in plain torch: the floor under one SGLD step. `forward_backward_steps` steps, after 3 not
    timed, cycling over 8 minibatches made beforehand."""
    import torch
    from transformer_twin import per_token_loss

    device = next(model.parameters()).device
    rows = np.random.default_rng(job["seed"]).integers(len(tokens), size=(8, job["batch_size"]))
    batches = [torch.from_numpy(tokens[row]).to(device) for row in rows]

    def step(index):
        per_token_loss(model, batches[index % len(batches)]).mean().backward()
        model.zero_grad(set_to_none=True)

    for index in range(3):
        step(index)
    _synchronize()
    start = time.perf_counter()
    for index in range(job["forward_backward_steps"]):
        step(index)
    _synchronize()
    return {"seconds_per_step": (time.perf_counter() - start) / job["forward_backward_steps"]}


def main() -> None:
    warnings.simplefilter("ignore")  # devinterp warns on every call (deprecated SGLD, seeds...)
    import torch
    from torch import nn

    version = importlib.metadata.version("devinterp")
    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else torch.get_num_threads())
    arrays = np.load(sys.argv[1])
    kind = str(arrays["kind"])
    if kind == "transformer":
        _serve_transformer(arrays)
        return
    classifier = kind == "classifier"
    checkpoints = int(arrays["checkpoints"]) if "checkpoints" in arrays else None
    num_train = len(arrays["x"])

    def rows(name):  # the training examples, then the queries (if any): rows num_train + j
        if "x_query" not in arrays:
            return arrays[name]
        return np.concatenate([arrays[name], arrays[f"{name}_query"]])

    x = torch.from_numpy(np.ascontiguousarray(rows("x"), np.float32))
    y = torch.from_numpy(np.ascontiguousarray(rows("y"), np.int64 if classifier else np.float32))
    if classifier:
        num_outputs = arrays["U"].shape[0]
    else:
        noise = float(arrays["noise"])
        num_outputs = y.shape[1]
        constant = num_outputs * (math.log(noise) + 0.5 * math.log(2 * math.pi))

    def build_model(checkpoint: int | None = None) -> nn.Module:
        """The network at w* (or at checkpoint `checkpoint` of a training run)."""
        def weight(name):
            value = arrays[name] if checkpoint is None else arrays[name][checkpoint]
            return nn.Parameter(torch.from_numpy(np.asarray(value, np.float32)))

        if kind in ("rrr", "dln"):  # a linear chain W_L ... W_1, no biases
            layers = []
            while f"W{len(layers) + 1}" in arrays:
                matrix = weight(f"W{len(layers) + 1}")
                layers.append(nn.Linear(matrix.shape[1], matrix.shape[0], bias=False))
                layers[-1].weight = matrix
            model = nn.Sequential(*layers)
        elif kind in ("mlp", "classifier"):
            hidden, inputs = arrays["V"].shape
            model = nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(),
                                  nn.Linear(hidden, num_outputs))
            model[0].weight, model[0].bias = weight("V"), weight("b")
            model[2].weight, model[2].bias = weight("U"), weight("c")
        else:
            raise ValueError(f"unknown problem kind {kind!r}")
        return model

    def per_example_loss(model, inputs, targets):
        # Per-example negative log-likelihood with its constants: the same L_b(w) as slt's
        # (mean over the batch), so n beta means the same on both sides.
        if classifier:
            return nn.functional.cross_entropy(model(inputs), targets, reduction="none")
        residual = (targets - model(inputs)) / noise
        return 0.5 * residual.pow(2).sum(dim=1) + constant

    def evaluate(model, batch):  # 1.3.2's evaluate and the plain torch loop: the batch mean
        return per_example_loss(model, *batch).mean()

    def loss_fn(model, input_ids):
        # 2.0.1's per-token loss: each example is the sequence [i, i] of its row index, its
        # one "token" loss the example's loss, shape (batch, 1).
        rows = input_ids[:, 0]
        return per_example_loss(model, x[rows], y[rows])[:, None]

    dataset = observables = None
    if version == "1.3.2":
        import devinterp.slt.sampler  # noqa: F401  (imported here, not inside a timed call)
    else:
        import devinterp.slt.bif  # noqa: F401
        import devinterp.slt.llc  # noqa: F401
        from datasets import Dataset

        def rows_dataset(start, stop):  # examples start..stop - 1 as sequences [i, i]
            rows = np.arange(start, stop)
            return Dataset.from_dict({"input_ids": np.stack([rows, rows], axis=1)}).with_format(
                "torch")

        dataset = rows_dataset(0, num_train)
        observables = {"train": dataset, "query": rows_dataset(num_train, x.shape[0])}

    def answer(job: dict) -> dict:
        if "loader_batches" in job:
            reply = _time_loader(x, y, job)
        elif "torch_steps" in job:
            reply = _time_torch_sgld(build_model(), evaluate, x, y, job)
        elif version == "1.3.2":
            reply = _llc_v1(build_model(), x, y, evaluate, job)
        elif job.get("bif"):  # every training example and every query observed at each draw
            batch = job["batch_size"]
            reply = _bif_v2(build_model(), dataset, {
                name: (data, len(data) // batch) for name, data in observables.items()},
                loss_fn, job)
        elif job.get("trajectory"):  # the user loop: one llc() call per checkpoint
            count = job.get("checkpoints", checkpoints)  # the first `count` checkpoints
            calls = [_llc_v2(build_model(t), dataset, loss_fn, job) for t in range(count)]
            reply = {name: [call[name] for call in calls]
                     for name in ("wall", "cpu", "llc_mean", "llc_mean_draws", "peak_rss_mb")}
        else:
            masks = None
            if job.get("restrict_to"):  # sample these parameters, the others frozen
                masks = {name: None for name in job["restrict_to"]}
            reply = _llc_v2(build_model(), dataset, loss_fn, job, masks)
        return reply

    _serve({"dtype": str(x.dtype),
            "dim": sum(p.numel() for p in build_model(0 if checkpoints else None).parameters())},
           answer)


if __name__ == "__main__":
    main()
