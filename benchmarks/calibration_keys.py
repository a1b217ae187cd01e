"""The calibrated SGLD step over keys: every candidate's table, old rule against new (issue 35).

For each point of benchmarks/llc_nonlinear.py and keys `_key(point, k)`, k = 10..14 (the keys
of that benchmark's `--calibration-only` pass), one `slt.llc_calibrate` sweep with the default
`Calibration` except for `chains_per_candidate` (`--chains`). Every sweep's table is stored
(benchmarks/calibration_keys.json unless `--results-file`), so that both rules, "largest" (the
largest passing candidate) and "fitted" (the pooled fit, `slt.estimators.local.calibration`),
are applied to the same tables: `--report` prints the steps per key and their max/min.

Run: `nice -n 19 .venv/bin/python -m benchmarks.calibration_keys --points a,b [--chains C]
[--results-file F]`, then `--report`.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import slt
from benchmarks.llc_nonlinear import BY_NAME, _key
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


def steps_by_rule(entry: dict, rule: str) -> float | None:
    """The step `rule` chooses from a stored sweep (None where no candidate passed)."""
    if "table" not in entry:
        return None
    table = pd.DataFrame(entry["table"])
    options = slt.samplers.Calibration(choice=rule)
    try:
        return choose_step_size(table, options, entry["noise_per_step"])[0]
    except ValueError:
        return None


def report(results: dict) -> None:
    print("| point | chains | largest: steps | max/min | fitted: steps | max/min | "
          "fitted: interval (key 10) |")
    print("|---|---|---|---|---|---|---|")
    for label, entries in results.items():
        name, chains = label.rsplit("/", 1)
        cells = []
        for rule in ("largest", "fitted"):
            steps = [steps_by_rule(entry, rule) for entry in entries]
            found = [s for s in steps if s is not None]
            ratio = f"{max(found) / min(found):.2f}" if found else "-"
            cells += [", ".join("none" if s is None else f"{s:.2g}" for s in steps), ratio]
        first = entries[0].get("interval")
        interval = f"{first[0]:.2g} - {first[1]:.2g}" if first else "-"
        print(f"| {name} | {chains} | {' | '.join(cells)} | {interval} |")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="")
    parser.add_argument("--chains", type=int, default=slt.samplers.Calibration()
                        .chains_per_candidate)
    parser.add_argument("--choice", default=slt.samplers.Calibration().choice)
    parser.add_argument("--results-file", type=Path, default=RESULTS)
    parser.add_argument("--report", action="store_true")
    args = parser.parse_args(argv)
    results = json.loads(args.results_file.read_text()) if args.results_file.exists() else {}
    if args.report:
        report(results)
        return
    for name in filter(None, args.points.split(",")):
        results[f"{name}/{args.chains}/{args.choice}"] = sweep_tables(name, args.chains,
                                                                      args.choice)
        args.results_file.write_text(json.dumps(results, indent=1, default=float) + "\n")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
