"""The ``dense-armor`` command line (also ``python -m dense_armor``).

Commands:

* ``demo``: the main job on the embedded two-link arm: a payload is picked up, later the
  joints gain friction; the URDF model and the learners predict every torque (prequential)
  and a table compares them.
* ``control``: closed loop: a computed-torque controller that knows only the URDF tracks
  point-to-point moves with an unmodelled payload, with and without the learned residual.
* ``replay ROBOT.urdf LOG``: a logged trajectory (CSV, NPZ or ROS bag) through a chosen learner.
* ``identify ROBOT.urdf LOG -o IDENTIFIED.urdf``: the whole robot learned from a log, written out.
* ``info ROBOT.urdf``: what the parser made of a URDF.

Everything runs in float64 inside ``jax.enable_x64(True)`` (thread-local; :func:`main` leaves
the global JAX configuration untouched). The installed command (:func:`console`) also keeps
JAX's compiled programs in the user's cache folder, ``$XDG_CACHE_HOME/dense_armor/jax``
(``~/.cache/...``), every program however quickly it compiled, so that a second run does not
compile again; ``JAX_COMPILATION_CACHE_DIR`` chooses another folder, and set empty switches the
cache off. A user error prints one line
``dense-armor: error: ...`` on stderr and exits with status 2.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import warnings
from pathlib import Path

import jax

import dense_armor
from dense_armor.cli.common import MIMIC_HELP, PROG, Parser, UserError, count, positive
from dense_armor.cli.demo import cmd_control, cmd_demo
from dense_armor.cli.info import cmd_info
from dense_armor.cli.learners import LEARNER_CLASSES, add_change_options, add_learner_options, add_run_options
from dense_armor.cli.replay import add_log_options, cmd_identify, cmd_replay
from dense_armor.logs import LogError
from dense_armor.robot_learner import MEMORY
from dense_armor.urdf import URDFError

__all__ = ["build_parser", "console", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog=PROG,
        description="Robot dynamics from a URDF in pure JAX, and online learning of what the URDF gets wrong.",
        epilog="Run 'dense-armor COMMAND --help' for a command's options. Docs: docs/cli.md.",
    )
    parser.add_argument("--version", action="version", version=f"{PROG} {dense_armor.__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True, parser_class=Parser)

    demo = sub.add_parser(
        "demo", help="the main job on the embedded two-link arm (payload, then friction)",
        description="The embedded two-link arm follows a smooth trajectory; a third of the way in it picks up a "
        "payload, two thirds in its joints gain friction. The URDF model and the learners predict every torque "
        "before learning it (prequential); the table gives the RMSE per phase, the drift alarms and the learned "
        "payload mass.",
    )
    demo.add_argument("--duration", type=positive, default=30.0, help="seconds (default 30)")
    demo.add_argument("--rate", type=positive, default=100.0, help="samples per second (default 100)")
    add_change_options(demo, 0.5, 0.2, 0.1, gained=True)
    add_run_options(demo, 0.01, "trajectory and noise seed", "horizontal",
                     "arm in a horizontal plane (the design document's) or on a wall", "draw the prequential error over time")
    add_learner_options(demo, "default 0.99 for the five-feature learner, the documented classes' for the others")
    demo.add_argument("--write-urdf", metavar="FILE.urdf", help="write the arm's nominal URDF (for the wall, with its "
                      "mount, so that replay sees the same gravity)")
    demo.add_argument("--write-log", metavar="LOG", help="write the run as a robot logs it (t, q, qd, measured tau; no "
                      "accelerations): .csv, .npz, or a ROS 2 bag .mcap / .db3 (a new folder)")
    demo.set_defaults(func=cmd_demo, default_lam={"five-feature": 0.99})

    control = sub.add_parser(
        "control", help="closed loop: computed-torque control with an unmodelled payload, with and without the learner",
        description="A computed-torque controller that knows only the URDF moves the two-link arm (on a wall, so "
        "gravity acts) through point-to-point moves while it carries a payload it does not know about. Forward "
        "dynamics by aba, semi-implicit Euler, the whole run in one lax.scan. The same run is made with the nominal "
        "command only and with the learned residual added; the learner learns online from the applied torques.",
    )
    control.add_argument("--learner", choices=tuple(LEARNER_CLASSES), default="payload",
                         help="the learner in the loop (default payload)")
    add_change_options(control, 0.5, 0.0, 0.0, gained=False)
    control.add_argument("--kp", type=positive, default=400.0, help="position gain, 1/s^2 (default 400)")
    control.add_argument("--kd", type=positive, default=40.0, help="velocity gain, 1/s (default 40)")
    control.add_argument("--rate", type=positive, default=1000.0, help="control rate, Hz (default 1000)")
    control.add_argument("--laps", type=count, default=2, help="laps of the four targets (default 2)")
    add_run_options(control, 0.0, "noise seed", "vertical",
                     "arm on a wall (gravity acts) or in a horizontal plane", "draw the tracking error and the tip path")
    add_learner_options(control, "default: the documented classes', 1 but 0.99 for drift-aware")
    control.set_defaults(func=cmd_control)

    replay = sub.add_parser(
        "replay", help="replay a log (CSV, NPZ or ROS bag) through a learner",
        description="Replay a log through a learner, prequentially (each sample predicted, then learned). CSV/NPZ "
        "columns: t (s), q_<joint>, qd_<joint>, qdd_<joint>, tau_<joint> (joint names from the URDF) or q0..q{n-1}, "
        "qd0.., qdd0.., tau0..; ROS bags: sensor_msgs/msg/JointState on --topic. q and tau are required; missing qd "
        "and qdd are estimated on the log's own time stamps (zero-phase, or --causal). See docs/cli.md.",
    )
    replay.add_argument("urdf", metavar="ROBOT.urdf", help="the robot's URDF")
    replay.add_argument("log", metavar="LOG", help="the log: .csv (with a header line), .npz, or a ROS bag (.mcap, .db3, "
                        "a bag folder, .bag)")
    replay.add_argument("--learner", choices=tuple(LEARNER_CLASSES), default="five-feature",
                        help="which learner (default five-feature; for a real robot: robot): " + "; ".join(f"{k}: as {v}" for k, v in LEARNER_CLASSES.items()))
    replay.add_argument("--link", help="payload and robot learners: the link carrying the payload (default: the last body)")
    replay.add_argument("--no-friction", action="store_true", help="payload learner: no friction columns")
    replay.add_argument("--out", metavar="FILE", help="write per-sample predictions and errors (.csv or .npz)")
    replay.add_argument("--report", metavar="FILE.json", help="write the summary, alarms, payload changes and the "
                        "physical estimate as JSON")
    replay.add_argument("--plot", metavar="FILE.png", help="draw the prediction error over the log")
    replay.add_argument("--state-in", metavar="FILE", help="start from a learner state saved by --state-out (it keeps its rate when the log's is within 2 %%)")
    replay.add_argument("--state-out", metavar="FILE", help="save the learner's final state (to continue with --state-in)")
    add_log_options(replay)
    add_learner_options(replay, f"default: the documented classes', 1 but 0.99 for drift-aware and a memory of {MEMORY:g} s for robot")
    replay.set_defaults(func=cmd_replay)

    identify = sub.add_parser(
        "identify", help="learn the whole robot from a log; write its identified URDF",
        description="Replay a log through the whole-robot learner and write the robot's URDF with the learned, "
        "physically consistent inertial parameters, and a JSON sidecar with each joint's armature, viscous and "
        "Coulomb friction and offset. Pinocchio's RNEA on the written URDF plus the sidecar's terms is the learner's "
        "model. Joints locked with --lock stay in the URDF as written, with their links' inertials.",
    )
    identify.add_argument("urdf", metavar="ROBOT.urdf", help="the robot's URDF")
    identify.add_argument("log", metavar="LOG", help="the log (as for replay)")
    identify.add_argument("-o", "--output", required=True, metavar="IDENTIFIED.urdf", help="the URDF to write")
    identify.add_argument("--sidecar", metavar="FILE.json", help="the joint terms (default: the URDF's name with .json)")
    identify.add_argument("--link", help="the link carrying payloads (default: the last body)")
    add_log_options(identify)
    add_learner_options(identify, f"default: a memory of {MEMORY:g} s")
    identify.set_defaults(func=cmd_identify, learner="robot")

    info = sub.add_parser(
        "info", help="what the parser made of a URDF",
        description="Joints (in the order of q), types, axes, limits; bodies after merging fixed joints, with "
        "masses, centres of mass and inertias; every frame and where it is at q = 0.",
    )
    info.add_argument("urdf", metavar="ROBOT.urdf", help="the robot's URDF")
    info.add_argument("--mimic", action="store_true", help=MIMIC_HELP)
    info.set_defaults(func=cmd_info)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # --help, --version, usage errors
        return exit_.code if isinstance(exit_.code, int) else 0
    stdout, sys.stdout = sys.stdout, _Stdout(sys.stdout)
    terminate = _on_sigterm()
    try:
        with jax.enable_x64(True), warnings.catch_warnings():
            warnings.showwarning = _warning
            return int(args.func(args) or 0)
    except (UserError, URDFError, LogError, ValueError, OSError) as err:
        message = " ".join(str(err).split()) or type(err).__name__
        print(f"{PROG}: error: {message}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"{PROG}: error: out of memory", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except _Terminated:
        print(f"{PROG}: terminated", file=sys.stderr)
        return 143
    finally:
        sys.stdout = stdout
        terminate()


class _Stdout:
    """The command's ``sys.stdout``: once its reader has gone (``| head``), what is printed
    goes nowhere and the command goes on, so that its files are still written."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._gone()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._gone()

    def _gone(self) -> None:
        try:  # the interpreter flushes the real stdout at exit: into /dev/null, not the closed pipe
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # a stream with no file (a test's capture)
            fd = None
        if fd is not None:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, fd)
            os.close(null)
        self.stream = open(os.devnull, "w")

    def __getattr__(self, name):
        return getattr(self.stream, name)


class _Terminated(Exception):
    """SIGTERM (a timeout, a cancelled job): raised in the command, so that it cleans up as
    for Ctrl-C (its partial files removed, the outputs left as they were)."""


def _on_sigterm():
    """Raise :class:`_Terminated` on SIGTERM while the command runs; returns the undoing (a
    no-op outside the main thread, where Python takes no signal handler)."""

    def raise_(signum, frame):
        raise _Terminated

    try:
        previous = signal.signal(signal.SIGTERM, raise_)
    except ValueError:
        return lambda: None
    return lambda: signal.signal(signal.SIGTERM, previous)


def console() -> int:
    """The installed ``dense-armor`` command: :func:`main`, with JAX's persistent compilation
    cache in the user's cache folder unless ``JAX_COMPILATION_CACHE_DIR`` is set (every program
    kept, however quickly it compiled)."""
    if "JAX_COMPILATION_CACHE_DIR" not in os.environ:
        home = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
        jax.config.update("jax_compilation_cache_dir", str(Path(home) / "dense_armor" / "jax"))
    if os.environ.get("JAX_COMPILATION_CACHE_DIR", "-") and "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS" not in os.environ:
        # JAX keeps only programs that took a second to compile; a replay's fifty smaller ones
        # would be compiled on every run
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    return main()


def _warning(message, category, filename, lineno, file=None, line=None):
    """A warning as one line: ``dense-armor: warning: ...``."""
    print(f"{PROG}: warning: {' '.join(str(message).split())}", file=sys.stderr)
