"""The `slt` command: each subcommand's happy path (tiny settings) and its bad inputs.

Commands run in-process through `slt.cli.main(argv)`, which returns the exit status (0 success,
1 failed run, 2 usage error); one test runs the installed console script.
"""

import dataclasses
import inspect
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import slt
from slt.cli import build_parser, main
from slt.cli.llc import local_values

QUIET = ["--no-progress"]
FAST_LLC = ["--num-chains", "2", "--num-samples", "50", "--num-warmup", "20", "--step-size",
            "1e-3"]


@pytest.fixture(scope="module")
def regression_csv(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(0)
    x = rng.normal(size=200)
    y = 0.5 * x + rng.normal(size=200)
    path = folder / "regression.csv"
    np.savetxt(path, np.c_[x, y], delimiter=",", header="x,y", comments="")
    return path


def _one_line_error(capsys, *needles):
    err = capsys.readouterr().err.strip()
    assert err.startswith("slt: error:") and "Traceback" not in err and len(err.splitlines()) == 1
    for needle in needles:
        assert needle in err
    return err


def test_console_script_help_runs():
    script = Path(sys.executable).with_name("slt")
    completed = subprocess.run([str(script), "--help"], capture_output=True, text=True,
                               timeout=120)
    assert completed.returncode == 0
    for command in ("demo", "compare", "llc", "fisher-scan", "validate"):
        assert command in completed.stdout


@pytest.mark.heavy
def test_llc_on_a_csv_writes_its_outputs_and_refuses_to_overwrite(regression_csv, tmp_path,
                                                                     capsys):
    out = tmp_path / "llc"
    argv = ["llc", str(regression_csv), "-m", "linear_regression(1)", "--x", "x", "--y", "y",
            *FAST_LLC, *QUIET, "--out", str(out)]
    assert main(argv) == 0
    summary = json.loads((out / "llc.json").read_text())
    assert "λ̂" in capsys.readouterr().out and summary
    assert {p.name for p in out.iterdir()} >= {"llc.json", "llc.png", "llc.nc"}
    before = (out / "llc.json").read_bytes()
    assert main(argv) == 2
    _one_line_error(capsys, "--force")
    assert (out / "llc.json").read_bytes() == before
    assert main([*argv, "--force"]) == 0


def _llc_values(*options):
    """The (posterior, sampler, plan) `slt llc` builds from `options`."""
    args = build_parser().parse_args(["llc", "data.csv", "-m", "linear_regression(1)",
                                      *options])
    return local_values(args)


def test_llc_defaults_are_those_of_the_values(capsys):
    """Without options `slt llc` makes the call `slt.llc` makes by default: the values'
    own defaults, shown in the help."""
    posterior, sampler, plan = _llc_values()
    assert repr(posterior) == repr(slt.LocalPosterior())
    assert dataclasses.asdict(posterior) == dataclasses.asdict(slt.LocalPosterior())
    assert sampler == slt.samplers.SGLD() and plan == slt.RunPlan()
    defaults = inspect.signature(slt.llc).parameters
    assert sampler == defaults["sampler"].default and plan == defaults["plan"].default
    assert _llc_values("--no-progress")[2] == slt.RunPlan(progress=False)
    assert main(["llc", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    for option, value in [("--num-chains", slt.RunPlan().num_chains),
                          ("--num-samples", slt.RunPlan().num_samples),
                          ("--num-warmup", slt.RunPlan().num_warmup),
                          ("--gamma", slt.LocalPosterior().gamma),
                          ("--batch-size", slt.samplers.SGLD().batch_size),
                          ("--step-size", slt.samplers.SGLD().step_size)]:
        assert option in help_text and f"(default: {value}" in help_text, option


def test_llc_options_build_the_values():
    posterior, sampler, plan = _llc_values(
        "--gamma", "10", "--num-chains", "2", "--num-samples", "50", "--num-warmup", "0",
        "--step-size", "1e-3", "--batch-size", "32")
    assert posterior.gamma == 10.0 and posterior.nbeta is None
    assert sampler == slt.samplers.SGLD(step_size=1e-3, batch_size=32)
    assert plan == slt.RunPlan(num_chains=2, num_samples=50, num_warmup=0)
    assert _llc_values("--sampler", "mala")[1] == slt.samplers.MALA()
    assert _llc_values("--sampler", "hmc", "--step-size", "0.01")[1] == slt.samplers.HMC(
        step_size=0.01)
    assert _llc_values("--sampler", "sghmc", "--batch-size", "64")[1] == slt.samplers.SGHMC(
        batch_size=64)


def test_llc_batch_size_needs_sgld(regression_csv, tmp_path, capsys):
    status = main(["llc", str(regression_csv), "-m", "linear_regression(1)", "--x", "x", "--y",
                   "y", "--sampler", "mala", "--batch-size", "32", *QUIET])
    assert status == 2
    _one_line_error(capsys, "--batch-size", "--sampler sgld")


@pytest.mark.heavy
def test_llc_with_the_exact_mala_sampler(regression_csv, tmp_path, capsys):
    """--sampler mala: the full-batch Metropolis-adjusted sampler, its step size adapted
    during the warmup (no calibration)."""
    out = tmp_path / "mala"
    status = main(["llc", str(regression_csv), "-m", "linear_regression(1)", "--x", "x", "--y",
                   "y", "--sampler", "mala", "--num-chains", "2", "--num-samples", "50",
                   "--num-warmup", "50", *QUIET, "--out", str(out)])
    printed = capsys.readouterr()
    assert status == 0, printed.err
    summary = json.loads((out / "llc.json").read_text())
    assert summary["sampler"] == "MALA" and "sampler MALA" in printed.out
    assert summary["summary"]["chains"] == 2 and summary["summary"]["draws"] == 50
    assert np.isfinite(summary["summary"]["llc"])


@pytest.mark.slow  # 20 s of make test's 10 minutes; compare's choice is tested in
# tests/estimators/test_compare.py, the command's writing by the other commands' tests
def test_compare_picks_a_model_and_writes_the_table(regression_csv, tmp_path, capsys):
    out = tmp_path / "compare"
    status = main(["compare", str(regression_csv), "-m", "gaussian_mixture(1)", "-m",
                   "gaussian_mixture(2)", "--y", "y", "--methods", "bic", *QUIET,
                   "--out", str(out)])
    assert status == 0
    assert "selected" in capsys.readouterr().out
    assert (out / "comparison.csv").exists() and (out / "comparison.nc").exists()


def _compare_call(monkeypatch, data, *options):
    """The methods and the plan `slt compare` hands to `slt.compare` with `options`."""
    import slt.cli.compare as command

    class Called(Exception):
        pass

    seen = {}

    def record(problems, key, methods, plan, progress):
        seen.update(methods=methods, plan=plan)
        raise Called

    monkeypatch.setattr(command, "compare", record)
    with pytest.raises(Called):
        main(["compare", str(data), "-m", "gaussian_mixture(1)", "-m", "gaussian_mixture(2)",
              "--y", "y", *QUIET, *options])
    return seen["methods"], seen["plan"]


def test_compare_options_build_the_plan(regression_csv, monkeypatch, capsys):
    """The command's defaults are the library's (the fast path, every default column);
    --tempered drops the fast path; --sampler nuts gives wbic, rlct and loo chains of their
    own; --sampler smc, its name before the fast path, still works, with a note."""
    from slt.estimators.evidence.compare import DEFAULT_METHODS
    from slt.estimators.evidence.draws import FromDraws

    methods, plan = _compare_call(monkeypatch, regression_csv)
    assert methods == DEFAULT_METHODS
    assert plan.draws == FromDraws() and (plan.wbic, plan.rlct, plan.loo) == (None, None, None)
    assert _compare_call(monkeypatch, regression_csv, "--tempered")[1].draws is None
    _, renamed = _compare_call(monkeypatch, regression_csv, "--sampler", "smc")
    assert "--sampler smc is now called 'shared'" in capsys.readouterr().err
    assert renamed == plan
    _, own = _compare_call(monkeypatch, regression_csv, "--sampler", "nuts", "--num-samples",
                           "200")
    assert own.rlct == own.loo == slt.NUTS(num_samples=200) and own.wbic is None
    assert main(["compare", "--help"]) == 0
    help_text = " ".join(capsys.readouterr().out.split())
    assert f"(default: {','.join(DEFAULT_METHODS)})" in help_text
    assert f"(default: {slt.NUTS().num_samples})" in help_text


def test_fisher_scan_writes_the_grid(tmp_path, capsys):
    out = tmp_path / "scan"
    status = main(["fisher-scan", "-m", "fixed_component_mixture", "--at", "pi=0.5", "--at",
                   "mu=1", "--at", "sigma=1", "--axis", "mu=-1:1:5", *QUIET, "--out",
                   str(out)])
    assert status == 0
    assert (out / "fisher_scan.csv").exists() and (out / "fisher_scan.png").exists()
    assert "FisherScan" in capsys.readouterr().out


def test_fisher_scan_monte_carlo_takes_num_draws_and_its_older_name(capsys):
    """--num-draws sets the FisherRequest's replicates; --num-samples, its name before the
    one vocabulary, still does; an exact scan refuses them by name."""
    scan = ["fisher-scan", "-m", "fixed_component_mixture", "--at", "pi=0.5", "--at", "mu=1",
            "--at", "sigma=1", "--axis", "mu=0:1:2", *QUIET]
    printed = []
    for flag in ("--num-draws", "--num-samples"):
        assert main([*scan, "--kind", "monte_carlo", flag, "16"]) == 0
        printed.append(capsys.readouterr().out)
    assert "FisherScan(monte_carlo" in printed[0] and printed[0] == printed[1]
    assert main([*scan, "--kind", "monte_carlo"]) == 2
    assert "needs --num-draws" in capsys.readouterr().err
    assert main([*scan, "--num-draws", "16"]) == 2
    assert "num_draws is for kind='monte_carlo'" in capsys.readouterr().err


def test_a_users_own_numpyro_model(regression_csv, tmp_path, monkeypatch, capsys):
    (tmp_path / "my_models.py").write_text(
        "import numpyro, numpyro.distributions as dist\n"
        "def regression(x, y):\n"
        "    w = numpyro.sample('w', dist.Normal(0, 1))\n"
        "    with numpyro.plate('data', x.shape[0]):\n"
        "        numpyro.sample('y', dist.Normal(w * x, 1.0), obs=y)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    status = main(["llc", str(regression_csv), "-m", "my_models:regression", "--x", "x", "--y",
                   "y", *FAST_LLC, *QUIET, "--out", str(tmp_path / "own")])
    assert status == 0, capsys.readouterr().err


@pytest.mark.parametrize("command", ["llc", "compare"])
def test_missing_file(command, tmp_path, capsys):
    assert main([command, str(tmp_path / "absent.csv"), "-m", "gaussian_mixture(1)", "-m",
                 "gaussian_mixture(2)", *QUIET, "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, "absent.csv")


@pytest.mark.parametrize(("content", "named"), [
    ("x,y\n1,2\n3\n", ""),  # a ragged row: the missing value is reported as not finite
    ("x,y\n1,abc\n2,3\n", "bad.csv"),
    ("x,y\n1,nan\n2,3\n", "non-finite"),
])
def test_malformed_csv(content, named, tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text(content)
    status = main(["llc", str(path), "-m", "linear_regression(1)", "--x", "x", "--y", "y",
                   *FAST_LLC, *QUIET, "--out", str(tmp_path / "o")])
    assert status == 2
    _one_line_error(capsys, named)


def test_nuts_settings_need_the_nuts_sampler(regression_csv, tmp_path, capsys):
    assert main(["compare", str(regression_csv), "-m", "gaussian_mixture(1)", "-m",
                 "gaussian_mixture(2)", "--y", "y", "--num-samples", "200", *QUIET]) == 2
    _one_line_error(capsys, "--sampler nuts")


def test_unknown_model(regression_csv, tmp_path, capsys):
    assert main(["llc", str(regression_csv), "-m", "no_such_model(3)", *QUIET, "--out",
                 str(tmp_path / "o")]) == 2
    _one_line_error(capsys, "no_such_model")


@pytest.mark.parametrize("option", [["--num-samples", "-5"], ["--num-samples", "many"],
                                    ["--step-size", "0"]])
def test_bad_option_values(regression_csv, tmp_path, capsys, option):
    status = main(["llc", str(regression_csv), "-m", "linear_regression(1)", "--x", "x", "--y",
                   "y", *QUIET, "--out", str(tmp_path / "o"), *option])
    assert status == 2
    _one_line_error(capsys)


def test_unknown_command_and_option(capsys):
    assert main(["frobnicate"]) == 2
    _one_line_error(capsys)
    assert main(["fisher-scan", "--no-such-option"]) == 2
    _one_line_error(capsys)


def test_demo_refuses_to_overwrite_a_report(tmp_path, capsys):
    (tmp_path / "report.md").write_text("an earlier report")
    assert main(["demo", "--out", str(tmp_path), *QUIET]) == 2
    _one_line_error(capsys, "--force")
    assert (tmp_path / "report.md").read_text() == "an earlier report"


@pytest.mark.slow  # 20 s of make test's 10 minutes; CI's packaging tests run
# `slt validate --quick` from the installed wheel (tests/distribution/test_wheel.py)
def test_validate_quick_prints_the_calibration_table(tmp_path, capsys):
    out = tmp_path / "validation.json"
    status = main(["validate", "--quick", *QUIET, "--out", str(out)])
    printed = capsys.readouterr().out
    rows = json.loads(out.read_text())
    assert status == 0, printed
    assert rows and "truth" in printed.lower()



def test_sigterm_stops_a_command_as_ctrl_c_does(monkeypatch, capsys):
    """While a command runs, SIGTERM raises a KeyboardInterrupt (exit 130, one line) instead of
    ending the process; the handler before it is back afterwards."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("Python delivers signals to the main thread only")
    before = signal.getsignal(signal.SIGTERM)

    def terminated(args):
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(30)  # the handler raises long before this ends
        return 0

    monkeypatch.setattr("slt.cli.validate.run", terminated)
    assert main(["validate", "--quick"]) == 130
    assert capsys.readouterr().err.strip() == "slt: interrupted (no partial output was written)"
    assert signal.getsignal(signal.SIGTERM) == before


def test_cache_shows_the_folder_and_clears_slts_programs_only_from_a_folder_of_its_own(tmp_path):
    """`slt cache` names the folder and counts its compiled and traced programs; --clear
    empties slt's own folder, and from a folder given to JAX removes only the traced ones."""
    def slt_cache(*argv, **variables):
        environment = {name: value for name, value in os.environ.items()
                       if name not in ("JAX_COMPILATION_CACHE_DIR", "SLT_COMPILATION_CACHE")}
        completed = subprocess.run(
            [sys.executable, "-c", "from slt.cli import main; raise SystemExit(main())",
             "cache", *argv], env=environment | variables, capture_output=True, text=True,
            check=True)
        return completed.stdout

    for folder in ("own", "jaxs"):
        (tmp_path / folder / "slt-traced").mkdir(parents=True)
        (tmp_path / folder / "compiled-program").write_bytes(b"x" * 2048)
        (tmp_path / folder / "slt-traced" / "traced-program").write_bytes(b"y" * 1024)
    own = slt_cache(SLT_COMPILATION_CACHE=str(tmp_path / "own"))
    assert f"folder: {tmp_path / 'own'}\n" in own
    assert "compiled programs: 1 files" in own and "traced programs:   1 files" in own
    assert "cleared" in slt_cache("--clear", SLT_COMPILATION_CACHE=str(tmp_path / "own"))
    assert list((tmp_path / "own").iterdir()) == []
    jaxs = slt_cache("--clear", JAX_COMPILATION_CACHE_DIR=str(tmp_path / "jaxs"))
    assert "(set for JAX, not by slt)" in jaxs
    left = {path.name for path in (tmp_path / "jaxs").iterdir()}
    assert "compiled-program" in left and "slt-traced" not in left
    assert "the cache is off" in slt_cache(SLT_COMPILATION_CACHE="off")
