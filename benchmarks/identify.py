"""``dense-armor identify`` on realistic logs: what the written robot predicts.

    python benchmarks/identify.py [--against REV] [--seeds 0 1 2] [--no-docs]

For each robot and seed, a 60 s MuJoCo log at 200 Hz (``mujoco_robot.simulate``: the true robot
perturbed from its URDF, armature, friction, a torque-gain error, correlated noise; excitation
sines) is written as a CSV and identified by the command line in a fresh process, for this
checkout and for the git revision ``REV`` (its ``src``). The written URDF and sidecar are then
evaluated on the log and on a held-out log of the same robot (point-to-point moves with rests,
another draw of the motion): RMSE over every joint, N m, on the log's own ``q``, ``qd`` and true
accelerations. Writes the "identify: the written robot" section of ``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import jax
import mujoco_robot as mr
from common import alternated, table, write_section

from dense_armor import parse_urdf, rnea
from dense_armor.model import lock_joints
from dense_armor.robot_learner import JOINT_TERMS, joint_columns

RATE, DURATION = 200.0, 60.0
ROBOTS = ("panda", "ur5")
EARLIER = "735cb57"  # main before the posterior's projection: each body moved alone to its nearest rigid body


def write_csv(sim, path: Path) -> None:
    keys = ["t"] + [f"{k}_{j}" for k in ("q", "qd", "tau") for j in sim.joint_names]
    np.savetxt(path, np.column_stack([sim.columns[k] for k in keys]), delimiter=",", header=",".join(keys), comments="")


def rmse(urdf: Path, sim, locked: dict) -> float:
    """The written URDF's ``rnea`` (its ``locked`` joints locked, as the log was identified) plus
    its sidecar's joint terms against the log's torques."""
    model, side = parse_urdf(urdf.read_text()), json.loads(urdf.with_suffix(".json").read_text())
    model = lock_joints(model, locked) if locked else model
    q, qd, tau = (np.stack([sim.columns[f"{k}_{j}"] for j in sim.joint_names], 1) for k in ("q", "qd", "tau"))
    qdd = sim.qdd_true
    terms = {k: np.array([side["joints"][j][k] for j in sim.joint_names]) for k in JOINT_TERMS}
    with jax.enable_x64(True):
        torque = np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(model, q, qd, qdd))
        columns = np.asarray(joint_columns(qd, qdd, side["coulomb_width"]))
    predicted = torque + sum(terms[k] * column for k, column in zip(JOINT_TERMS, columns))
    return float(np.sqrt(np.mean((tau - predicted) ** 2)))


def measure(folder: Path, seeds):
    logs = {}
    for robot in ROBOTS:
        for seed in seeds:
            fit, held = (mr.simulate(robot, seed, RATE, DURATION, "steady", motion=m) for m in ("sines", "moves"))
            tag = f"{robot}_{seed}"
            (folder / f"{tag}.urdf").write_text(mr.nominal_urdf(robot))
            write_csv(fit, folder / f"{tag}.csv")
            logs[tag] = (robot, fit, held)

    def run(env) -> dict:
        out = {}
        for tag, (robot, fit, held) in logs.items():
            written = folder / f"{tag}_{len(list(folder.glob(f'{tag}_*.urdf')))}.urdf"
            locks = [x for name, value in mr.ROBOTS[robot].locked.items() for x in ("--lock", f"{name}={value:g}")]
            command = [sys.executable, "-m", "dense_armor", "identify", str(folder / f"{tag}.urdf"), str(folder / f"{tag}.csv"),
                       "-o", str(written), *locks]
            done = subprocess.run(command, capture_output=True, text=True, env=env)
            if done.returncode:
                raise RuntimeError(f"{tag}: {done.stderr[-400:]}")
            source = json.loads(written.with_suffix(".json").read_text())["source"]
            locked = mr.ROBOTS[robot].locked
            out[tag] = source | {"log": rmse(written, fit, locked), "held_out": rmse(written, held, locked),
                                 "warned": "physically consistent costs fit" in done.stderr}
            print(tag, json.dumps({k: v for k, v in out[tag].items() if k != "log"} | {"log": out[tag]["log"]}), flush=True)
        return out

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=EARLIER)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        runs = alternated(measure(Path(folder), args.seeds), args.against, rounds=1)
    head, base = runs["head"][0], runs["base"][0]
    rows = []
    for tag, h in head.items():
        b = base[tag]
        rows.append([tag.replace("_", ", seed "), f"{h['rmse_nominal']:.3f}", f"{h['rmse_learner']:.3f}", f"{h['rmse_unconstrained']:.3f}",
                     f"{h['rmse_written']:.3f}", f"{b['rmse_written']:.3f}", f"{h['held_out']:.3f}", f"{b['held_out']:.3f}",
                     "yes" if h["warned"] else "no"])
    body = (f"60 s MuJoCo logs at {RATE:g} Hz (the realistic benchmark's robots: the true robot perturbed from its URDF, "
            "armature, friction, torque-gain errors, correlated noise; excitation sines), identified by `dense-armor identify` "
            f"at this checkout and at `{args.against}` (each body moved alone to its nearest rigid body). RMSE over every joint, "
            "N m: on the log as identify reports it (the URDF given, the learner's running score, the learned parameters before "
            "the consistency projection, the written URDF and sidecar), and the written files on a held-out log of the same "
            "robot (point-to-point moves with rests), evaluated on the log's `q`, `qd` and true accelerations. \"warned\": "
            "identify's warning that consistency costs fit (over 1.05x the unconstrained RMSE).\n\n"
            + table(["robot", "URDF", "learner (running)", "learned, unconstrained", "written", f"written at {args.against}",
                     "written, held out", f"held out at {args.against}", "warned"], rows))
    if args.no_docs:
        print(body)
    else:
        write_section("identify: the written robot", body, " ".join(["python benchmarks/identify.py", *sys.argv[1:]]))


if __name__ == "__main__":
    main()
