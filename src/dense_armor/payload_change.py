"""Detecting a payload change in the payload link's parameter subspace.

A learner of the whole robot (:class:`dense_armor.robot_learner.RobotLearner`) explains the
measured torque with every body's inertial parameters and every joint's friction. When the
payload changes, what its prior error ``e`` cannot explain is, to first order, a change
``Delta`` of one body's 10 parameters: ``e = Y_b Delta + noise``, ``Y_b`` that body's (n, 10)
regressor columns. The detector fits ``Delta`` to the recent errors and raises an alarm only
when the fitted mass change is both physically large and statistically clear:

1. Window fit. With rows whitened by each joint's noise level (widened where the model
   misfits: the learner's excess for the joint's speed band), exponentially weighted sums
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
after the change still finds a baseline the change had not bent). The learner restores it,
gives the payload body a payload prior (independent of the rest) and, for ``hold`` seconds,
learns only that body: a payload's mass enters the torques only in combinations with the
bodies before it, which the rest of the robot could otherwise absorb.

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

from dense_armor import rls

__all__ = ["PayloadDetector", "PayloadDetectorState", "payload_std"]

SNAPSHOTS = 3  # snapshots of the learner's parameters, a window apart (the oldest is the baseline)
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
        A: (3, 10, 10) the fits' ``sum Y_b' Y_b``: each window's, exponentially weighted (rows
            whitened by the errors' prior covariance), then the change's since the last alarm
            (rows whitened by the noise only, errors under the baseline).
        b: (3, 10) the fits' ``sum Y_b' e``, the same way.
        since: () int32, samples since the start or the last alarm.
        alarmed: () bool, an alarm has been raised (the next test waits ``hold``, not
            ``arm_after``).
        snapshots: (SNAPSHOTS, p) the learner's parameters, every window, newest first.
        baseline: (p,) the learner's parameters before the last change, which a change is
            measured from: its parameters at the start, then at each alarm the baseline's.
    """

    A: jax.Array
    b: jax.Array
    since: jax.Array
    alarmed: jax.Array
    snapshots: jax.Array
    baseline: jax.Array


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
        fits = len(WINDOWS) + 1
        return PayloadDetectorState(
            A=jnp.zeros((fits, 10, 10), dtype), b=jnp.zeros((fits, 10), dtype), since=jnp.zeros((), jnp.int32),
            alarmed=jnp.zeros((), bool), snapshots=jnp.broadcast_to(params, (SNAPSHOTS, params.shape[-1])), baseline=params,
        )

    def fits(self, state: PayloadDetectorState, correlation, rate):
        """The ridge fits of the body's change: each window's, then the change's since the last
        alarm (see the module docstring).

        Returns:
            ``(Delta, std)``: (3, 10) the fitted changes and (3, 10) their entries' standard
            deviations, the errors' correlation time counted (the payload prior's own before
            any sample).
        """
        dtype = state.b.dtype
        cov = rls.spd_solve(state.A + jnp.diag(1.0 / jnp.asarray(self.prior, dtype) ** 2), jnp.eye(10, dtype=dtype))
        # an exponential window's weights count twice in its variance: 1 / (1 + lam)
        weights = jnp.concatenate([1.0 / (1.0 + self._lam(dtype, rate)), jnp.ones(1, dtype)])
        variance = jnp.diagonal(cov, axis1=-2, axis2=-1) * weights[:, None]
        return jnp.einsum("fij,fj->fi", cov, state.b), jnp.sqrt(jnp.maximum(variance, 0.0) * jnp.maximum(correlation, 1.0))

    def _lam(self, dtype, rate):
        """(2,) the windows' forgetting factors per sample."""
        return jnp.exp(-1.0 / (jnp.asarray(self.window, dtype) * jnp.array(WINDOWS, dtype) * jnp.asarray(rate, dtype)))

    def settling(self, state: PayloadDetectorState, rate) -> jax.Array:
        """() bool: within ``hold`` seconds after an alarm (the learner learns the body only)."""
        return state.alarmed & (state.since < jnp.asarray(self.hold, state.b.dtype) * rate)

    def step(self, state: PayloadDetectorState, Y, e, params, columns: slice, correlation, rate, valid, Y_noise, e_baseline):
        """Test the body's parameters for a change, then learn the sample into the window.

        Args:
            Y: (n, 10) the body's regressor columns, rows whitened by each joint's noise std
                and by the errors' prior covariance.
            e: (n,) the learner's prior errors, whitened the same way.
            params: (p,) the learner's current parameters; ``columns`` the body's among them.
            Y_noise, e_baseline: (n, 10) the body's regressor columns and (n,) the errors under
                :attr:`PayloadDetectorState.baseline`, whitened by each joint's noise std only
                (for the change's fit against the baseline).
            correlation: () the errors' integrated autocorrelation time, samples (>= 1).
            rate: samples per second.
            valid: () bool; an invalid sample changes nothing.

        Returns:
            ``(state, alarm, baseline, change, std)``: the new state, () bool, the learner's
            parameters before the change (p,) (to restore on an alarm), and the change since
            the last alarm (10,) with its entries' standard deviations (10,), both fitted to
            the samples before this one.
        """
        dtype = state.b.dtype
        rate = jnp.asarray(rate, dtype)
        # two windows: the long one for small changes, a third as long for quick large ones
        # (an exponential window dilutes a change with what came before it)
        lam = self._lam(dtype, rate)
        # the fits to the samples before this one
        estimate, std = self.fits(state, correlation, rate)
        wait = jnp.where(state.alarmed, jnp.asarray(self.hold, dtype), jnp.asarray(self.arm_after, dtype))
        armed = state.since >= wait * rate
        mass = jnp.abs(estimate[:2, 0])
        passes = (mass >= jnp.array(STRICTER_MASS, dtype) * jnp.asarray(self.min_mass, dtype)) & (
            mass >= jnp.array(STRICTER_Z, dtype) * jnp.asarray(self.z, dtype) * std[:2, 0])
        ready = jnp.stack([state.since >= SHORT_AFTER, jnp.ones((), bool)])  # (short, long) windows
        passes = passes & ready
        alarm = valid & armed & jnp.any(passes)
        # snapshots of the learner's parameters every window; on an alarm, the baseline is
        # the newest one at least two windows old
        every = jnp.maximum(jnp.round(jnp.asarray(self.window, dtype) * rate), 1).astype(jnp.int32)
        due = valid & (state.since % every == 0)
        snapshots = jnp.where(due, jnp.concatenate([params[None], state.snapshots[:-1]]), state.snapshots)
        baseline = state.snapshots[-1]
        # the windows forget, the change since the alarm does not; one product for all sums
        z = jnp.concatenate([Y, e[:, None], Y_noise, e_baseline[:, None]], axis=1)
        Z = z.T @ z
        YY = jnp.stack([Z[:10, :10], Z[:10, :10], Z[11:21, 11:21]])  # (short, long, change)
        Ye = jnp.stack([Z[:10, 10], Z[:10, 10], Z[11:21, 21]])
        keep = jnp.concatenate([lam, jnp.ones(1, dtype)])
        A = jnp.where(valid, keep[:, None, None] * state.A + YY, state.A)
        b = jnp.where(valid, keep[:, None] * state.b + Ye, state.b)
        new = PayloadDetectorState(A, b, jnp.where(valid, state.since + 1, state.since), state.alarmed, snapshots,
                                   state.baseline)
        # after an alarm: empty fits, snapshots of the restored baseline
        restart = PayloadDetectorState(jnp.zeros_like(A), jnp.zeros_like(b), jnp.zeros((), jnp.int32), jnp.ones((), bool),
                                       jnp.broadcast_to(baseline, snapshots.shape), baseline)
        new = jax.tree.map(lambda a, f: jnp.where(alarm, f, a), new, restart)
        return new, alarm, baseline, estimate[-1], std[-1]
