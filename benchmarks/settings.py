"""What the process-wide settings an application chooses do to the learners' speed on a CPU.

    python benchmarks/settings.py

The library changes no global setting; these are the application's to choose (``docs/design.md``,
"Dispatch and other global settings", "XLA:CPU's scheduler", "XLA:CPU's threads"). For Panda (7
joints, fingers locked), float64, each setting in fresh processes alternated over ``ROUNDS``
rounds (each figure the best of its rounds):

- a control loop's step, ``Stepper.step`` (which waits for the step's outputs), of the
  five-feature, payload and whole-robot learners: with JAX's defaults, with asynchronous CPU
  dispatch off, with the process pinned to one core, and with one thread in XLA:CPU's pool;
- a replay, ``learners.replay`` of the whole-robot learner over ``SAMPLES`` samples in one
  ``lax.scan`` (a program the library compiles with XLA:CPU's memory-optimised scheduler,
  ``dense_armor.compiler.OPTIONS``): with JAX's defaults, with the depth-first scheduler asked
  for the whole process too, with one pool thread, and with both.

Writes the "Application settings" section of ``docs/benchmarks.md`` (not with ``--no-docs``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from common import best, in_child, interleaved_us, median_us, robots, table, write_section

ROUNDS = 2
SAMPLES = 4000
KINDS = ("five-feature", "payload", "robot")
SCHEDULER = "--xla_cpu_enable_concurrency_optimized_scheduler=false"
#: Each setting: (label, environment, child options).
STEP_SETTINGS = (
    ("JAX's defaults", {}, []),
    ("asynchronous dispatch off", {}, ["--sync"]),
    ("pinned to one core", {}, ["--pin"]),
    ("one pool thread (`PJRT_NPROC=1`)", {"PJRT_NPROC": "1"}, []),
)
REPLAY_SETTINGS = (
    ("JAX's defaults", {}),
    ("depth-first scheduler for the process (`XLA_FLAGS`)", {"XLA_FLAGS": SCHEDULER}),
    ("one pool thread (`PJRT_NPROC=1`)", {"PJRT_NPROC": "1"}),
    ("both", {"XLA_FLAGS": SCHEDULER, "PJRT_NPROC": "1"}),
)


def measure_steps() -> dict:
    """Child: ``Stepper.step`` of each learner on Panda, us (median of interleaved rounds)."""
    import jax
    import jax.numpy as jnp
    from learners import trajectory, wrapper

    from dense_armor.learners import Stepper

    xml = robots()["Panda"]
    samples = list(zip(*trajectory(xml, 64)))
    steppers = {}
    with jax.enable_x64(True):
        for kind in KINDS:
            learner = wrapper(kind, xml).learner
            steppers[kind] = Stepper(learner, learner.init(jnp.float64))
    counter = iter(range(10**9))

    def stepped(stepper):
        with jax.enable_x64(True):
            stepper.step(*samples[next(counter) % len(samples)])

    return interleaved_us({kind: lambda s=s: stepped(s) for kind, s in steppers.items()}, rounds=10, per_round=200)


def measure_replay() -> dict:
    """Child: the whole-robot learner's ``learners.replay`` on Panda, us a sample."""
    import jax
    from learners import trajectory, wrapper

    from dense_armor.learners import Sample, replay

    xml = robots()["Panda"]
    with jax.enable_x64(True):
        learner = wrapper("robot", xml)
        traj = jax.device_put(Sample(*trajectory(xml, SAMPLES)))
        core, state = learner.learner, learner.state
        jax.block_until_ready(replay(core, state, traj))
        return {"robot": median_us(lambda: jax.block_until_ready(replay(core, state, traj)), 5, 1) / SAMPLES}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-docs", action="store_true")
    parser.add_argument("--child", choices=("steps", "replay"), help=argparse.SUPPRESS)
    parser.add_argument("--sync", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--pin", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        if args.pin:  # before JAX starts its threads, which inherit the affinity
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        if args.sync:
            import jax

            jax.config.update("jax_cpu_enable_async_dispatch", False)
        print(json.dumps(measure_steps() if args.child == "steps" else measure_replay()))
        return
    start = time.perf_counter()
    for key in ("XLA_FLAGS", "PJRT_NPROC", "NPROC"):  # the children's settings are the table's alone
        os.environ.pop(key, None)
    steps = {label: [] for label, _, _ in STEP_SETTINGS}
    replays = {label: [] for label, _ in REPLAY_SETTINGS}
    for _ in range(ROUNDS):
        for label, env, options in STEP_SETTINGS:
            steps[label].append(in_child(__file__, "steps", *options, env=env))
        for label, env in REPLAY_SETTINGS:
            replays[label].append(in_child(__file__, "replay", env=env))
    steps, replays = ({label: best(runs) for label, runs in figures.items()} for figures in (steps, replays))
    first = steps[STEP_SETTINGS[0][0]]
    rows = [[label, *(f"{x[kind]:.0f} ({x[kind] / first[kind]:.2f}x)" for kind in KINDS)] for label, x in steps.items()]
    body = ("`Stepper.step` on Panda, us a call (in brackets: against JAX's defaults):\n\n"
            + table(["setting", *(f"{kind}" for kind in KINDS)], rows))
    first = replays[REPLAY_SETTINGS[0][0]]["robot"]
    rows = [[label, f"{x['robot']:.1f} ({x['robot'] / first:.2f}x)"] for label, x in replays.items()]
    body += (f"\n\nThe whole-robot learner's `learners.replay` on Panda ({SAMPLES} samples in one `lax.scan`), us a "
             "sample (in brackets: against JAX's defaults):\n\n" + table(["setting", "us a sample"], rows))
    notes = (f"Each setting in fresh processes, alternated over {ROUNDS} rounds, each figure the best of its rounds; "
             "float64. The settings are the application's (the library changes none): asynchronous dispatch with "
             "`jax.config.update(\"jax_cpu_enable_async_dispatch\", False)`, pinning with `taskset -c 0` (here "
             "`os.sched_setaffinity` before JAX starts), the scheduler with "
             f"`XLA_FLAGS={SCHEDULER}` and the pool with `PJRT_NPROC=1`, both read when JAX starts its CPU backend. "
             "The library compiles its learners' programs (the `Stepper`'s, `learners.replay`) with XLA:CPU's "
             "memory-optimised scheduler itself, an option of each program (`dense_armor.compiler.OPTIONS`), so the "
             "process-wide flag only reaches programs a user compiles around them.")
    print(notes + "\n\n" + body)
    print(f"\n({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    if not args.no_docs:
        write_section("Application settings", notes + "\n\n" + body, "python benchmarks/settings.py")


if __name__ == "__main__":
    main()
