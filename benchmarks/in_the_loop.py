"""The whole-robot learner in a controller's loop, on a MuJoCo arm: does its torque track better?

What the learner is for: a controller adds its torque to the command. Here the MuJoCo arm of the
realistic benchmark (`mujoco_robot`: every body off the URDF, armature, damping and dry friction;
a payload of 1-3 kg picked up or dropped 60 % into a 60 s run) tracks its motion under the closed
loop's 1 kHz joint PID (`mujoco_robot.closed_loop`), twice from the same draw:

* **URDF**: the feed-forward is the URDF's inverse dynamics along the reference (`rnea`);
* **learner**: at every tick a `Stepper` of the whole-robot learner (`RobotLearner`, its
  defaults) learns the tick's measured sample and returns its torque at the reference, the
  feed-forward (`Stepper.tick`). Measured as a live controller measures: the encoder quantised to
  2^-19 rad, velocities and accelerations by the library's causal estimator
  (`derivatives.Differentiator(..., causal=True)`, a sample at a time), the torque the last
  command with a gain error of up to 3 % per joint and time-correlated noise of 1-3 % of the
  peak torque.

Reported per robot and change over seeds (even seeds move by sums of sines, odd ones by
point-to-point moves with rests): the tracking error's RMSE (mrad, all joints) and the feedback's
torque (the command less the feed-forward, N m RMS) after the first 5 s, with the URDF and with
the learner; harmful seconds (in which the learner's tracking RMSE exceeds the URDF's by more
than 10 %, from 5 s on); the learner's payload alarms: the change's detection delay, and false
alarms (any but the first within 3 s of the change), as the realistic benchmark counts them
(`realistic.detection`).

    python benchmarks/in_the_loop.py --seeds 4
"""

from __future__ import annotations

import argparse
import json
import math
import time

import jax

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import mujoco_robot as mr  # noqa: E402
from common import table, write_section  # noqa: E402
from realistic import detection  # noqa: E402
from dense_armor.derivatives import Differentiator, default_cutoff  # noqa: E402
from dense_armor.dynamics import rnea  # noqa: E402
from dense_armor.learners import Stepper  # noqa: E402
from dense_armor.model import lock_joints  # noqa: E402
from dense_armor.robot_learner import RobotLearner  # noqa: E402
from dense_armor.urdf import parse_urdf  # noqa: E402

DURATION = 60.0
WARM_UP = 5.0  # s: the learner's first seconds, left out of the scores
HARM = 1.1  # a second whose tracking RMSE exceeds the URDF's by more than this is harmful


class Learned:
    """The learner's feed-forward, ``mujoco_robot.closed_loop``'s ``feed_forward``: each tick,
    the measured sample learned, then the learner's torque at the reference (kept in
    :attr:`forward`, the payload alarms' times in :attr:`alarms`)."""

    def __init__(self, model, rng, peak):
        n, self.tick = model.n, 1.0 / mr.CONTROL_RATE
        learner = RobotLearner(model, rate=mr.CONTROL_RATE)
        self.stepper = Stepper(learner, learner.init(jnp.float64))
        self.differentiator = Differentiator(default_cutoff(mr.CONTROL_RATE), mr.CONTROL_RATE, causal=True)
        self.gains = rng.uniform(-0.03, 0.03, n)
        # the torque's noise: white noise through a first-order low-pass of 5-20 Hz
        self.noise_std, self.keep = rng.uniform(0.01, 0.03, n) * peak, math.exp(-2 * math.pi * rng.uniform(5.0, 20.0) * self.tick)
        self.noise, self.white = np.zeros(n), np.random.default_rng(rng.integers(2**32))
        self.forward, self.alarms = [], []

    def __call__(self, i, reference, q, last):
        encoder = np.round(q / mr.QUANTUM) * mr.QUANTUM
        finished = self.differentiator.push({"t": np.array([i * self.tick]), "q": encoder[None]})
        self.noise = self.keep * self.noise + math.sqrt(1 - self.keep**2) * self.white.standard_normal(len(self.noise))
        if not finished:  # the first tick: no derivative yet
            forward = self.stepper.predict(*reference)
        else:
            sample = {key: value[-1] for key, value in finished[0].items()}  # this tick's
            measured = (1 + self.gains) * (last + self.noise * self.noise_std)  # the last command, as the current says it
            forward = self.stepper.tick(sample["q"], sample["qd"], sample["qdd"], measured, *reference)
            if self.stepper.last.alarm:
                self.alarms.append(i * self.tick)
        self.forward.append(forward)
        return forward


def run_case(robot: str, seed: int, change: str, duration: float = DURATION) -> dict:
    """Both controllers on one draw (``duration`` s, a change 60 % into it); their figures."""
    spec = mr.ROBOTS[robot]
    motion = "sines" if seed % 2 == 0 else "moves"
    rng = np.random.default_rng([seed, 8, {"steady": 0, "pick": 1, "drop": 2}[change]])
    plain, loaded, names, parts = mr.true_robot(robot, seed)
    path = mr.sines(plain, duration, rng) if motion == "sines" else mr.moves(plain, duration, rng)
    when = None if change == "steady" else 0.6 * duration
    carrying = mr.payload_on(change, when)
    model = parse_urdf(mr.nominal_urdf(robot))
    if spec.locked:
        model = lock_joints(model, spec.locked)
    assert tuple(model.joint_names) == tuple(names), (model.joint_names, names)
    t = np.arange(int(duration * mr.CONTROL_RATE)) / mr.CONTROL_RATE
    reference = path(t)
    urdf_torque = np.asarray(jax.jit(jax.vmap(lambda *x: rnea(model, *x)))(*map(jnp.asarray, reference)))
    peak = np.abs(urdf_torque).max(0)
    out = {"robot": robot, "seed": seed, "change": change, "motion": motion}
    for name, forward in (("urdf", None), ("learner", Learned(model, rng, peak))):
        feed = (lambda i, *_: urdf_torque[min(i, len(t) - 1)]) if forward is None else forward
        started = time.perf_counter()
        q, _, _, command = mr.closed_loop(robot, plain, loaded, path, t, carrying, parts["effort"], feed)
        seconds = time.perf_counter() - started
        feed_torque = urdf_torque if forward is None else np.array(forward.forward)[: len(t)]
        after = t >= WARM_UP
        error = reference[0] - q
        out[name] = {
            "tracking_mrad": 1e3 * float(np.sqrt(np.mean(error[after] ** 2))),
            "feedback_nm": float(np.sqrt(np.mean((command - feed_torque)[after] ** 2))),
            "seconds": seconds,
            "per_second": [float(np.sqrt(np.mean(error[(t >= s) & (t < s + 1)] ** 2))) for s in range(int(WARM_UP), int(duration))],
        }
        if forward is not None:
            detected, false = detection(forward.alarms, when)
            out[name] |= {"alarms": forward.alarms, "delay": None if detected is None else detected - when,
                          "missed": when is not None and detected is None, "false_alarms": len(false)}
    harmful = np.array(out["learner"]["per_second"]) > HARM * np.array(out["urdf"]["per_second"])
    out["harmful"] = int(harmful.sum())
    return out


def summarize(results: list[dict]) -> str:
    rows = []
    for robot in dict.fromkeys(r["robot"] for r in results):
        for change in dict.fromkeys(r["change"] for r in results):
            group = [r for r in results if r["robot"] == robot and r["change"] == change]
            if not group:
                continue
            mean = lambda key, what: float(np.mean([r[key][what] for r in group]))  # noqa: E731
            ratios = [r["learner"]["tracking_mrad"] / r["urdf"]["tracking_mrad"] for r in group]
            delays = [r["learner"]["delay"] for r in group if r["learner"]["delay"] is not None]
            rows.append([robot, change, str(len(group)), f"{mean('urdf', 'tracking_mrad'):.2f}",
                         f"{mean('learner', 'tracking_mrad'):.2f}", f"{np.mean(ratios):.2f} / {max(ratios):.2f}",
                         f"{mean('urdf', 'feedback_nm'):.2f}", f"{mean('learner', 'feedback_nm'):.2f}",
                         str(sum(r["harmful"] for r in group)), str(sum(r["learner"]["false_alarms"] for r in group)),
                         "-" if change == "steady" else str(sum(r["learner"]["missed"] for r in group)),
                         f"{np.mean(delays):.2f} / {max(delays):.2f}" if delays else "-"])
    header = ["robot", "change", "runs", "URDF: tracking RMSE (mrad)", "learner: tracking RMSE (mrad)",
              "learner / URDF (mean / max)", "URDF: feedback (N m RMS)", "learner: feedback (N m RMS)",
              "harmful seconds", "false alarms", "missed", "delay s (mean / max)"]
    ratios = [r["learner"]["tracking_mrad"] / r["urdf"]["tracking_mrad"] for r in results]
    seconds = sum(len(r["urdf"]["per_second"]) for r in results)
    return (table(header, rows) + f"\n\nOver {len(results)} runs: the learner's tracking RMSE {np.median(ratios):.2f}x the "
            f"URDF's (median; {min(ratios):.2f}-{max(ratios):.2f}x); harmful seconds "
            f"{sum(r['harmful'] for r in results)} of {seconds}.")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--robots", nargs="*", default=["panda", "ur5"])
    parser.add_argument("--changes", nargs="*", default=["steady", "pick", "drop"])
    parser.add_argument("--no-docs", action="store_true")
    args = parser.parse_args()
    results = []
    for seed in range(args.seeds):
        for robot in args.robots:
            for change in args.changes:
                r = run_case(robot, seed, change)
                results.append(r)
                print(json.dumps({k: v for k, v in r.items() if k not in ("urdf", "learner")} | {
                    k: {m: x for m, x in r[k].items() if m != "per_second"} for k in ("urdf", "learner")}), flush=True)
    text = summarize(results)
    print(text)
    if not args.no_docs:
        write_section("The learner in the loop", __doc__.split("\n\n", 1)[1].rsplit("\n\n", 1)[0] + "\n\n" + text + "\n",
                      f"python benchmarks/in_the_loop.py --seeds {args.seeds}")
