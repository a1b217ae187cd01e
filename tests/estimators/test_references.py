"""Two independent references: `compare`'s flag when tempered SMC and nested sampling disagree
(a constructed phase transition where tempering misses the mass,
`evidence_cases.spike_and_slab`), and the rule that decides it. `free_energy(method="nested")`
against the exact log evidence, its tables, plots and files: tests/samplers/test_nested.py,
beside the sampler's own run of the same program."""

import jax
import matplotlib
import numpy as np
import pytest

pytest.importorskip("blackjax", reason="nested sampling needs blackjax (slt[nested])")

import slt
from slt import NUTS, ComparisonPlan, NestedSampling, Tempering
from slt.estimators.evidence.free_energy import disagreement
from slt.validation import InputError

from .evidence_cases import conjugate_regression, spike_and_slab

matplotlib.use("Agg")


def test_disagreement_needs_four_combined_errors_and_a_tenth_of_a_nat():
    assert disagreement((10.0, 0.1), (10.5, 0.1)) is None  # 0.5 < 4 × 0.14
    assert disagreement((10.0, 0.05), (10.7, 0.05)) == pytest.approx(0.7)
    assert disagreement((10.0, 0.001), (10.05, 0.001)) is None  # below 0.1 nats
    assert disagreement((10.0, 0.1), (np.nan, np.nan)) is None


def test_nested_refuses_waypoints():
    with pytest.raises(InputError, match="waypoints"):
        slt.free_energy(conjugate_regression().problem, jax.random.key(0), method="nested",
                        waypoints=(0.5,), progress=False)


@pytest.mark.slow
def test_compare_flags_the_references_when_tempering_misses_a_phase_transition():
    """Slow (30 s): the fast suite keeps the agreement rule (above), nested sampling against
    exact answers (tests/samplers/test_nested.py) and its result's protocol."""
    case = spike_and_slab()
    # the default termination (1e-2) stops nested sampling on the flat top of the slab,
    # before the spike shows: it must run on until the live points hold 1e-8 of Z. The
    # tempered columns get samplers of their own, so the reference F's ladder has no
    # waypoints (none of them is run here). The reference F is the tempered path's
    # (`draws=None`): the fast path's check on this case is in test_evidence_draws.py.
    plan = ComparisonPlan(
        free_energy=Tempering(num_particles=200, num_copies=2, prior_sampler=case.prior_sampler),
        nested=NestedSampling(num_live=200, num_runs=2, termination=1e-8,
                              prior_sampler=case.prior_sampler),
        rlct=NUTS(), loo=NUTS(), draws=None,
    )
    with pytest.warns(UserWarning, match="references disagree"):
        result = slt.compare({"spike": case.problem}, jax.random.key(0),
                             methods=("free_energy", "nested"), plan=plan, progress=False)
    row = result.table.loc["spike"]
    exact = -case.log_evidence
    assert abs(row["nested"] - exact) < 4 * row["nested_se"]
    # tempering never reaches the spike (90% of Z): it is off by about log 10
    assert row["free_energy"] - exact > 1.5
    assert not row["references_agree"]
    assert any("spike: the two references disagree" in w for w in result.warnings)
    assert "references_agree" in result.compact().columns


@pytest.mark.slow
def test_compare_reports_agreeing_references_on_the_exact_case():
    """Slow (31 s): the fast suite has nested sampling on this case against its exact log Z
    (tests/samplers/test_nested.py), the agreement rule (above) and compare with both
    references (the spike)."""
    case = conjugate_regression()
    plan = ComparisonPlan(free_energy=Tempering(num_copies=2), nested=NestedSampling(num_runs=2))
    result = slt.compare({"regression": case.problem}, jax.random.key(1),
                         methods=("free_energy", "nested"), plan=plan, progress=False)
    row = result.table.loc["regression"]
    assert row["references_agree"]
    assert abs(row["nested"] + case.log_evidence) < 4 * row["nested_se"]
    assert result.choices["nested"] == "regression"
