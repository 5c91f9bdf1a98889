"""The compiled shape of the learners' steps on Panda: a guard against extra kernels, without
timing (a ``perf`` benchmark of compilation, outside the default run and CI; see
``tests/test_dynamics_compiled.py``).

A :class:`~dense_armor.learners.Stepper` call from Python pays a handoff for each kernel XLA:CPU
sends to its thread pool, on top of the arithmetic (``docs/design.md``, "A step from a Python
loop"), so a rewrite that adds kernels (say, a reduction no longer written out) slows every
``learn_one`` with no change in the results. The bounds are the current counts.
"""

from __future__ import annotations

import hlo
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from urdf_factory import example_robot_urdf

from dense_armor import PayloadLearner, ResidualLearner, RobotLearner
from dense_armor.drift import Hampel
from dense_armor.learners import Stepper
from dense_armor.urdf import parse_urdf

PANDA = "panda_description/urdf/panda.urdf"


@pytest.fixture(scope="module")
def panda():
    return parse_urdf(example_robot_urdf(PANDA))


@pytest.mark.perf
@pytest.mark.parametrize(
    "make, max_kernels",
    [
        # the counts since a step writes over its donated state and refuses an overflowed update,
        # and (payload, robot) its largest leaves are buffers of their own, not a concatenate's parts
        (lambda m: ResidualLearner(m), 21),
        (lambda m: ResidualLearner(m, detector=Hampel()), 30),
        (lambda m: PayloadLearner(m), 47),
        (lambda m: RobotLearner(m), 124),
    ],
)
def test_stepper_kernels(panda, make, max_kernels):
    """The Stepper's program (Panda with its fingers, float64): the five-feature learner, the
    drift-aware one (Hampel), the payload and the whole-robot learner."""
    with jax.enable_x64(True):
        learner = make(panda)
        stepper = Stepper(learner, learner.init(jnp.float64))
        sample = np.zeros(4 * panda.n)
        text = stepper._step.lower(stepper._buffers, sample).compile().as_text()
    kernels = hlo.count(hlo.entry(text), "fusion", "custom-call", "dot", "copy", "concatenate", "sort", "conditional")
    assert kernels <= max_kernels, f"{type(learner).__name__}: {kernels} kernels > {max_kernels}"


@pytest.mark.perf
def test_replay_updates_the_carried_state_in_place(panda):
    """``learners.replay`` of the whole-robot learner (Panda, float64): with the library's
    options XLA:CPU copies almost none of the 31 leaves of the carried state at each iteration;
    without copy insertion's region analysis it copies most of them, a kernel each."""
    from dense_armor import compiler, learners
    from dense_armor.learners import Sample

    with jax.enable_x64(True):
        learner = RobotLearner(panda, rate=1000.0)
        state = learner.init(jnp.float64)
        trajectory = Sample(*np.zeros((4, 50, panda.n)))
        replay = compiler.full_precision(lambda state, trajectory: learners.replay(learner, state, trajectory))

        def copies(options):
            return hlo.count(hlo.loop_body(jax.jit(replay, compiler_options=options).lower(state, trajectory).compile().as_text()), "copy")

        tuned = copies(compiler.OPTIONS)
        plain = copies({k: v for k, v in compiler.OPTIONS.items() if "copy_insertion" not in k})
    assert tuned <= 5 < 15 <= plain, (tuned, plain)
