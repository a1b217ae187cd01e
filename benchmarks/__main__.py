"""Run every benchmark section and write benchmarks/RESULTS.md."""

from __future__ import annotations

import datetime
import platform
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

from benchmarks import (  # noqa: E402
    evidence_accuracy,
    evidence_old_faithful,
    evidence_peers,
    fisher_matrix_free,
    fisher_scan,
    fit_accuracy,
    influence,
    llc_accuracy,
    llc_data_size,
    llc_exact_samplers,
    llc_finite_n,
    llc_nonlinear,
    llc_preconditioner,
    llc_scale,
    llc_speed,
    llc_tokens_memory,
    llc_trajectory,
    natural_gradient,
    noise_generators,
    problem_construction,
    problem_overhead,
    sbic_selection,
)

SECTIONS = [
    problem_construction,
    problem_overhead,
    fit_accuracy,
    llc_speed,
    llc_data_size,
    noise_generators,
    llc_accuracy,
    llc_preconditioner,
    llc_finite_n,
    llc_exact_samplers,
    llc_nonlinear,
    llc_trajectory,
    llc_scale,
    llc_tokens_memory,
    influence,
    evidence_accuracy,
    evidence_old_faithful,
    evidence_peers,
    sbic_selection,
    fisher_scan,
    fisher_matrix_free,
    natural_gradient,
]


def main() -> None:
    device = jax.devices()[0]
    header = (
        "# slt benchmark results\n\n"
        f"Written by `make bench` on {datetime.date.today()} — {platform.machine()}, "
        f"{jax.device_count()} {device.platform} device(s) ({device.device_kind}), "
        f"jax {jax.__version__}, float64. Ratios are measured side by side in one run.\n"
    )
    parts = [header]
    for section in SECTIONS:
        print(f"running {section.__name__} ...", flush=True)
        parts.append(section.run())
    path = Path(__file__).with_name("RESULTS.md")
    path.write_text("\n".join(parts))
    print(path.read_text())


if __name__ == "__main__":
    main()
