"""The benchmarks' side-by-side comparison with an earlier revision measures the trees it names."""

from __future__ import annotations

import subprocess

import pytest
from common import SOURCE, alternated, best, imported
from gpu import TOLERANCE


@pytest.mark.slow  # a long protocol: the default run stays under 5 minutes
def test_alternated_measures_this_checkout_and_the_revision_in_turn():
    if subprocess.run(["git", "-C", str(SOURCE.parent), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    order = []

    def measure(env):
        order.append(imported(env))
        return {"robot": {"us": float(len(order))}}

    runs = alternated(measure, "HEAD", rounds=2)
    head, base = order[0::2], order[1::2]
    assert all(path.is_relative_to(SOURCE.resolve()) for path in head)
    assert not any(path.is_relative_to(SOURCE.resolve()) for path in base)
    assert all(path.parts[-2:] == ("dense_armor", "__init__.py") for path in base)
    assert runs == {"head": [{"robot": {"us": 1.0}}, {"robot": {"us": 3.0}}], "base": [{"robot": {"us": 2.0}}, {"robot": {"us": 4.0}}]}
    assert not base[0].exists()  # the exported tree is removed afterwards


def test_best_takes_each_figure_lowest_over_runs():
    runs = [{"Panda": {"rnea": 2.0, "crba": 5.0}}, {"Panda": {"rnea": 3.0, "crba": 4.0}}]
    assert best(runs) == {"Panda": {"rnea": 2.0, "crba": 4.0}}


@pytest.mark.slow
def test_the_gpu_measurement_runs_end_to_end_here(tmp_path):
    """``benchmarks/gpu.py``, prepared for a machine with a GPU (no device is at hand in CI), run on
    this CPU at small sizes: the measurement, then the report, whose float32 errors hold the CPU
    tests' bounds; every batch is measured (MJX where it imports)."""
    import json
    import sys
    from pathlib import Path

    script = SOURCE.parent / "benchmarks" / "gpu.py"

    def run(*args):
        done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, cwd=script.parent, timeout=900)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    run("measure", "--out", str(tmp_path), "--states", "64", "--variants", "8", "--samples", "50", "--shard", "8", "50", "--budget", "600")
    body = run("report", str(tmp_path), str(tmp_path), "--no-docs")
    assert "### Throughput" in body and "### Sharding" in body
    results = json.loads(Path(tmp_path, "results.json").read_text())
    measured = [row for key in ("dynamics", "learners") for row in results[key]]
    assert len(measured) == 2 + 6 and not any("skipped" in row for row in measured), measured
    assert results["sharding"]["max_weight_difference"] == 0.0
    errors = json.loads(Path(tmp_path, "errors.json").read_text())["CPU float32"]
    for key, error in errors.items():
        robot, what = key.split("/")
        if what in TOLERANCE:
            assert error <= TOLERANCE[what], (key, error)
        else:  # a learner: float32 as good as float64 on the same data
            assert abs(error["rmse_ratio"] - 1) < 0.02, (key, error)


@pytest.mark.parametrize("name", ["UR5", "Panda"])
def test_the_numpy_reference_learns_the_robot_learners_columns(name):
    # the learners benchmark's NumPy + Pinocchio whole-robot reference does the library's work:
    # the same columns (Pinocchio's regressor in place of the library's) at the same state
    import jax
    import numpy as np
    from common import robots
    from learners import reference

    from dense_armor import parse_urdf
    from dense_armor.robot_learner import RobotLearner

    xml = robots()[name]
    learner = RobotLearner(parse_urdf(xml))
    numpy = reference("robot", xml)
    q, qd, qdd = np.random.default_rng(0).uniform(-0.5, 0.5, (3, learner.model.n))
    qd[0] = 0.01  # within the Coulomb width: the smooth sign and the Stribeck term both matter
    with jax.enable_x64(True):
        X, nominal = learner.features(q, qd, qdd, np.float64)
    X_ref, nominal_ref = numpy.features(q, qd, qdd)
    np.testing.assert_allclose(X_ref, X, atol=1e-9)
    np.testing.assert_allclose(nominal_ref, nominal, atol=1e-9)
