"""Short versions of the realistic benchmark (benchmarks/realistic.py): MuJoCo as the robot,
logged as real robots log, replayed through the command line."""

from __future__ import annotations

import pytest

pytest.importorskip("mujoco")

from realistic import case  # noqa: E402  (benchmarks/, on the path through conftest.py)


@pytest.mark.slow
@pytest.mark.parametrize("robot, seed", [("panda", 0), ("ur5", 1)])
def test_a_pick_up_on_a_mujoco_arm_logged_as_real_robots_log(robot, seed):
    r = case(robot, 100.0, "pick", seed, duration=40.0)
    assert r["false_alarms"] == 0 and not r["missed"] and r["delay"] <= 3.0, r
    assert r["mass_error"] < 0.1, r
    assert r["harmful"] == 0, r
    assert r["rmse_learner"] < 0.3 * r["rmse_urdf"] and r["rmse_learner"] < 1.3 * r["rmse_batch"], r


@pytest.mark.slow
@pytest.mark.parametrize("robot, rate, scenario, seed", [("panda", 1000.0, "steady", 2), ("ur5", 1000.0, "drop", 3)])
def test_the_realistic_benchmark_at_1_khz(robot, rate, scenario, seed):
    r = case(robot, rate, scenario, seed)
    assert r["false_alarms"] == 0 and not r["missed"], r
    assert r["harmful"] == 0 and r["rmse_learner"] < 1.3 * r["rmse_batch"], r


@pytest.mark.slow
@pytest.mark.parametrize("robot, rate, scenario, seed", [("ur5", 1000.0, "drop", 17), ("panda", 100.0, "pick", 17)])
def test_a_change_the_learner_absorbs_in_a_slow_move_is_found_from_its_onset(robot, rate, scenario, seed):
    # point-to-point moves from rest: the learner follows much of the change before a window fit
    # sees it (the window fits alone found these at 4.7 s and 3.8 s); the onsets see it at once
    r = case(robot, rate, scenario, seed)
    assert r["false_alarms"] == 0 and not r["missed"] and r["delay"] <= 3.0, r
    assert r["mass_error"] < 0.05, r
