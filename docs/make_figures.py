"""Make the figures that the docs show (docs/figures/*.png), with the command line's --plot.

Run from the repository root:  python docs/make_figures.py
It prints the commands' tables, which docs/cli.md quotes.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from dense_armor.cli import main

FIGURES = Path(__file__).resolve().parent / "figures"


def run(*argv: str) -> None:
    print("$ dense-armor", " ".join(argv), flush=True)
    status = main(list(argv))
    if status != 0:
        raise SystemExit(f"dense-armor {' '.join(argv)} failed with status {status}")


if __name__ == "__main__":
    FIGURES.mkdir(exist_ok=True)
    run("demo", "--plot", str(FIGURES / "demo.png"))
    run("control", "--plot", str(FIGURES / "control.png"))
    with tempfile.TemporaryDirectory() as tmp:
        urdf, log = str(Path(tmp) / "arm.urdf"), str(Path(tmp) / "arm.mcap")
        run("demo", "--plane", "vertical", "--write-urdf", urdf, "--write-log", log)
        run("replay", urdf, log, "--learner", "robot", "--min-mass", "0.3", "--plot", str(FIGURES / "replay.png"))
