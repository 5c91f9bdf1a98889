"""A long ROS 2 bag replayed as a user replays it: throughput and memory.

A 7-joint arm (Panda from MuJoCo, :mod:`mujoco_robot`) logged at 1 kHz for ``--minutes``
minutes is written as an MCAP bag of ``sensor_msgs/msg/JointState`` (positions, velocities,
efforts; no accelerations), then replayed in a fresh process with ``dense-armor replay ROBOT.urdf
BAG --learner L --lock ... --out o.csv`` for each learner (the whole-robot learner also without
its payload detector, ``--no-payload``), three times: without the compile cache, then twice with
one (filling it, then using it). Reported: samples per second of the replay after compiling and
of the whole command, the start-up (import, parsing, compiling) with and without the cache, and
the process's peak memory, against the size the log would take in memory.

    python benchmarks/long_log.py --minutes 5
"""

from __future__ import annotations

import argparse
import json
import os
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

# The peak is this process's VmHWM: getrusage's ru_maxrss would also count the parent's memory at
# the fork (Linux carries it across exec), and this parent holds the simulated log.
CHILD = """
import re, sys, time
from dense_armor.cli import console
started = time.perf_counter()
status = console()  # the installed command (its compile cache), reading sys.argv
elapsed = time.perf_counter() - started
with open("/proc/self/status") as f:
    peak = int(re.search(r"VmHWM:\\s*(\\d+) kB", f.read()).group(1))
print("PEAK_MB", peak / 1024, "ELAPSED", elapsed, "STATUS", status)
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


def replay(urdf, bag, learner, folder, cache: str = "") -> dict:
    """One fresh ``dense-armor replay`` process; ``learner``: the ``--learner`` choice, then any
    options of its own (``"robot --no-payload"``); ``cache``: its compile-cache folder ("": none)."""
    kind, *options = learner.split()
    locks = [x for name, value in mr.ROBOTS["panda"].locked.items() for x in ("--lock", f"{name}={value:g}")]
    argv = ["replay", str(urdf), str(bag), "--learner", kind, *options, *locks,
            "--out", str(folder / f"{'_'.join(learner.split())}.csv"), "--no-progress"]
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"} | {"JAX_COMPILATION_CACHE_DIR": cache}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, *argv], capture_output=True, text=True, check=True, env=env)
    total = time.perf_counter() - started
    line = re.search(r"\(([\d.]+) s, compiling ([\d.]+) s of it; [\d,]+ samples/s after it\)", done.stdout)
    samples = int(re.search(r": (\d+) samples", done.stdout).group(1))
    peak = re.search(r"PEAK_MB ([\d.]+) ELAPSED ([\d.]+)", done.stdout)
    replay_s, compile_s = float(line.group(1)), float(line.group(2))
    return {"learner": learner, "samples": samples, "replay_s": replay_s, "compile_s": compile_s,
            "rate": samples / (replay_s - compile_s), "command_s": total, "startup_s": total - (replay_s - compile_s),
            "peak_mb": float(peak.group(1))}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--learners", nargs="*", default=["robot", "robot --no-payload", "payload", "five-feature"],
                        help="each a --learner choice, then options of its own")
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        urdf, bag, samples = make_bag(folder, args.minutes)
        log_mb = samples * (1 + 7 * 4) * 8 / 2**20  # t, q, qd, qdd, tau in float64
        rows = []
        for learner in args.learners:
            cold = replay(urdf, bag, learner, folder)
            cache = str(folder / f"cache_{'_'.join(learner.split())}")
            replay(urdf, bag, learner, folder, cache)  # fills the cache
            warm = replay(urdf, bag, learner, folder, cache)
            print(json.dumps({"cold": cold, "warm": warm}), flush=True)
            rows.append([learner, f"{samples:,}", f"{cold['rate']:,.0f}", f"{samples / cold['command_s']:,.0f}",
                         f"{cold['startup_s']:.1f} ({cold['compile_s']:.1f})", f"{warm['startup_s']:.1f}",
                         f"{warm['rate']:,.0f}", f"{cold['peak_mb']:.0f}", f"{log_mb:.0f}"])
    text = table(["learner", "samples (1 kHz, 7 joints)", "replay samples/s", "whole command samples/s",
                  "start-up s (compiling)", "start-up s, warm cache", "replay samples/s, warm cache", "peak memory MB",
                  "the log in memory MB"], rows)
    print(text)
    if not args.no_docs:
        write_section("Long logs: a ROS 2 bag replayed", f"A {args.minutes:g}-minute 1 kHz Panda log as an MCAP bag, "
                      "`dense-armor replay panda.urdf bag --learner L --lock ... --out o.csv`, each in a fresh process "
                      "as the installed command runs (JAX's defaults but its compile cache). \"replay\": the "
                      "samples over the replay's time less its compiling (reading, differentiating and writing "
                      "included); \"start-up\": the rest of the command (import, parsing, compiling), without the "
                      "compile cache and, in a third run, with the cache the second filled.\n\n" + text,
                      f"python benchmarks/long_log.py --minutes {args.minutes:g}")
