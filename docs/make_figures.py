"""Make the figures that the docs show (docs/figures/*.png), with the command line's --plot.

Run from the repository root:  python docs/make_figures.py
It prints the commands' tables, which docs/cli.md quotes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import jax
import numpy as np

from dense_armor.cli import main
from dense_armor.demo import drift_scenario
from dense_armor.robots import write_minimal_urdf

FIGURES = Path(__file__).resolve().parent / "figures"


def run(*argv: str) -> None:
    print("$ dense-armor", " ".join(argv), flush=True)
    status = main(list(argv))
    if status != 0:
        raise SystemExit(f"dense-armor {' '.join(argv)} failed with status {status}")


def write_log(folder: Path) -> tuple[str, str]:
    """The demo's run as a robot would log it: t, q, qd and measured tau per joint, no qdd."""
    with jax.enable_x64(True):
        sc = drift_scenario()
    columns = {"t": sc.t}
    for j, name in enumerate(sc.model.joint_names):
        columns[f"q_{name}"] = sc.measured.q[:, j]
        columns[f"qd_{name}"] = sc.measured.qd[:, j]
        columns[f"tau_{name}"] = sc.measured.tau[:, j]
    log = folder / "arm_log.csv"
    np.savetxt(log, np.column_stack(list(columns.values())), delimiter=",", header=",".join(columns), comments="")
    return write_minimal_urdf(folder / "arm.urdf"), str(log)


if __name__ == "__main__":
    FIGURES.mkdir(exist_ok=True)
    run("demo", "--plot", str(FIGURES / "demo.png"))
    run("control", "--plot", str(FIGURES / "control.png"))
    with tempfile.TemporaryDirectory() as tmp:
        urdf, log = write_log(Path(tmp))
        run("replay", urdf, log, "--learner", "drift-aware-payload", "--plot", str(FIGURES / "replay.png"))
