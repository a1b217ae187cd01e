"""The calibrated SGLD step over keys: every candidate's table, old rule against new (issue 35).

For each point of benchmarks/llc_nonlinear.py and keys `_key(point, k)`, k = 10..14 (the keys
of that benchmark's `--calibration-only` pass), one `slt.llc_calibrate` sweep with the default
`Calibration` except for `choice` (`--choice`: which rule's grid the sweep runs on) and
`chains_per_candidate` (`--chains`). Every sweep's table is stored
(benchmarks/calibration_keys.json unless `--results-file`), and `--report` applies the current
code's rules to the stored tables: "largest" (the largest passing candidate) on the old
grid's sweeps, "fitted" (`slt.estimators.local.calibration.fitted_step_size`) on the same
sweeps and on its own grid's: the steps per key, their max/min, the bound that set them and
the interval's width.

`--llc`: the default `slt.llc` under each rule at keys `_key(point, k)`, k = 0, 1 (the
benchmark's evaluation keys): lambda_hat, T, T_v, the step and the warnings.

Run: `nice -n 19 .venv/bin/python -m benchmarks.calibration_keys --points a,b [--chains C]
[--choice largest|fitted] [--llc] [--results-file F]`, then `--report`.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import jax
import numpy as np
import pandas as pd

import slt
from benchmarks.llc_nonlinear import BY_NAME, _key, _run_record
from slt.estimators.local.calibration import choose_step_size

RESULTS = Path(__file__).with_name("calibration_keys.json")
KEYS = range(10, 15)


def sweep_tables(name: str, chains: int, choice: str) -> list[dict]:
    """One sweep per key: its table (records), the step it chose and its interval, seconds."""
    point = BY_NAME[name]
    built = point.built()
    options = slt.samplers.Calibration(chains_per_candidate=chains, choice=choice)
    out = []
    for k in KEYS:
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                found = slt.llc_calibrate(built.problem, built.params, _key(point, k),
                                          sampler=slt.samplers.SGLD(step_size=options),
                                          progress=False)
            except ValueError as error:
                out.append({"key": k, "raised": str(error).splitlines()[0],
                            "seconds": time.perf_counter() - start})
                continue
        out.append({"key": k, "table": found.table.to_dict(orient="list"),
                    "noise_per_step": found.noise_per_step,
                    "step_size": found.step_size, "interval": list(found.interval),
                    "limit": found.limit, "seconds": time.perf_counter() - start})
        print(f"{name} key {k}: {found.step_size:.3g} ({out[-1]['seconds']:.0f} s)",
              flush=True)
    return out


def llc_by_rule(name: str, keys=(0, 1)) -> dict:
    """The default `slt.llc` (RunPlan()) on the point with its evaluation keys `_key(point,
    k)`, k = 0, 1, under each rule: the step's lambda_hat, temperatures and warnings."""
    built = BY_NAME[name].built()
    out = {}
    for rule in ("largest", "fitted"):
        sampler = slt.samplers.SGLD(step_size=slt.samplers.Calibration(choice=rule))
        for k in keys:
            start = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = slt.llc(built.problem, built.params, _key(BY_NAME[name], k),
                                 sampler=sampler, plan=slt.RunPlan(progress=False))
            out[f"{rule}/{k}"] = {**_run_record(result), "seconds": time.perf_counter() - start}
            record = out[f"{rule}/{k}"]
            print(f"{name} {rule} key {k}: {record['llc']:.4g} +- {record['std_error']:.2g}, "
                  f"T {record['temperature']:.2f}, T_v {record['virial_temperature']:.2f}, "
                  f"step {record['step_size']:.2g}, {record['warning_names']}", flush=True)
    return out


def chosen_by_rule(entry: dict, rule: str) -> tuple | None:
    """(step, gamma, interval, limit) that `rule` chooses from a stored sweep (the current
    code's rule applied to the stored table); None where no candidate passed."""
    if "table" not in entry:
        return None
    options = slt.samplers.Calibration(choice=rule)
    try:
        return choose_step_size(pd.DataFrame(entry["table"]), options, entry["noise_per_step"])
    except ValueError:
        return None


def _steps(chosen: list) -> tuple[str, str]:
    found = [c[0] for c in chosen if c is not None]
    ratio = f"{max(found) / min(found):.2f}" if found else "-"
    return ", ".join("none" if c is None else f"{c[0]:.2g}" for c in chosen), ratio


def report(results: dict) -> None:
    """Per point: the old rule on its own grid's sweeps, the fitted rule on the same sweeps,
    and the new default (the fitted rule on its own grid's sweeps), over the same keys."""
    print("| point | largest, old grid (former default): steps | max/min | fitted rule, old "
          "grid | max/min | fitted, its grid (default): steps | max/min | bound that set it | "
          "interval high/low (median) |")
    print("|---|---|---|---|---|---|---|---|---|")
    names = dict.fromkeys(label.split("/")[0] for label in results if "/llc" not in label)
    for name in names:
        old = results.get(f"{name}/2/largest", [])
        new = results.get(f"{name}/2/fitted", [])
        old_largest = [chosen_by_rule(entry, "largest") for entry in old]
        old_fitted = [chosen_by_rule(entry, "fitted") for entry in old]
        new_fitted = [chosen_by_rule(entry, "fitted") for entry in new]
        limits = sorted({c[3] for c in new_fitted if c is not None})
        widths = [c[2][1] / c[2][0] for c in new_fitted if c is not None]
        width = f"{np.median(widths):.2f}" if widths else "-"
        print(f"| {name} | {' | '.join(_steps(old_largest))} | {' | '.join(_steps(old_fitted))}"
              f" | {' | '.join(_steps(new_fitted))} | {', '.join(limits)} | {width} |")


def _save(path: Path, results: dict) -> None:
    path.write_text(json.dumps(results, separators=(",", ":"), default=float) + "\n")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="")
    parser.add_argument("--chains", type=int, default=slt.samplers.Calibration()
                        .chains_per_candidate)
    parser.add_argument("--choice", default=slt.samplers.Calibration().choice)
    parser.add_argument("--results-file", type=Path, default=RESULTS)
    parser.add_argument("--report", action="store_true")
    parser.add_argument("--llc", action="store_true",
                        help="run the default slt.llc under each rule on --points (keys 0, 1)")
    args = parser.parse_args(argv)
    results = json.loads(args.results_file.read_text()) if args.results_file.exists() else {}
    if args.report:
        report(results)
        return
    for name in filter(None, args.points.split(",")):
        if args.llc:
            results[f"{name}/llc"] = llc_by_rule(name)
            _save(args.results_file, results)
            continue
        results[f"{name}/{args.chains}/{args.choice}"] = sweep_tables(name, args.chains,
                                                                      args.choice)
        _save(args.results_file, results)


if __name__ == "__main__":
    jax.config.update("jax_enable_x64", True)  # the points are float64 (llc_nonlinear)
    np.seterr(all="ignore")
    main()
