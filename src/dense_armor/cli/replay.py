"""``dense-armor replay`` and ``dense-armor identify``: a real log through a learner."""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import derivatives, learners, robot_learner
from dense_armor.cli.common import MIMIC_HELP, PROG, Output, UserError, alarm_text, distinct, fmt, require_matplotlib, table
from dense_armor.cli.learners import build_learner, forgetting_text, payload_report, refuse_others, setting
from dense_armor.dynamics import rnea
from dense_armor.logs import TIME_UNITS, LogError, open_log
from dense_armor.model import lock_joints, locked_positions
from dense_armor.replay import blocks, replay_log
from dense_armor.urdf import URDFWarning, parse_urdf, with_inertials

HARM = 0.1  # a second in which the learner is over 10 % worse than the URDF is harmful
# a log's rate within 2 % of a saved state's is the same robot's: a clock's estimate moves with
# its jitter and dropped packets, and 3 digits of it jump at 1000 Hz (999 below, 1e3 above)
RATE_TOLERANCE = 0.02
LOCK_TOLERANCE = 0.01  # rad or m: a locked joint logged farther from its position moves


# ----------------------------------------------------------------------------- options


def _lock(text: str) -> tuple[str, float]:
    name, sep, value = text.partition("=")
    try:
        position = float(value)
    except ValueError:
        position = float("nan")
    if not sep or not name or not np.isfinite(position):
        raise argparse.ArgumentTypeError(f"{text!r} is not JOINT=POSITION (e.g. panda_finger_joint1=0.02)")
    return name.strip(), position


def add_log_options(p) -> None:
    """The options that read a log: robot, clock, derivatives, torque."""
    from dense_armor.cli.common import block_size, positive

    g = p.add_argument_group("log options")
    g.add_argument("--lock", type=_lock, action="append", default=[], metavar="JOINT=POSITION",
                   help="lock a joint the log does not cover at a position (rad or m), e.g. a gripper; repeatable")
    g.add_argument("--topic", help="ROS bag: the sensor_msgs/msg/JointState topic (default /joint_states)")
    g.add_argument("--dt", type=positive, help="sampling period, s, for a log without a t column")
    g.add_argument("--time-unit", choices=tuple(TIME_UNITS), default="s",
                   help="unit of a CSV or NPZ log's t column (default s; ROS tools often write ns)")
    g.add_argument("--causal", action="store_true",
                   help="estimate derivatives causally, as a controller could live (default: zero-phase, offline)")
    g.add_argument("--cutoff", type=positive, help="differentiator low-pass cut-off, Hz (default min(20, rate / 5))")
    g.add_argument("--resample", type=positive, metavar="HZ", help="resample the log on a uniform grid at HZ")
    g.add_argument("--max-gap", type=positive, metavar="S",
                   help="longest clock gap bridged, s (default 10 median periods, or half the cut-off's period if "
                        "longer); longer gaps split the log")
    g.add_argument("--drop-repeated", action="store_true",
                   help="drop a sample whose stamp repeats the one before (a message published twice); default: an error")
    g.add_argument("--drop-unordered", action="store_true",
                   help="drop a sample whose stamp is not after every one before it (a repeat, swapped messages, a clock "
                        "stepped back: dropped until it passes its last stamp); default: an error")
    g.add_argument("--torque-scale", metavar="GAINS",
                   help="gain per joint turning the logged effort into torque (motor currents: the torque constants, "
                   "sign included): one number, a comma-separated list in joint order, or a file (JSON list or "
                   "{joint: gain}, or numbers)")
    g.add_argument("--strict", action="store_true", help="refuse a URDF whose link inertias are not physical")
    g.add_argument("--mimic", action="store_true", help=MIMIC_HELP)
    g.add_argument("--chunk", type=block_size, default=2000, help="samples per lax.scan block (default 2000)")
    g.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")


def _torque_scale(text: str | None, model, ignored=()):
    """Gains per joint from the option's text or file (whose gains of ``ignored`` joints, the
    locked ones, go unused)."""
    if text is None:
        return None
    path = Path(text)
    if path.is_file():
        raw = path.read_text(encoding="utf-8-sig").strip()
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw.replace(",", " ").split()
        if isinstance(value, dict):
            missing = [j for j in model.joint_names if j not in value]
            unknown = [k for k in value if k not in model.joint_names and k not in ignored]
            if missing or unknown:
                raise UserError(f"--torque-scale {text}: " + "; ".join(
                    ([f"no gain for {', '.join(missing)}"] if missing else []) +
                    ([f"{', '.join(unknown)} is not a joint"] if unknown else [])))
            value = [value[j] for j in model.joint_names]
    else:
        value = text.split(",")
    try:
        gains = np.array([float(v) for v in np.ravel(value)], np.float64)
    except (TypeError, ValueError):
        raise UserError(f"--torque-scale {text}: not numbers") from None
    return gains


def load_robot(args):
    """The model the log is replayed on (the URDF with the locked joints fixed), the locks
    given, every joint they fix (coupled mimic joints too) with its position, and the URDF's
    model itself."""
    model = parse_urdf(args.urdf, strict=args.strict, mimic=args.mimic)
    locks = dict(args.lock)
    if len(locks) != len(args.lock):
        raise UserError("--lock: a joint is locked twice")
    try:
        locked = lock_joints(model, locks) if locks else model
    except ValueError as err:
        raise UserError(f"--lock: {str(err).removeprefix('lock: ')}") from None
    for name, value in locks.items():
        lower, upper = (float(np.asarray(limit)[model.joint_names.index(name)]) for limit in (model.lower, model.upper))
        if not lower <= value <= upper:  # a position in mm, or in degrees
            print(f"{PROG}: warning: --lock {name}={value:g} is outside the joint's limits [{lower:g}, {upper:g}]", file=sys.stderr)
    return locked, locks, locked_positions(model, locks), model


def open_stream(args, model, fixed):
    """The log as a stream, and its first chunk read (so that its rate is known)."""
    ignored = set(fixed) | {joint for joint, _, _ in model.mimics}  # logged, but not coordinates
    angles = [name for name, body in zip(model.joint_names, model.coordinate_bodies) if model.joint_kinds[body] != "prismatic"]
    stream = open_log(args.log, model.joint_names, locked=ignored, topic=args.topic, dt=args.dt, causal=args.causal,
                      cutoff=args.cutoff, resample=args.resample, torque_scale=_torque_scale(args.torque_scale, model, ignored),
                      max_gap=args.max_gap, drop_repeated=args.drop_repeated, drop_unordered=args.drop_unordered, time_unit=args.time_unit,
                      chunk=max(args.chunk, 1000), angles=angles)
    chunks = iter(stream)
    first = next(chunks, None)
    if first is None:
        raise LogError(f"{args.log}: no sample with finite values")
    return stream, itertools.chain([first], chunks)


def _progress(args, total):
    show = args.progress if args.progress is not None else sys.stderr.isatty()
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, unit=" samples", desc="replay", file=sys.stderr, dynamic_ncols=True, mininterval=0.5)


# ----------------------------------------------------------------------------- per-sample output


class _Rows:
    """--out: one row per sample, streamed to a CSV, gathered for an NPZ."""

    def __init__(self, output: Output, names):
        self.output, self.names, self.blocks, self.header = output, names, [], False
        self.npz = output.path.suffix.lower() == ".npz"

    def __call__(self, t, tau, out):
        columns = {"t": t}
        for j, name in enumerate(self.names):
            columns[f"tau_{name}"] = tau[:, j]
            columns[f"nominal_{name}"] = out.nominal[:, j]
            columns[f"pred_{name}"] = out.prediction[:, j]
            columns[f"err_{name}"] = tau[:, j] - out.prediction[:, j]
        columns["alarm"] = out.alarm.astype(np.int8)
        columns["accepted"] = out.accepted.astype(np.int8)
        if self.npz:
            self.blocks.append(columns)
            return
        data = np.column_stack([np.asarray(v, np.float64) for v in columns.values()])
        np.savetxt(self.output.handle, data, delimiter=",", fmt=["%.17g" if k == "t" else "%.9g" for k in columns],
                   header="" if self.header else ",".join(columns), comments="")
        self.header = True

    def finish(self):
        if self.npz and self.blocks:
            np.savez(self.output.handle, **{k: np.concatenate([b[k] for b in self.blocks]) for k in self.blocks[0]})
        self.output.commit()


# ----------------------------------------------------------------------------- replay


#: JAX's events for tracing, lowering and compiling a program (``jax.monitoring``).
COMPILE_EVENTS = ("/jax/core/compile/jaxpr_trace_duration", "/jax/core/compile/jaxpr_to_mlir_module_duration",
                  "/jax/core/compile/backend_compile_duration")


class _Aside(threading.Thread):
    """``fn(*args)``, float64, on a thread of its own, started by the first :meth:`start` (the
    later ones do nothing): a jitted function compiled, by calling it once, while the main
    thread waits on other work. An error is left to the main thread's own call, which raises it
    again in its context."""

    def __init__(self, fn, *args):
        super().__init__(daemon=True)
        self._fn, self._args = fn, args

    def start(self):
        if self.ident is None:
            super().start()

    def wait(self):
        """Until the call is done, if it was started."""
        if self.ident is not None:
            self.join()

    def run(self):
        try:
            with jax.enable_x64(True):
                jax.block_until_ready(self._fn(*self._args))
        except Exception:  # noqa: BLE001 (see the class docstring)
            pass


class Timing(NamedTuple):
    """A replay's wall time and, of it, the time JAX spent compiling, s."""

    total: float
    compiling: float


def _continued_rate(path, rate: float | None) -> float | None:
    """The rate a saved state goes on at: its own when this log's is within :data:`RATE_TOLERANCE`
    of it (one robot's rate, estimated from two logs' jittered clocks that drop packets)."""
    try:
        saved = learners.saved_options(path).get(".rate")
    except (OSError, ValueError):
        return rate  # loading the state says what is wrong with the file
    if rate is not None and isinstance(saved, float) and abs(rate - saved) <= RATE_TOLERANCE * saved:
        return saved
    return rate


def _run(args, kind: str, make_sink=None):
    """Replay the log through the learner ``kind`` (``make_sink(model)``: the per-sample
    output, or ``None``): ``(model, locks, stream, learner, result, timing)`` (a :class:`Timing`)."""
    refuse_others(kind, args)
    if getattr(args, "state_in", None) and not Path(args.state_in).is_file():
        raise UserError(f"--state-in {args.state_in}: no such file")
    model, locks, fixed, parsed = load_robot(args)
    stream, chunks = open_stream(args, model, fixed)
    info = stream.info
    if info.period is None and kind == "robot":
        raise UserError(f"{args.log}: the robot learner needs the sampling rate: the log has no 't' column; give --dt")
    # the nominal rate, to 3 digits: the learner's time constants need no more, and a state saved
    # from one log of a robot continues on the next (the rate is one of its options)
    args.rate = args.resample or (float(f"{1.0 / info.period:.3g}") if info.period else None)
    if args.state_in:
        args.rate = _continued_rate(args.state_in, args.rate)
    learner = build_learner(kind, model, args)
    if args.state_in:
        with jax.enable_x64(True):
            try:
                state = learners.load_state(args.state_in, learners.init(learner, jnp.float64), learner)
            except FileNotFoundError:
                raise UserError(f"--state-in {args.state_in}: no such file") from None
            except ValueError as err:
                raise UserError(f"--state-in {err}") from None
    else:
        state = learners.init(learner, jnp.float64)
    bar = _progress(args, info.expected)
    sink = None if make_sink is None else make_sink(model)
    # the robot learner's estimate, read after the replay, compiles (about 2 s) on a second
    # thread once the replay's first block is done, while the replay runs (docs/design.md, "Threads")
    aside = _Aside(robot_learner.estimate, learner, state) if isinstance(learner, robot_learner.RobotLearner) else None
    compiling, main = [], threading.get_ident()

    def progress(count):
        if aside is not None:
            aside.start()
        if bar is not None:
            bar.update(count)

    def listen(event, seconds, **_):
        if event.startswith(COMPILE_EVENTS) and threading.get_ident() == main:  # the replay's own
            compiling.append(seconds)

    jax.monitoring.register_event_duration_secs_listener(listen)
    started = time.perf_counter()
    try:
        result = replay_log(learner, state, chunks, block=args.chunk, progress=progress, sink=sink,
                            window=1.0 if info.period else 1000.0)
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
        if bar is not None:
            bar.close()
    timing = Timing(time.perf_counter() - started, sum(compiling))
    if aside is not None:
        aside.wait()
    args.fixed, args.parsed = fixed, parsed  # for identify's URDF
    for name, (low, high) in info.locked_range.items():
        if name in fixed and max(abs(low - fixed[name]), abs(high - fixed[name])) > LOCK_TOLERANCE:
            logged = f"at {low:.4g}" if high - low <= LOCK_TOLERANCE else f"moving over [{low:.4g}, {high:.4g}]"
            print(f"{PROG}: warning: --lock holds {name} at {fixed[name]:g}, but the log has it {logged}",
                  file=sys.stderr)
    return model, locks, stream, learner, result, timing


def _changes(result) -> list[dict]:
    """Each payload alarm with the change it measured by the end of its segment."""
    changes = []
    for k, t in enumerate(result.alarms):
        value = result.at_alarms[k + 1] if k + 1 < len(result.alarms) else result.last
        if value is None:
            continue
        changes.append({"t_s": t, "mass_kg": float(value.mass), "mass_std_kg": float(value.mass_std),
                        "com_m": [float(c) for c in value.com]})
    return changes


def _summary(args, model, locks, stream, learner, result, elapsed) -> dict:
    """Print what the replay found; return it as the report's data."""
    info, scores = stream.info, result.scores
    names = model.joint_names
    D = result.duration
    rate = 1.0 / info.period if info.period else float("nan")
    how = []
    if info.estimated:
        filtered = not info.period or info.cutoff < 0.5 / info.period
        low = f"{info.cutoff:g} Hz low-pass" if filtered else f"no low-pass: {info.cutoff:g} Hz is above Nyquist"
        how.append(f"{'/'.join(info.estimated)} estimated ({info.derivative}, {low})")
    if info.unestimated:
        how.append(f"the logged {'/'.join(info.unestimated)} not numbers for some joints (not logged)")
    if info.resample:
        how.append(f"resampled at {info.resample:g} Hz")
    timing = f"{D:.4g} s at {rate:.4g} Hz" if info.period else "no time stamps"
    print(f"{PROG} replay: {info.source}: {result.samples} samples, {timing}" + (", " + ", ".join(how) if how else ""))
    at = lambda t: f"{t - result.start:.6g} s"  # noqa: E731  (from the first stamp: a bag's are epoch seconds)
    bridged = [g for g in info.gaps if g.bridged]
    split = [g for g in info.gaps if not g.bridged]
    clock = f"  clock: {len(bridged)} gaps bridged"
    if bridged:
        g = max(bridged, key=lambda g: g.step)
        clock += f" (longest {1e3 * g.step:.3g} ms at sample {g.index}, {at(g.t)})"
    if split:
        clock += f"; {len(split)} too long to bridge, log split into {info.segments} segments (at " + \
            ", ".join(f"sample {g.index}, {at(g.t)}" for g in split[:3]) + ("..." if len(split) > 3 else "") + ")"
    if info.fragments:
        clock += (f"; {info.fragments} rows of segments under {derivatives.SHORTEST / info.cutoff:.3g} s (too short to "
                  "estimate accelerations on) dropped")
    if info.skipped:
        clock += f"; {info.skipped} rows with NaN or inf skipped"
    if info.cut_line:
        clock += f"; the last line (line {info.cut_line}) cut off (the logger stopped while writing), dropped"
    if info.clock == "receive":
        clock += "; stamped by the bag's receive times (the messages' headers are zero)"
    if info.unstamped:
        clock += f"; {info.unstamped} messages with a zero header stamp (before the clock ran) dropped"
    if info.other:
        clock += f"; {info.other} messages without the robot's joints (another publisher's) skipped"
    if info.repeated:
        row, t = info.first_repeated
        what = "not after the stamps before them" if args.drop_unordered else "repeating a stamp"
        clock += f"; {info.repeated} rows {what} dropped (the first at sample {row}, {at(t)})"
    print(clock)
    if info.wrapped:
        print(f"  positions unwrapped (an angle logged in (-pi, pi]): {', '.join(f'{j} {c} times' for j, c in info.wrapped.items())}")
    if info.ignored:
        print(f"  columns naming no joint of the robot, ignored: {', '.join(info.ignored)}")
    locked = f"; locked {', '.join(f'{k}={v:g}' for k, v in locks.items())}" if locks else ""
    print(f"  robot {model.name!r} ({model.n} joints: {', '.join(names)}{locked}); learner {_label(args)}")
    # quarters of the log's score windows (whole ones, so that none counts in two)
    starts = [*scores.windows, scores.windows[-1] + 1] if scores.windows else [0]
    edges = [starts[round(k * (len(starts) - 1) / 4)] for k in range(5)]
    phases = [("all", 0.0, np.inf)] + [(f"Q{k + 1}", edges[k], edges[k + 1]) for k in range(4)]
    rows = [["nominal URDF", *(fmt(scores.rmse(a, b)[0]) for _, a, b in phases)],
            ["learner (prequential)", *(fmt(scores.rmse(a, b)[1]) for _, a, b in phases)]]
    for j, name in enumerate(names):
        rows.append([f"  {name}: nominal / learner", *(
            "{} / {}".format(*map(fmt, scores.rmse(a, b, j))) for _, a, b in phases)])
    print(table(["torque RMSE [N m]", *[p[0] for p in phases]], rows))
    harmful = scores.harmful(HARM)
    windows = len(scores.windows)
    unit = "s" if info.period else "x 1000 samples"
    print(f"{'one-second' if info.period else '1000-sample'} windows with the learner over {100 * HARM:g} % worse than "
          f"the URDF: {len(harmful)} of {windows}"
          + (f" (at {', '.join(f'{k} {unit}' for k in harmful[:5])}{'...' if len(harmful) > 5 else ''})" if harmful else ""))
    if result.rejected:
        print(f"skipped {result.rejected} samples with NaN or inf")
    if result.nonfinite:
        print(f"{PROG}: warning: {result.nonfinite} predictions were not finite (the learner diverged); they are scored as the "
              f"URDF's torque", file=sys.stderr)
        print(f"{result.nonfinite} non-finite predictions, scored as the URDF's")
    data = {
        "source": info.source, "samples": result.samples, "duration_s": D, "start_s": result.start, "rate_hz": rate,
        "joints": list(names), "locked": locks, "learner": _label(args),
        "derivative": {"estimated": list(info.estimated), "method": info.derivative, "cutoff_hz": info.cutoff,
                       "resample_hz": info.resample},
        "gaps": [{"sample": g.index, "t_s": g.t, "step_s": g.step, "bridged": g.bridged} for g in info.gaps],
        "segments": info.segments, "clock": info.clock, "unstamped_messages": info.unstamped, "skipped_rows": info.skipped, "other_messages": info.other, "repeated_rows": info.repeated, "rejected": result.rejected,
        "fragment_rows": info.fragments, "cut_line": info.cut_line, "unwrapped": info.wrapped,
        "nonfinite_predictions": result.nonfinite,
        "rmse_nominal": scores.rmse()[0], "rmse_learner": scores.rmse()[1],
        "rmse_after_5s": dict(zip(("nominal", "learner"), scores.rmse(5.0) if info.period else (None, None))),
        "rmse_per_joint": {name: dict(zip(("nominal", "learner"), scores.rmse(joint=j))) for j, name in enumerate(names)},
        "harmful_windows_s": harmful, "windows": windows, "alarms_s": result.alarms,
        "replay_s": elapsed.total, "compile_s": elapsed.compiling,
    }
    detector = getattr(learner, "detector", None) is not None
    if detector:
        print(f"{'payload' if isinstance(learner, robot_learner.RobotLearner) else 'drift'} alarms [s from the start]: "
              f"{alarm_text([t - result.start for t in result.alarms], limit=8)}")
    if isinstance(learner, robot_learner.RobotLearner):
        changes = _changes(result)
        data["payload_changes"] = changes
        for c in changes:
            print(f"  payload change at {at(c['t_s'])}: {c['mass_kg']:+.4g} +- {c['mass_std_kg']:.2g} kg, centre of "
                  f"mass ({', '.join(f'{x:.3g}' for x in c['com_m'])}) m in {learner.link}")
        with jax.enable_x64(True):
            est = jax.tree.map(np.asarray, robot_learner.estimate(learner, result.state))
        print(robot_learner.summary(learner, est))
        data["physical"] = robot_learner.report(learner, est)
    else:
        report = payload_report(learner, result.state)
        if report is not None:
            mass, mass_std, est = report
            note = "" if mass >= 0 else (" (not a payload: no body has a negative mass; this learner lumps every "
                                            "link's URDF error onto one link: use --learner robot on a real robot)")
            print(f"learned payload on {learner.link}: {mass:.4f} +- {mass_std:.4f} kg{note}")
            print(est.summary(learner.link))
            data["payload"] = {"link": learner.link, "mass_kg": mass, "mass_std_kg": mass_std}
        elif hasattr(result.state, "rls"):
            w = np.asarray(result.state.rls.w)
            print(table(["weights", *learners.FEATURE_NAMES], [[name, *(f"{v:.4g}" for v in w[j])] for j, name in enumerate(names)]))
            data["weights"] = {name: dict(zip(learners.FEATURE_NAMES, map(float, w[j]))) for j, name in enumerate(names)}
    # the rate after compiling: what a longer log of the same robot replays at
    running = max(elapsed.total - elapsed.compiling, 1e-9)
    print(f"({elapsed.total:.1f} s, compiling {elapsed.compiling:.1f} s of it; {result.samples / running:,.0f} samples/s "
          "after it)")
    return data


def _label(args) -> str:
    text = f"{args.learner} ({forgetting_text(args.learner, args)}"
    if args.learner == "robot":
        text += f", rate {args.rate:g} Hz" + (", no payload detection" if args.no_payload else
                                               f", min mass {setting('robot', args, 'min_mass'):g} kg")
    else:
        text += f", delta {setting(args.learner, args, 'delta'):g}"
    if args.learner.startswith("drift-aware"):
        text += f", trigger {args.trigger}"
    return text + ")"


def _outputs(args, *specs) -> dict:
    """The command's outputs, checked before any work (none is left behind on an error)."""
    inputs = [args.urdf, args.log, getattr(args, "state_in", None)]
    made = {}
    try:
        for key, attr, option, suffixes in specs:
            made[key] = Output(getattr(args, attr), option, inputs, suffixes)
        distinct(*made.values())
    except BaseException:
        for output in made.values():
            output.discard()
        raise
    return made


def cmd_replay(args) -> int:
    outputs = _outputs(args, ("out", "out", "--out", (".csv", ".npz")), ("report", "report", "--report", (".json",)),
                       ("plot", "plot", "--plot", (".png",)), ("state", "state_out", "--state-out", None))
    rows = []
    try:
        plt = require_matplotlib() if outputs["plot"] else None

        def make_sink(model):
            rows.append(_Rows(outputs["out"], model.joint_names))
            return rows[0]

        model, locks, stream, learner, replayed, elapsed = _run(args, args.learner, make_sink if outputs["out"] else None)
        data = _summary(args, model, locks, stream, learner, replayed, elapsed)
        if rows:
            rows[0].finish()
            print(f"per-sample predictions and errors written to {args.out}")
        if outputs["report"]:
            outputs["report"].handle.write(_json(data))
            outputs["report"].commit()
            print(f"report written to {args.report}")
        if outputs["state"]:
            learners.save_state(outputs["state"].handle, replayed.state, learner)
            outputs["state"].commit()
            print(f"learner state written to {args.state_out}")
        if plt is not None:
            _plot(plt, outputs["plot"].handle, replayed, model.joint_names)
            outputs["plot"].commit()
            print(f"plot written to {args.plot}")
    finally:
        for output in outputs.values():
            output.discard()
    return 0


def _json(data) -> bytes:
    """The data as JSON text: NumPy values as Python's, and a NaN or inf (a window with no
    sample, a quantity not estimated) as null, which every JSON reader takes."""

    def plain(x):
        if isinstance(x, dict):
            return {k: plain(v) for k, v in x.items()}
        if isinstance(x, (list, tuple, np.ndarray)):
            return [plain(v) for v in x]
        if isinstance(x, np.generic):
            x = x.item()
        return None if isinstance(x, float) and not np.isfinite(x) else x

    return json.dumps(plain(data), indent=2, allow_nan=False).encode()


def _plot(plt, path, result, names):
    scores = result.scores
    seconds = np.array(scores.windows)
    nominal = np.array([np.sqrt(np.sum(x) / c / len(names)) for x, c in zip(scores.nominal, scores.count)])
    learner = np.array([np.sqrt(np.sum(x) / c / len(names)) for x, c in zip(scores.learner, scores.count)])
    fig, ax = plt.subplots(figsize=(9, 4), layout="constrained")
    ax.semilogy(seconds + 0.5, np.maximum(nominal, 1e-9), lw=1, label="nominal URDF")
    ax.semilogy(seconds + 0.5, np.maximum(learner, 1e-9), lw=1, label="learner (prequential)")
    for a in result.alarms:
        ax.axvline(a - result.start, color="r", lw=0.8, alpha=0.7)
    ax.set_xlabel("time from the first sample [s]")
    ax.set_ylabel("torque error [N m] (RMS over each second)")
    ax.set_title("Replay: prediction error" + (" (red: alarms)" if result.alarms else ""))
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=110, format="png")
    plt.close(fig)


# ----------------------------------------------------------------------------- identify


CONSISTENCY_COST = 1.05
"""identify warns when the written (consistent) robot fits the log worse than this times the
learned parameters did."""


def _fits(args, model, written, est, learner, w, block: int = 2000) -> tuple[float, float]:
    """RMSEs, N m over every joint and the log (read again), of what identify writes (the
    written URDF's ``rnea`` plus the sidecar's joint terms) and of the learner's final
    parameters ``w`` as learned, before they were made physically consistent; in float64."""
    _, chunks = open_stream(args, model, args.fixed)
    width = float(learner.coulomb_width)

    @jax.jit
    def squared(q, qd, qdd, tau, terms, w):
        torque = jax.vmap(rnea, in_axes=(None, 0, 0, 0))(written, q, qd, qdd)
        joints = jnp.sum(terms[:, None, :] * robot_learner.joint_columns(qd, qdd, width), axis=0)
        X, nominal = jax.vmap(lambda *s: learner.features(*s, jnp.float64))(q, qd, qdd)
        errors = (tau - (torque + joints), tau - (nominal + X @ w))
        return [(jnp.sum(jnp.where(jnp.isfinite(e), e**2, 0.0)), jnp.sum(jnp.isfinite(e))) for e in errors]

    totals = np.zeros((2, 2))
    with jax.enable_x64(True):
        terms, w = jnp.stack([jnp.asarray(getattr(est, term)) for term in robot_learner.JOINT_TERMS]), jnp.asarray(w)
        for rows in blocks(chunks, block):
            pad = block - len(rows["t"])  # one shape: one compile
            arrays = [np.pad(rows[k], ((0, pad), (0, 0)), constant_values=np.nan) for k in ("q", "qd", "qdd", "tau")]
            totals += np.array(squared(*arrays, terms, w), dtype=float)
    written_rmse, learned_rmse = np.sqrt(totals[:, 0] / np.maximum(totals[:, 1], 1))
    return float(written_rmse), float(learned_rmse)


def cmd_identify(args) -> int:
    """Learn the whole robot from a log; write its URDF and a sidecar with the joint terms."""
    sidecar_path = args.sidecar_resolved = args.sidecar or str(Path(args.output).with_suffix(".json"))
    args.learner, args.state_in = "robot", None
    outputs = _outputs(args, ("urdf", "output", "-o", (".urdf",)), ("sidecar", "sidecar_resolved", "--sidecar", (".json",)))
    sidecar = outputs["sidecar"]
    try:
        model, locks, stream, learner, result, elapsed = _run(args, "robot")
        with jax.enable_x64(True):
            est = jax.tree.map(np.asarray, robot_learner.estimate(learner, result.state))
        if all(np.all(getattr(est, f"{key}_unexcited")) for key in ("mass", "com", "inertia", *robot_learner.JOINT_TERMS)):
            raise UserError(f"{args.log}: the log identifies nothing (every parameter's uncertainty is about its prior's: "
                            f"{result.samples} samples, too few or too little motion); nothing written")
        # a simulator's joint friction: each identified viscous and Coulomb term (dissipative:
        # at least 0); a term the log did not identify keeps the URDF's
        dynamics = {name: {key: max(float(getattr(est, term)[j]), 0.0) for key, term in (("damping", "viscous"), ("friction", "coulomb"))
                           if not getattr(est, f"{term}_unexcited")[j]} for j, name in enumerate(model.joint_names)}
        text = with_inertials(args.urdf, args.parsed, est.parameters, locks, dynamics)
        outputs["urdf"].handle.write(text.encode())
        with warnings.catch_warnings():  # what they say of the URDF was said when it was read
            warnings.simplefilter("ignore", URDFWarning)
            written = parse_urdf(text, mimic=args.mimic)
        written, unconstrained = _fits(args, model, lock_joints(written, locks) if locks else written, est, learner,
                                       result.state.rls.w)
        nominal, learned = result.scores.rmse()
        side = {"urdf": Path(args.output).name, "locked": locks,
                "dynamics": "each joint's <dynamics damping friction> in the URDF is its identified viscous and coulomb term "
                            "(at least 0; a term marked unexcited keeps the URDF's): a simulator's friction; rnea ignores them",
                **robot_learner.report(learner, est),
                "model": f"tau = rnea(URDF) + {robot_learner.JOINT_MODEL}",
                "source": {"log": str(args.log), "samples": result.samples,
                           "rmse_nominal": nominal, "rmse_learner": learned, "rmse_written": written,
                           "rmse_unconstrained": unconstrained}}
        sidecar.handle.write(_json(side))
        print(f"{PROG} identify: {stream.info.source}: {result.samples} samples (replayed in {elapsed.total:.1f} s)")
        print(robot_learner.summary(learner, est))
        print(f"RMSE over the log, N m: the written URDF with its sidecar {written:.4g}, the learned parameters before "
              f"they were made physically consistent {unconstrained:.4g}, the URDF given {nominal:.4g}, the learner "
              f"predicting each sample before learning it {learned:.4g}")
        if result.alarms:
            changes = f"{len(result.alarms)} time{'s' if len(result.alarms) > 1 else ''}"
            print(f"the payload changed {changes} in the log (the last {result.alarms[-1] - result.start:.6g} s from its "
                  f"start): the written URDF "
                  f"is the robot since the last change")
        elif written > CONSISTENCY_COST * unconstrained:
            print(f"{PROG}: warning: making the bodies physically consistent costs fit ({written:.4g} against {unconstrained:.4g} "
                  f"N m over the log): its torques are not a rigid robot's (an effect the model lacks, a joint's axis or "
                  f"origin wrong in the URDF, torques of the wrong sign)", file=sys.stderr)
        outputs["urdf"].commit()
        sidecar.commit()
        kept = f" (the locked {', '.join(args.fixed)} as the URDF has them)" if args.fixed else ""
        print(f"identified URDF written to {args.output}{kept}; armature, friction and offsets to {sidecar_path}")
    finally:
        outputs["urdf"].discard()
        sidecar.discard()
    return 0
