"""Online residual-dynamics learners: immutable state, one jitted prequential step.

A learner is an :class:`equinox.Module` holding the nominal model and the hyperparameters
(floats are pytree leaves, so under ``jax.jit`` a new ``lam`` is a new argument, not a
recompile, and a sweep over ``lam`` is a ``vmap``). Its state is a :class:`LearnerState`
pytree. :func:`step` predicts first, then learns (prequential evaluation), and returns the
prior prediction and error; :func:`replay` runs the same step over a whole trajectory with
``lax.scan``; ``jax.vmap`` over learners and trajectories runs a batch of robots at once.

The five-feature learner (the design document) keeps one RLS per joint on
``x_j = [qdd_j, qd_j, sign(qd_j), g_j, 1]`` with target ``tau_j - rnea(q, qd, qdd)_j``.
With a drift ``detector``, the standardised prior error feeds a per-joint detector; when
any joint alarms, every joint forgets with ``fast_lam`` for ``warmup_steps`` samples.

A sample with a NaN or inf is skipped inside the step: the state is unchanged except for the
``rejected`` counter, and the outputs of that step are NaN.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import rls
from dense_armor.drift import CUSUM, Hampel
from dense_armor.dynamics import tree as tr
from dense_armor.dynamics.inverse_dynamics import _rnea
from dense_armor.model import Model

FEATURE_NAMES = ("qdd", "qd", "sign_qd", "g", "bias")


class Sample(NamedTuple):
    """One sample (each (n,)) or a trajectory (each (T, n)): positions (rad or m),
    velocities, accelerations and measured joint torques (N m or N)."""

    q: Any
    qd: Any
    qdd: Any
    tau: Any


class StepOutput(NamedTuple):
    """What one prequential step reports (a leading T axis after :func:`replay`).

    Attributes:
        prediction: (n,) torque predicted before learning the sample (nominal + residual).
        error: (n,) ``tau - prediction``, the prior error.
        nominal: (n,) the URDF model's torque ``rnea(q, qd, qdd)``.
        alarm: () bool, a drift alarm was raised at this sample.
        accepted: () bool, the sample was finite and was learned.
    """

    prediction: jax.Array
    error: jax.Array
    nominal: jax.Array
    alarm: jax.Array
    accepted: jax.Array


class LearnerState(NamedTuple):
    """The learner's whole memory; save it and a restarted controller loses nothing.

    Attributes:
        rls: per-joint RLS state, ``w`` (n, 5) and ``P`` (n, 5, 5).
        count: samples learned.
        rejected: samples skipped for non-finite values.
        countdown: samples left with the fast forgetting factor.
        alarms: drift alarms raised so far.
        detector: the drift detector's state (windows), or ``None``.
    """

    rls: rls.RLSState
    count: jax.Array
    rejected: jax.Array
    countdown: jax.Array
    alarms: jax.Array
    detector: Any


def check_hyperparameters(lam, delta, fast_lam=1.0):
    """Raise ValueError for ``lam`` or ``fast_lam`` outside (0, 1] or ``delta <= 0``."""
    for name, value in (("lam", lam), ("fast_lam", fast_lam)):
        if isinstance(value, (int, float)) and not 0.0 < value <= 1.0:
            raise ValueError(f"{name} must be in (0, 1], got {value}")
    if isinstance(delta, (int, float)) and not delta > 0:
        raise ValueError(f"delta must be > 0, got {delta}")


class ResidualLearner(eqx.Module):
    """One RLS per joint on ``[qdd_j, qd_j, sign(qd_j), g_j, 1]``, optionally drift-aware.

    Attributes:
        model: the nominal (URDF) model.
        lam: forgetting factor in (0, 1].
        delta: initial covariance scale, ``P0 = delta I``.
        detector: ``None``, or a :class:`~dense_armor.drift.Hampel` or
            :class:`~dense_armor.drift.CUSUM` on the standardised prior error.
        fast_lam: forgetting factor for ``warmup_steps`` samples after an alarm.
        warmup_steps: samples of fast forgetting after an alarm.
        detector_warmup: samples learned before the detector is fed.
    """

    model: Model
    lam: float | jax.Array = 1.0
    delta: float | jax.Array = 1e6
    detector: Hampel | CUSUM | None = None
    fast_lam: float | jax.Array = 0.9
    warmup_steps: int | jax.Array = 20
    detector_warmup: int | jax.Array = 0

    def __check_init__(self):
        check_hyperparameters(self.lam, self.delta, self.fast_lam)

    def init(self, dtype=None) -> LearnerState:
        """The initial state: ``w = 0``, ``P = delta I`` for every joint."""
        dtype = jnp.dtype(dtype or jnp.result_type(float))
        zero = jnp.zeros((), jnp.int32)
        return LearnerState(
            rls=rls.init(len(FEATURE_NAMES), self.delta, batch_shape=(self.model.n,), dtype=dtype),
            count=zero,
            rejected=zero,
            countdown=zero,
            alarms=zero,
            detector=None if self.detector is None else self.detector.init(self.model.n, dtype),
        )

    def features(self, q, qd, qdd, dtype):
        """Features (n, 5) and the nominal torque (n,) at one state."""
        _, (q, qd, qdd) = tr.check(self.model, q=q, qd=qd, qdd=qdd)
        q, qd, qdd = (a.astype(dtype) for a in (q, qd, qdd))
        nominal = _rnea(self.model, q, qd, qdd, dtype)
        gravity = _rnea(self.model, q, None, None, dtype)
        x = jnp.stack([qdd, qd, jnp.sign(qd), gravity, jnp.ones_like(q)], axis=-1)
        return x, nominal

    def predict(self, state: LearnerState, q, qd, qdd) -> jax.Array:
        """Predicted torque (n,): nominal plus learned residual."""
        x, nominal = self.features(q, qd, qdd, state.rls.w.dtype)
        return nominal + rls.predict(state.rls, x)

    def step(self, state: LearnerState, sample: Sample) -> tuple[LearnerState, StepOutput]:
        """Predict, score, then learn one sample (prequential)."""
        dtype = state.rls.w.dtype
        _, (tau,) = tr.check(self.model, tau=sample.tau)
        arrays = [jnp.asarray(a, dtype) for a in (sample.q, sample.qd, sample.qdd, tau)]
        valid = jnp.all(jnp.stack([jnp.all(jnp.isfinite(a)) for a in arrays]))
        q, qd, qdd, tau = (jnp.where(valid, a, 0) for a in arrays)
        x, nominal = self.features(q, qd, qdd, dtype)
        residual = rls.predict(state.rls, x)
        target = tau - nominal
        error = target - residual

        lam = jnp.asarray(self.lam, dtype)
        countdown, detector, alarm = state.countdown, state.detector, jnp.zeros((), bool)
        if self.detector is not None:
            z = error / jnp.sqrt(1.0 + rls.prior_variance(state.rls, x))
            fed = valid & (state.count >= self.detector_warmup)
            detector, alarms = self.detector.step(state.detector, z, fed)
            alarm = jnp.any(alarms)
            countdown = jnp.where(alarm, jnp.asarray(self.warmup_steps, jnp.int32), countdown)
            lam = jnp.where(countdown > 0, jnp.asarray(self.fast_lam, dtype), lam)
            countdown = jnp.maximum(countdown - 1, 0)
        learned = LearnerState(
            rls=rls.update(state.rls, x, target, lam),
            count=state.count + 1,
            rejected=state.rejected,
            countdown=countdown,
            alarms=state.alarms + alarm,
            detector=detector,
        )
        new = jax.tree.map(lambda a, b: jnp.where(valid, a, b), learned, state)
        new = new._replace(rejected=state.rejected + (~valid), detector=detector)
        nan = jnp.full_like(nominal, jnp.nan)
        output = StepOutput(
            prediction=jnp.where(valid, nominal + residual, nan),
            error=jnp.where(valid, error, nan),
            nominal=jnp.where(valid, nominal, nan),
            alarm=alarm & valid,
            accepted=valid,
        )
        return new, output


@jax.jit
def step(learner: ResidualLearner, state: LearnerState, sample: Sample) -> tuple[LearnerState, StepOutput]:
    """One jitted prequential step: predict, score, learn. See :meth:`ResidualLearner.step`."""
    return learner.step(state, sample)


@jax.jit
def replay(learner: ResidualLearner, state: LearnerState, trajectory: Sample) -> tuple[LearnerState, StepOutput]:
    """Run :func:`step` over a trajectory (each field (T, n)) with ``lax.scan``.

    Returns:
        The final state and the per-sample :class:`StepOutput` (each field with a leading T).
    """
    return jax.lax.scan(lambda s, sample: learner.step(s, sample), state, trajectory)


@jax.jit
def predict(learner: ResidualLearner, state: LearnerState, q, qd, qdd) -> jax.Array:
    """Predicted torque (n,) at one state, without learning."""
    return learner.predict(state, q, qd, qdd)


def save_state(path: str | Path, state) -> None:
    """Write any learner state pytree to an ``.npz`` file, bit-exactly."""
    leaves = jax.tree.leaves(state)
    np.savez(path, **{f"leaf_{i}": np.asarray(leaf) for i, leaf in enumerate(leaves)})


def load_state(path: str | Path, like):
    """Read a state written by :func:`save_state`, shaped like the template ``like``.

    Raises:
        ValueError: the file does not hold a state of that structure, shapes and dtypes.
    """
    leaves, treedef = jax.tree.flatten(like)
    with np.load(path) as data:
        if len(data.files) != len(leaves):
            raise ValueError(f"{path}: holds {len(data.files)} arrays, the learner's state has {len(leaves)}")
        loaded = [data[f"leaf_{i}"] for i in range(len(leaves))]
    for i, (old, new) in enumerate(zip(leaves, loaded)):
        if np.shape(old) != new.shape or jnp.result_type(old) != new.dtype:
            raise ValueError(
                f"{path}: array {i} is {new.dtype}{list(new.shape)}, expected "
                f"{jnp.result_type(old)}{list(np.shape(old))}: a state of another learner or robot"
            )
    return jax.tree.unflatten(treedef, [jnp.asarray(a) for a in loaded])
