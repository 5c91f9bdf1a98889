"""The whole-robot learner's covariance in float32: its factor against the covariance itself.

A GPU batch runs the learner in float32. After a minute at 1 kHz the posterior covariance ``P``
spans nine or ten decades (the prior of directions the data never excite, the residue of those
they identify well), past float32's resolution. The learner keeps a float32 covariance as a
factor ``S S'`` (``rls.FactorState``); this replays the realistic benchmark's logs (MuJoCo as the
robot, 60 s at 1 kHz) in float64 and in float32 both ways, the float32 covariance kept as ``P``
being the learner's state with its ``rls`` replaced by an ``rls.RLSState`` (the learner updates
either form), and compares each float32 ``P`` with float64's along float64's eigenvectors.

Run: ``python benchmarks/float32_covariance.py`` (writes its section of docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import mujoco_robot as mr  # noqa: E402
from common import table, write_section  # noqa: E402
from dense_armor import rls  # noqa: E402
from dense_armor.learners import Sample, replay  # noqa: E402
from dense_armor.logs import load_log, write_table  # noqa: E402
from dense_armor.model import lock_joints  # noqa: E402
from dense_armor.robot_learner import RobotLearner  # noqa: E402
from dense_armor.urdf import parse_urdf  # noqa: E402

HEADING = "The whole-robot learner's covariance in float32"
CASES = (("panda", 0, "steady"), ("ur5", 1, "drop"))  # sines, and moves with a dropped payload
TIGHT = 1e-7  # a direction known to better than this variance (parameter units)


def run(robot: str, seed: int, scenario: str) -> list[list]:
    sim = mr.simulate(robot, seed, 1000.0, 60.0, scenario, motion="sines" if seed % 2 == 0 else "moves",
                      velocities=seed % 2 == 0)
    locked = mr.ROBOTS[robot].locked
    with tempfile.TemporaryDirectory() as folder:
        urdf, log = Path(folder) / "robot.urdf", Path(folder) / "log.npz"
        urdf.write_text(mr.nominal_urdf(robot))
        write_table(log, sim.columns)
        model = parse_urdf(urdf)
        model = lock_joints(model, locked) if locked else model
        data = load_log(log, model.joint_names, locked=set(locked))
    learner = RobotLearner(model)
    after = data.t - data.t[0] >= 5.0

    def replayed(state):
        dtype = state.rls.w.dtype
        final, out = replay(learner, state, Sample(*(jnp.asarray(a, dtype) for a in (data.q, data.qd, data.qdd, data.tau))))
        rmse = float(np.sqrt(np.mean((data.tau - np.asarray(out.prediction, np.float64))[after] ** 2)))
        return np.asarray(final.rls.P, np.float64), data.t[np.asarray(out.alarm)], rmse

    exact, alarms, rmse = replayed(learner.init(jnp.float64))
    g, V = np.linalg.eigh(exact)
    tight = g < TIGHT
    factor = learner.init(jnp.float32)
    plain = factor._replace(rls=rls.RLSState(factor.rls.w, factor.rls.P))
    rows = [[f"{robot} seed {seed} {scenario}", "float64, `P`", f"{g[0]:.2e}", "", "", "", f"{rmse:.4f}", len(alarms)]]
    for name, state in (("float32, `P`", plain), ("float32, factor (the learner's)", factor)):
        P, found, error = replayed(state)
        relative = np.abs(np.einsum("ik,ij,jk->k", V, P, V) / g - 1)
        same = len(found) == len(alarms) and np.allclose(found, alarms, atol=0.01)
        rows.append(["", name, f"{np.linalg.eigvalsh(P)[0]:.2e}", f"{np.median(relative[tight]):.1e} / {relative[tight].max():.1e}",
                     f"{np.median(relative[~tight]):.1e} / {relative[~tight].max():.1e}", f"{tight.sum()} of {len(g)}",
                     f"{error:.4f}", f"{len(found)}{'' if same else ' (others)'}"])
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-docs", action="store_true", help="print, do not write docs/benchmarks.md")
    args = parser.parse_args(argv)
    rows = [row for case in CASES for row in run(*case)]
    body = (
        "`RobotLearner(model)` replayed (`learners.replay`) over the realistic benchmark's 60 s logs at 1 kHz as "
        "`load_log` reads them, in float64 and in float32 with the covariance kept as `P` itself or as its factor "
        f"`S S'`; each float32 `P` at the end against float64's along float64's eigenvectors `v_k`: the relative error "
        f"of `v_k' P v_k`, median / max, over the directions known to a variance below {TIGHT:g} and over the rest; "
        "the learner's RMSE after 5 s, and its alarms (\"others\": not float64's within 10 ms).\n\n"
        + table(["log", "run", "smallest eigenvalue of P", "error, tight directions", "error, the rest", "tight",
                 "RMSE N m", "alarms"], rows)
    )
    print(body)
    if not args.no_docs:
        write_section(HEADING, body, "python benchmarks/float32_covariance.py")


if __name__ == "__main__":
    main()
