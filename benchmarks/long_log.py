"""A long ROS 2 bag replayed as a user replays it: throughput and memory.

A 7-joint arm (Panda from MuJoCo, :mod:`mujoco_robot`) logged at 1 kHz for ``--minutes``
minutes is written as an MCAP bag of ``sensor_msgs/msg/JointState`` (positions, velocities,
efforts; no accelerations), then replayed in a fresh process with ``dense-armor replay ROBOT.urdf
BAG --learner robot --lock ... --out o.csv`` for each learner. Reported: samples per second of
the replay itself and of the whole command (start-up, reading, differentiating, writing
included), and the process's peak memory, against the size the log would take in memory.

    python benchmarks/long_log.py --minutes 5
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import mujoco_robot as mr
from common import table, write_section
from dense_armor.logs import write_bag

CHILD = """
import resource, sys, time
from dense_armor.cli import main
started = time.perf_counter()
status = main(sys.argv[1:])
elapsed = time.perf_counter() - started
print("PEAK_MB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "ELAPSED", elapsed, "STATUS", status)
"""


def make_bag(folder: Path, minutes: float) -> tuple[Path, Path, int]:
    sim = mr.simulate("panda", 0, 1000.0, 60.0 * minutes, "steady", motion="sines")
    names = sim.joint_names
    cols = sim.columns
    q = np.stack([cols[f"q_{j}"] for j in names], 1)
    qd = np.stack([cols[f"qd_{j}"] for j in names], 1)
    tau = np.stack([cols[f"tau_{j}"] for j in names], 1)
    bag = folder / "panda_bag"
    write_bag(bag, cols["t"] + 1.7e9, names, q, qd, tau)
    urdf = folder / "panda.urdf"
    urdf.write_text(mr.nominal_urdf("panda"))
    return urdf, bag, len(cols["t"])


def replay(urdf, bag, learner, folder) -> dict:
    locks = [x for name, value in mr.ROBOTS["panda"].locked.items() for x in ("--lock", f"{name}={value:g}")]
    argv = ["replay", str(urdf), str(bag), "--learner", learner, *locks, "--out", str(folder / f"{learner}.csv"),
            "--no-progress"]
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, check=True)
    total = time.perf_counter() - started
    line = re.search(r"\(([\d.]+) s, ([\d,]+) samples/s\)", done.stdout)
    peak = re.search(r"PEAK_MB ([\d.]+) ELAPSED ([\d.]+)", done.stdout)
    return {"learner": learner, "replay_s": float(line.group(1)), "replay_rate": float(line.group(2).replace(",", "")),
            "command_s": total, "peak_mb": float(peak.group(1))}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--learners", nargs="*", default=["robot", "payload", "five-feature"])
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        urdf, bag, samples = make_bag(folder, args.minutes)
        log_mb = samples * (1 + 7 * 4) * 8 / 2**20  # t, q, qd, qdd, tau in float64
        rows, results = [], []
        for learner in args.learners:
            r = replay(urdf, bag, learner, folder)
            results.append(r)
            print(json.dumps(r), flush=True)
            rows.append([learner, f"{samples:,}", f"{r['replay_rate']:,.0f}", f"{samples / r['command_s']:,.0f}",
                         f"{r['command_s'] - r['replay_s']:.1f}", f"{r['peak_mb']:.0f}", f"{log_mb:.0f}"])
    text = table(["learner", "samples (1 kHz, 7 joints)", "replay samples/s", "whole command samples/s",
                  "start-up and I/O s", "peak memory MB", "the log in memory MB"], rows)
    print(text)
    if not args.no_docs:
        write_section("Long logs: a ROS 2 bag replayed", f"A {args.minutes:g}-minute 1 kHz Panda log as an MCAP bag, "
                      "`dense-armor replay panda.urdf bag --learner L --lock ... --out o.csv`, each in a fresh process "
                      "(JAX defaults, no compile cache).\n\n" + text, f"python benchmarks/long_log.py --minutes {args.minutes:g}")
