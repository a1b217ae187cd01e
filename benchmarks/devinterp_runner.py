"""devinterp's side of the LLC speed benchmark, run in its own venv (torch + devinterp only).

Started by `benchmarks/llc_speed.py` as a subprocess:

    benchmarks/.venv-devinterp/bin/python benchmarks/devinterp_runner.py DATA.npz [THREADS]

THREADS, if given, is passed to torch.set_num_threads (torch's intra-op threads).

DATA.npz (written by llc_speed.py, the same arrays slt sees) holds `x`, `y`, the problem kind
`kind` ("rrr": y = B A x, no biases; "mlp": y = U tanh(V x + b) + c), the Gaussian noise scale
`noise` and w* (`W1`, `W2` or `V`, `b`, `U`, `c`, PyTorch's (out, in) weight layout).

Protocol: after loading torch, devinterp and the data it prints one JSON line (versions,
threads, RSS); then it reads one JSON job per line on stdin and answers each with one JSON
line: the wall and CPU time of one `estimate_learning_coeff_with_summary` call, lambda_hat, the
RSS before it and the peak RSS during it. A job with "loader_batches" times the DataLoader
alone instead, one with "torch_steps" SGLD hand-written in plain torch (no devinterp, no
DataLoader). It exits at end of input. Keeping the process alive lets the parent interleave
devinterp runs with slt runs without paying torch's import time each round.

This file only calls devinterp's public API; nothing of devinterp is copied into slt.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import resource
import sys
import time
import warnings


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


def main() -> None:
    warnings.simplefilter("ignore")  # devinterp warns on every call (deprecated SGLD, seeds...)
    import numpy as np
    import torch
    from devinterp.slt.sampler import estimate_learning_coeff_with_summary
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    torch.set_num_threads(int(sys.argv[2]) if len(sys.argv) > 2 else torch.get_num_threads())
    arrays = np.load(sys.argv[1])
    kind = str(arrays["kind"])
    noise = float(arrays["noise"])
    x = torch.from_numpy(np.ascontiguousarray(arrays["x"], np.float32))
    y = torch.from_numpy(np.ascontiguousarray(arrays["y"], np.float32))
    num_outputs = y.shape[1]
    constant = num_outputs * (math.log(noise) + 0.5 * math.log(2 * math.pi))

    def build_model() -> nn.Module:
        def weight(name):
            return nn.Parameter(torch.from_numpy(np.asarray(arrays[name], np.float32)))

        if kind == "rrr":
            hidden, inputs = arrays["W1"].shape
            model = nn.Sequential(nn.Linear(inputs, hidden, bias=False),
                                  nn.Linear(hidden, num_outputs, bias=False))
            model[0].weight, model[1].weight = weight("W1"), weight("W2")
        elif kind == "mlp":
            hidden, inputs = arrays["V"].shape
            model = nn.Sequential(nn.Linear(inputs, hidden), nn.Tanh(),
                                  nn.Linear(hidden, num_outputs))
            model[0].weight, model[0].bias = weight("V"), weight("b")
            model[2].weight, model[2].bias = weight("U"), weight("c")
        else:
            raise ValueError(f"unknown problem kind {kind!r}")
        return model

    def evaluate(model, batch):
        # Per-example Gaussian negative log-likelihood with its constants, mean over the batch:
        # the same L_b(w) as slt's, so n beta means the same on both sides.
        inputs, targets = batch
        residual = (targets - model(inputs)) / noise
        return 0.5 * residual.pow(2).sum(dim=1).mean() + constant

    print(json.dumps({
        "ready": True, "torch": torch.__version__,
        "devinterp": importlib.metadata.version("devinterp"),
        "threads": torch.get_num_threads(), "dtype": str(x.dtype),
        "dim": sum(p.numel() for p in build_model().parameters()),
        "baseline_rss_mb": _rss_mb()[0],
    }), flush=True)

    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        torch.manual_seed(job["seed"])
        if "loader_batches" in job:
            print(json.dumps(_time_loader(x, y, job)), flush=True)
            continue
        if "torch_steps" in job:
            print(json.dumps(_time_torch_sgld(build_model(), evaluate, x, y, job)), flush=True)
            continue
        model = build_model()
        loader = DataLoader(TensorDataset(x, y), batch_size=job["batch_size"], shuffle=True)
        before, _ = _rss_mb()
        reset = _reset_peak_rss()
        cpu = _cpu_seconds()
        start = time.perf_counter()
        results = estimate_learning_coeff_with_summary(
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
        )
        wall = time.perf_counter() - start
        print(json.dumps({
            "wall": wall,
            "cpu": _cpu_seconds() - cpu,
            "llc_mean": results["llc/mean"],
            "llc_per_chain": [results[f"llc-chain/{i}"] for i in range(job["num_chains"])],
            "rss_before_mb": before,
            "peak_rss_mb": _rss_mb()[1],
            "peak_is_run_only": reset,
        }), flush=True)


if __name__ == "__main__":
    main()
