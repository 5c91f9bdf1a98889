"""Detecting a payload change in the payload link's parameter subspace.

A learner of the whole robot (:class:`dense_armor.robot_learner.RobotLearner`) explains the
measured torque with every body's inertial parameters and every joint's friction. When the
payload changes, what its prior error ``e`` cannot explain is, to first order, a change
``Delta`` of one body's 10 parameters: ``e = Y_b Delta + noise``, ``Y_b`` that body's (n, 10)
regressor columns. The detector fits ``Delta`` to the recent errors and raises an alarm only
when the fitted mass change is both physically large and statistically clear:

1. Window fit. With rows whitened by each joint's noise level, exponentially weighted sums
   over a window of ``window`` seconds, ``A = sum Y_b' Y_b`` and ``b = sum Y_b' e``, give the
   ridge estimate ``Delta = (A + L)^-1 b``, ``L`` the precision of a payload's prior (a
   :func:`payload_std` change). Errors that do not look like a change of that body (misfit of
   friction or of other links, noise) project onto it weakly.
2. Its uncertainty. The fit's variance ``(A + L)^-1 / (1 + lam)`` (the exponential window's
   weights counted twice) is that of white errors; real residuals are correlated in time, so it
   is multiplied by their integrated autocorrelation time, ``tau = (1 + rho) / (1 - rho)`` with
   ``rho`` the errors' lag-one autocorrelation, averaged over the joints (the learner keeps it).
3. Decision: an alarm when ``|Delta_m| >= min_mass`` and ``|Delta_m| >= z std(Delta_m)``, in
   the window or in one a third as long (an exponential window dilutes a change with what came
   before it: the short one sees a large change sooner), once the learner has seen
   ``arm_after`` seconds of samples and ``hold`` seconds after an alarm.

On an alarm the learner goes back to what it had learned before the change and re-learns the
payload on its own: the detector keeps a few snapshots of the learner's parameters, a window
apart, and the one at least two windows old is the baseline (3 s by default: an alarm that late
after the change still finds a baseline the change had not bent). The learner restores it, gives the payload body a payload prior (independent of the rest)
and, for ``hold`` seconds, learns only that body: a payload's mass enters the torques only in
combinations with the bodies before it, which the rest of the robot could otherwise absorb.

The change reported is measured against the baseline, not read from the learner's parameters
(which go on to share it with the bodies before the payload, an unidentifiable split): from the
alarm on, the detector fits the change of the payload body alone to every sample's error under
the baseline, ``tau - X theta_baseline = Y_b Delta + noise``, by least squares without
forgetting and the payload prior as ridge, until the next alarm. Its standard deviation counts
the errors' correlation time.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["PayloadDetector", "PayloadDetectorState", "payload_std"]

SNAPSHOTS = 4  # snapshots of the learner's parameters, a window apart
WINDOWS = (1.0 / 3.0, 1.0)  # the fits' windows, in units of ``window``
# each window's ``min_mass`` and ``z`` multiplied by these: the short window is noisier, and
# is there for large changes
STRICTER_MASS, STRICTER_Z = (1.5, 1.0), (2.0, 1.0)
# and the short window tests only once the learner has had this many samples since the start
# or the last alarm (a learner still converging looks, over a short window, like a change)
SHORT_AFTER = 3000


def payload_std(mass: float = 5.0, radius: float = 0.2) -> np.ndarray:
    """Prior standard deviations (10,) of a payload change: a mass of about ``mass`` kg whose
    centre of mass and extent are within about ``radius`` m of the link origin."""
    return np.array([mass] + [mass * radius] * 3 + [mass * radius**2] * 6)


class PayloadDetectorState(NamedTuple):
    """State of :class:`PayloadDetector`.

    Attributes:
        A: (2, 10, 10) exponentially weighted ``sum Y_b' Y_b`` (whitened rows), per window.
        b: (2, 10) exponentially weighted ``sum Y_b' e``, per window.
        since: () int32, samples since the start or the last alarm.
        alarmed: () bool, an alarm has been raised (the next test waits ``hold``, not
            ``arm_after``).
        snapshots: (SNAPSHOTS, p) the learner's parameters, every window, newest first.
        baseline: (p,) the learner's parameters before the last change, which a change is
            measured from: its parameters at the start, then at each alarm the baseline's.
        change_A: (10, 10) ``sum Y_b' Y_b`` (whitened rows) since the last alarm.
        change_b: (10,) ``sum Y_b' (y - X baseline)`` since the last alarm.
    """

    A: jax.Array
    b: jax.Array
    since: jax.Array
    alarmed: jax.Array
    snapshots: jax.Array
    baseline: jax.Array
    change_A: jax.Array
    change_b: jax.Array


class PayloadDetector(eqx.Module):
    """A generalised likelihood-ratio test for a change of one body's inertial parameters.

    See the module docstring. Times are in seconds; the learner passes its sampling rate.

    Attributes:
        window: s, the exponential window of the fit (its time constant).
        min_mass: kg, the smallest mass change that raises an alarm.
        z: the fitted mass change must be at least ``z`` standard deviations.
        arm_after: s of samples before the first test (the learner's own transient).
        hold: s after an alarm before the next test (the learner re-learns the body).
        prior: (10,) standard deviations of a payload change (:func:`payload_std`): the fit's
            ridge, and the covariance added to the body's parameters on an alarm.
    """

    window: float | jax.Array = 1.5
    min_mass: float | jax.Array = 0.6
    z: float | jax.Array = 5.0
    arm_after: float | jax.Array = 10.0
    hold: float | jax.Array = 3.0
    prior: jax.Array | np.ndarray = eqx.field(default_factory=payload_std)

    def __check_init__(self):
        for name, rule in (("window", lambda v: v > 0), ("min_mass", lambda v: v >= 0), ("z", lambda v: v >= 0),
                           ("arm_after", lambda v: v >= 0), ("hold", lambda v: v >= 0)):
            value = getattr(self, name)
            if isinstance(value, (int, float)) and not (np.isfinite(value) and rule(value)):
                raise ValueError(f"PayloadDetector {name} out of range, got {value!r}")
        prior = np.asarray(self.prior) if not isinstance(self.prior, jax.core.Tracer) else None
        if prior is not None and (prior.shape != (10,) or not np.all(np.isfinite(prior)) or not np.all(prior > 0)):
            raise ValueError(f"PayloadDetector prior: expected 10 positive standard deviations, got {self.prior!r}")

    def init(self, params, dtype) -> PayloadDetectorState:
        """Nothing seen; ``params`` (p,) the learner's parameters."""
        params = jnp.asarray(params, dtype)
        return PayloadDetectorState(
            A=jnp.zeros((len(WINDOWS), 10, 10), dtype), b=jnp.zeros((len(WINDOWS), 10), dtype), since=jnp.zeros((), jnp.int32),
            alarmed=jnp.zeros((), bool), snapshots=jnp.broadcast_to(params, (SNAPSHOTS, params.shape[-1])),
            baseline=params, change_A=jnp.zeros((10, 10), dtype), change_b=jnp.zeros(10, dtype),
        )

    def change(self, state: PayloadDetectorState, correlation):
        """The fitted change of the body since the last alarm (see the module docstring).

        Returns:
            ``(Delta, std)``: (10,) the change and (10,) its entries' standard deviations
            (the payload prior's own before any sample).
        """
        cov = jnp.linalg.inv(state.change_A + jnp.diag(1.0 / jnp.asarray(self.prior, state.change_b.dtype) ** 2))
        std = jnp.sqrt(jnp.maximum(jnp.diagonal(cov), 0.0) * jnp.maximum(correlation, 1.0))
        return cov @ state.change_b, std

    def settling(self, state: PayloadDetectorState, rate) -> jax.Array:
        """() bool: within ``hold`` seconds after an alarm (the learner learns the body only)."""
        return state.alarmed & (state.since < jnp.asarray(self.hold, state.b.dtype) * rate)

    def step(self, state: PayloadDetectorState, Y, e, params, columns: slice, correlation, rate, valid, rows, target):
        """Test the body's parameters for a change, then learn the sample into the window.

        Args:
            Y: (n, 10) the body's regressor columns, rows whitened by each joint's noise std
                and by the errors' prior covariance.
            e: (n,) the learner's prior errors, whitened the same way.
            params: (p,) the learner's current parameters; ``columns`` the body's among them.
            rows, target: (n, p) and (n,) the learner's rows and target, whitened by each
                joint's noise std only (for the change's fit against the baseline).
            correlation: () the errors' integrated autocorrelation time, samples (>= 1).
            rate: samples per second.
            valid: () bool; an invalid sample changes nothing.

        Returns:
            ``(state, alarm, baseline, estimate, std)``: the new state, () bool, the learner's
            parameters before the change (p,) (to restore on an alarm), the fitted change (10,)
            and the standard deviation (10,) of its entries.
        """
        dtype = state.b.dtype
        rate = jnp.asarray(rate, dtype)
        # two windows: the long one for small changes, a third as long for quick large ones
        # (an exponential window dilutes a change with what came before it)
        lam = jnp.exp(-1.0 / (jnp.asarray(self.window, dtype) * jnp.array(WINDOWS, dtype) * rate))
        prior = jnp.asarray(self.prior, dtype)
        # the fits over the windows of the samples before this one
        cov = jnp.linalg.inv(state.A + jnp.diag(1.0 / prior**2))
        estimate = jnp.einsum("wij,wj->wi", cov, state.b)
        variance = jnp.diagonal(cov, axis1=-2, axis2=-1)
        std = jnp.sqrt(jnp.maximum(variance, 0.0) * jnp.maximum(correlation, 1.0) / (1.0 + lam)[:, None])
        wait = jnp.where(state.alarmed, jnp.asarray(self.hold, dtype), jnp.asarray(self.arm_after, dtype))
        armed = state.since >= wait * rate
        mass = jnp.abs(estimate[:, 0])
        passes = (mass >= jnp.array(STRICTER_MASS, dtype) * jnp.asarray(self.min_mass, dtype)) & (
            mass >= jnp.array(STRICTER_Z, dtype) * jnp.asarray(self.z, dtype) * std[:, 0])
        ready = jnp.stack([state.since >= SHORT_AFTER, jnp.ones((), bool)])  # (short, long) windows
        passes = passes & ready
        alarm = valid & armed & jnp.any(passes)
        # snapshots of the learner's parameters every window; on an alarm, the baseline is
        # the newest one at least two windows old
        every = jnp.maximum(jnp.round(jnp.asarray(self.window, dtype) * rate), 1).astype(jnp.int32)
        due = valid & (state.since % every == 0)
        snapshots = jnp.where(due, jnp.concatenate([params[None], state.snapshots[:-1]]), state.snapshots)
        baseline = state.snapshots[2]
        A = jnp.where(valid, lam[:, None, None] * state.A + Y.T @ Y, state.A)
        b = jnp.where(valid, lam[:, None] * state.b + Y.T @ e, state.b)
        # the change since the last alarm, against its baseline
        Yc, measured = rows[:, columns], valid & state.alarmed
        change_A = jnp.where(measured, state.change_A + Yc.T @ Yc, state.change_A)
        change_b = jnp.where(measured, state.change_b + Yc.T @ (target - rows @ state.baseline), state.change_b)
        new = PayloadDetectorState(A, b, jnp.where(valid, state.since + 1, state.since), state.alarmed, snapshots,
                                   state.baseline, change_A, change_b)
        # after an alarm: an empty window, snapshots of the restored baseline, a new change
        restart = PayloadDetectorState(jnp.zeros_like(A), jnp.zeros_like(b), jnp.zeros((), jnp.int32), jnp.ones((), bool),
                                       jnp.broadcast_to(baseline, snapshots.shape), baseline, jnp.zeros_like(change_A),
                                       jnp.zeros_like(change_b))
        new = jax.tree.map(lambda a, f: jnp.where(alarm, f, a), new, restart)
        return new, alarm, baseline, estimate[-1], std[-1]
