"""Shared by the benchmark scripts: robots, timing, and writing a section of docs/benchmarks.md."""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from dense_armor.robots import minimal_urdf

DOCS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"
SOURCE = Path(__file__).resolve().parents[1] / "src"
#: ``main`` when the architecture issue was filed (2026-11-30): unrolled scalar code for every
#: algorithm, whose cost exploded past 12 joints in a chain; what ``--against`` compares with by default.
ARCHITECTURE_MAIN = "58281a5"


def example_robot_urdf(relpath: str) -> Path:
    """A URDF shipped by the ``example-robot-data`` package (``pip install example-robot-data``)."""
    for f in importlib.metadata.files("example-robot-data") or ():
        if str(f).endswith("robots/" + relpath):
            return Path(f.locate())
    raise FileNotFoundError(f"example-robot-data has no {relpath}")


def lock_joints(xml: str, names) -> str:
    """The URDF with the named joints made fixed (at zero), as Pinocchio's buildReducedModel."""
    root = ET.fromstring(xml)
    for joint in root.iter("joint"):
        if joint.get("name") in names:
            joint.set("type", "fixed")
            for tag in ("axis", "limit", "mimic", "dynamics", "safety_controller", "calibration"):
                for el in joint.findall(tag):
                    joint.remove(el)
    return ET.tostring(root, encoding="unicode")


def robots() -> dict[str, str]:
    """URDF texts of the benchmark robots: the seed's 2-link arm, UR5, Panda (7 joints)."""
    panda = example_robot_urdf("panda_description/urdf/panda.urdf").read_text()
    return {
        "2-link": minimal_urdf(),
        "UR5": example_robot_urdf("ur_description/urdf/ur5_robot.urdf").read_text(),
        "Panda": lock_joints(panda, {"panda_finger_joint1", "panda_finger_joint2"}),
    }


def serial_chain(n: int, seed: int = 0) -> str:
    """URDF text of a serial chain of ``n`` revolute joints with random axes, placements and
    inertias (each link 0.5-2 kg, 0.2 m from its parent)."""
    rng = np.random.default_rng(seed)
    parts = ['<robot name="chain%d"><link name="link_0"/>' % n]
    for i in range(1, n + 1):
        com = rng.uniform(-0.1, 0.1, 3)
        axis = rng.normal(size=3)
        axis /= np.linalg.norm(axis)
        xyz = (*rng.uniform(-0.1, 0.1, 2), 0.2)
        parts.append(
            f'<link name="link_{i}"><inertial><origin xyz="{com[0]:.4f} {com[1]:.4f} {com[2]:.4f}"/>'
            f'<mass value="{rng.uniform(0.5, 2.0):.4f}"/>'
            '<inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0.002" izz="0.025"/></inertial></link>'
            f'<joint name="joint_{i}" type="revolute"><parent link="link_{i - 1}"/><child link="link_{i}"/>'
            f'<origin xyz="{xyz[0]:.3f} {xyz[1]:.3f} {xyz[2]:.3f}" rpy="{" ".join(f"{a:.3f}" for a in rng.uniform(-1, 1, 3))}"/>'
            f'<axis xyz="{axis[0]:.4f} {axis[1]:.4f} {axis[2]:.4f}"/>'
            '<limit effort="100" velocity="2" lower="-3" upper="3"/></joint>'
        )
    return "".join(parts) + "</robot>"


def median_us(fn, repeats: int = 2000, warmup: int = 20) -> float:
    """Median wall time of ``fn()`` in microseconds."""
    return interleaved_us({"fn": fn}, rounds=1, per_round=repeats, warmup=warmup)["fn"]


def interleaved_us(fns: dict, rounds: int = 20, per_round: int = 200, warmup: int = 20, finish: dict | None = None) -> dict[str, float]:
    """Median wall time of each ``fn()`` in microseconds, measured in interleaved rounds.

    Each round times ``per_round`` calls of every function in turn; the result is the median
    over rounds of each round's median. On a machine whose speed drifts (other processes,
    other virtual machines), interleaving keeps the functions' ratios honest where timing one
    after the other would not. A function named in ``finish`` returns before its work is done
    (JAX's asynchronous dispatch): its round is timed as a whole, up to the end of
    ``finish[name]()`` (which waits for the work), and counts as its mean per call.
    """
    finish = finish or {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        if name in finish:
            finish[name]()
    medians = {name: np.empty(rounds) for name in fns}
    times = np.empty(per_round)
    for r in range(rounds):
        for name, fn in fns.items():
            if name in finish:
                start = time.perf_counter()
                for _ in range(per_round):
                    fn()
                finish[name]()
                medians[name][r] = (time.perf_counter() - start) / per_round
                continue
            for k in range(per_round):
                start = time.perf_counter()
                fn()
                times[k] = time.perf_counter() - start
            medians[name][r] = np.median(times)
    return {name: float(np.median(m) * 1e6) for name, m in medians.items()}


def table(header: list[str], rows: list[list]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def write_section(heading: str, body: str, command: str) -> None:
    """Replace (or append) the ``## heading`` section of docs/benchmarks.md."""
    import jax

    stamp = (
        f"Command: `{command}` — {datetime.date.today().isoformat()}, {platform.processor() or platform.machine()}, "
        f"jax {jax.__version__}, {__import__('os').cpu_count()} cores."
    )
    section = f"## {heading}\n\n{stamp}\n\n{body.strip()}\n"
    text = DOCS.read_text(encoding="utf-8") if DOCS.exists() else "# Benchmarks\n\nLatest measurements; each section says the command that made it.\n"
    pattern = re.compile(rf"^## {re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section + "\n", text) if pattern.search(text) else text.rstrip() + "\n\n" + section
    DOCS.write_text(text, encoding="utf-8")


def pinocchio_model(xml: str):
    """A Pinocchio model of a URDF text (urdfdom requires an ``effort`` on every ``<limit>``)."""
    import pinocchio as pin

    root = ET.fromstring(xml)
    for limit in root.iter("limit"):
        limit.set("effort", limit.get("effort", "1000"))
    return pin.buildModelFromXML(ET.tostring(root, encoding="unicode"))


def in_child(script: str, *args: str, env: dict | None = None, timeout: float | None = None) -> dict | None:
    """Run ``python script --child *args`` in a fresh process and return the JSON it prints last
    (``None`` if it did not finish within ``timeout`` seconds).

    Single-call timings are taken in child processes, one per setting of JAX's asynchronous
    CPU dispatch: the setting is read when the CPU client starts, and changing it in a running
    process left later calls several-fold slower here. ``env`` adds to the environment (XLA
    flags are read when the CPU client starts, too).
    """
    command = [sys.executable, script, "--child", *args]
    try:
        out = subprocess.run(command, check=True, capture_output=True, text=True, env={**os.environ, **(env or {})},
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def imported(env: dict) -> Path:
    """Where a child process with ``env`` added to its environment imports ``dense_armor`` from."""
    out = subprocess.run([sys.executable, "-c", "import dense_armor; print(dense_armor.__file__)"], check=True,
                         capture_output=True, text=True, env={**os.environ, **env})
    return Path(out.stdout.strip()).resolve()


def source_env(source: Path = SOURCE) -> dict:
    """The environment under which a child process imports ``dense_armor`` from ``source`` (a
    ``src`` folder), checked."""
    env = {"PYTHONPATH": str(source)}
    if not imported(env).is_relative_to(source.resolve()):
        raise RuntimeError(f"dense_armor imported from {imported(env)}, not from {source}")
    return env


def alternated(measure, revision: str, rounds: int = 2) -> dict[str, list]:
    """``measure(env)`` for this checkout (``"head"``) and for a git revision of it (``"base"``,
    its ``src`` exported to a temporary folder), in turn over ``rounds`` rounds; ``env`` makes a
    child process import that tree (:func:`source_env`)."""
    runs = {"head": [], "base": []}
    with tempfile.TemporaryDirectory() as folder:
        archive = subprocess.run(["git", "-C", str(SOURCE.parent), "archive", revision, "src"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", folder], input=archive, check=True)
        sources = {"head": SOURCE, "base": Path(folder) / "src"}
        for _ in range(rounds):
            for label, source in sources.items():
                runs[label].append(measure(source_env(source)))
    return runs


def best(runs: list[dict]) -> dict:
    """Each figure's best (lowest) over runs of the same measurement (nested dicts of numbers)."""
    first = runs[0]
    if isinstance(first, dict):
        return {key: best([run[key] for run in runs]) for key in first}
    return min(runs)
