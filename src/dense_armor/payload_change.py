"""Detecting a payload change in the payload link's parameter subspace.

A learner of the whole robot (:class:`dense_armor.robot_learner.RobotLearner`) explains the
measured torque with every body's inertial parameters and every joint's friction. When the
payload changes, what its prior error ``e`` cannot explain is, to first order, a change
``Delta`` of one body's 10 parameters: ``e = Y_b Delta + noise``, ``Y_b`` that body's (n, 10)
regressor columns. The detector fits ``Delta`` to the recent errors and raises an alarm only
when the fitted mass change is both physically large and statistically clear:

1. Window fit. With rows whitened by each joint's noise level (widened where the model
   misfits: the learner's excess for the joint's speed band, and at rest the torque the joint's
   static friction holds, counted once for the rest), exponentially weighted sums
   over a window of ``window`` seconds, ``A = sum Y_b' Y_b`` and ``b = sum Y_b' e``, give the
   ridge estimate ``Delta = (A + L)^-1 b``, ``L`` the precision of a payload's prior (a
   :func:`payload_std` change). Errors that do not look like a change of that body (misfit of
   friction or of other links, noise) project onto it weakly.
2. Its uncertainty. The fit's variance ``(A + L)^-1 / (1 + lam)`` (the exponential window's
   weights counted twice) is that of white errors; real residuals are correlated in time, so it
   is multiplied by their integrated autocorrelation time, ``tau = (1 + rho) / (1 - rho)`` with
   ``rho`` the errors' lag-one autocorrelation, averaged over the joints (the learner keeps it),
   or by the fit's own, if larger: misfit that varies slowly (torque ripple at low speed) is
   correlated over far longer than the lag-one picture sees, and what matters is how it projects
   on the body's columns. The detector keeps batch means of the fit's score ``u = Y_b' e``: over
   blocks of :data:`BLOCK` s, ``Omega = sum (sum u)(sum u)'`` against ``Omega_0 = sum u u'``, and
   a fit whose mass is ``g' b`` gets ``tau = g' Omega g / g' Omega_0 g``. A block counts
   :data:`HELD` blocks after it ends, and not at all if an alarm comes first (a change must not
   widen its own test), nor while the detector is not testing.
3. Decision: an alarm when ``|Delta_m| >= min_mass`` and ``|Delta_m| >= z std(Delta_m)``, in
   the window or in one a third as long (an exponential window dilutes a change with what came
   before it: the short one sees a large change sooner), once the learner has seen
   ``arm_after`` seconds of motion (its own transient comes with the first motion, however long
   the arm rested before it) and ``hold`` seconds after an alarm. The fits are solved and
   tested every ``every`` seconds (10 ms), not every sample: a change takes the test a large
   part of a second to become clear, and the solves are the detector's costliest step.
4. Onsets. A window fit is blind to the part of a change the learner has already absorbed
   (in a slow move it follows much of a pick-up before the window sees it), so the detector
   also keeps :data:`ONSETS` hypotheses of a change that began at an onset, one every
   :data:`ONSET_SPACING` s (Willsky & Jones 1976). Under a change ``Delta`` at an onset, the
   learner's parameters move by ``D Delta`` and its errors by ``S Delta``, the signature ``S =
   X (E_b - D)`` (``E_b`` the body's columns), with ``D <- D + K S`` (``K`` the learner's gain,
   :meth:`PayloadDetector.absorb`). Each onset fits ``Delta`` on its signature to the errors
   since then (whitened as the windows' rows, the payload prior as ridge) and raises an alarm
   at ``ONSET_MASS min_mass`` and ``z`` standard deviations once :data:`ONSET_AGE` s old, for
   a mass the body can lose (:data:`FEASIBLE_Z`).

On an alarm the learner goes back to what it had learned before the change and re-learns the
payload on its own: the detector keeps a few snapshots of the learner's parameters, a window
apart, and the one at least two windows old is the baseline (3 s by default: an alarm that late
after the change still finds a baseline the change had not bent); after an onset's alarm, the
newest one taken :data:`ONSET_SPACING` s before the onset. The learner restores it,
gives the payload body a payload prior (independent of the rest) and, for ``hold`` seconds,
learns only that body: a payload's mass enters the torques only in combinations with the
bodies before it, which the rest of the robot could otherwise absorb.

The change reported is measured against the baseline, not read from the learner's parameters
(which go on to share it with the bodies before the payload, an unidentifiable split): from the
alarm on, the detector fits the change of the payload body alone to every sample's error under
the baseline, ``tau - X theta_baseline = Y_b Delta + noise``, by least squares without
forgetting and the payload prior as ridge, until the next alarm. Its standard deviation counts
the errors' correlation time.

References:
    Willsky, A., Jones, H. (1976). A generalized likelihood ratio approach to the detection and
    estimation of jumps in linear systems. IEEE Trans. Automatic Control 21(1), 108-112.
"""

from __future__ import annotations

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from dense_armor import rls
from dense_armor.compiler import dot_last, full_precision

__all__ = ["PayloadDetector", "PayloadDetectorState", "payload_std"]

SNAPSHOTS = 3  # snapshots of the learner's parameters, a window apart (the oldest is the baseline)
WINDOWS = (1.0 / 3.0, 1.0)  # the fits' windows, in units of ``window``
# each window's ``min_mass`` and ``z`` multiplied by these: the short window is noisier, and
# is there for large changes
STRICTER_MASS, STRICTER_Z = (1.5, 1.0), (2.0, 1.0)
# and the short window tests only once the learner has had this many samples since the start
# or the last alarm (a learner still converging looks, over a short window, like a change)
SHORT_AFTER = 3000
#: s, the blocks of the score's batch means (an onset's shortest fit) ...
BLOCK = 0.5
#: ... their memory, s, ...
BLOCK_MEMORY = 60.0
#: ... and how many finished blocks are held back before they count (they cover 3 s).
HELD = 6
#: The change hypotheses: this many onsets, ONSET_SPACING s apart (they cover 3 s).
ONSETS = 6
ONSET_SPACING = 0.5
#: s of samples an onset's fit has before it is tested (fewer fit a transient, not a change).
ONSET_AGE = 0.5
#: An onset's fit raises an alarm at ``ONSET_MASS min_mass`` and ``z`` standard deviations, ...
ONSET_MASS = 4.0 / 3.0
#: ... and only if it is a mass the body can lose: what it carries at the onset plus the change
#: is at least -FEASIBLE_Z standard deviations (a drop of more than the body carries is misfit).
FEASIBLE_Z = 4.0


def _samples(seconds, rate) -> jax.Array:
    """() int32, a period in samples: at least one."""
    return jnp.maximum(jnp.round(seconds * rate), 1).astype(jnp.int32)


def payload_std(mass: float = 5.0, radius: float = 0.2) -> np.ndarray:
    """Prior standard deviations (10,) of a payload change: a mass of about ``mass`` kg whose
    centre of mass and extent are within about ``radius`` m of the link origin."""
    return np.array([mass] + [mass * radius] * 3 + [mass * radius**2] * 6)


class OnsetBank(NamedTuple):
    """The change hypotheses of :class:`PayloadDetector`, ``H =`` :data:`ONSETS` onsets
    :data:`ONSET_SPACING` s apart (the newest replaces the oldest).

    Attributes:
        D: (p, H, 10) how much of a change at each onset the learner has absorbed: its
            parameters are ``D[:, h] Delta`` off what they would be without it.
        A: (H, 10, 10) ``sum S' S`` since each onset, ``S`` the change's signature in the
            whitened errors; b: (H, 10) ``sum S' e``.
        age: (H,) int32, samples since each onset, itself included (0: none yet).
        mass: (H,) kg, the mass the body can lose at each onset (:meth:`PayloadDetector.step`).
    """

    D: jax.Array
    A: jax.Array
    b: jax.Array
    age: jax.Array
    mass: jax.Array


class ScoreMeans(NamedTuple):
    """Batch means of the window fits' score ``u = Y_b' e`` (10,), whitened rows and errors.

    Attributes:
        block: (10,) ``sum u`` over the current block; block_power: (10, 10) ``sum u u'``.
        held: (HELD, 10, 10) the last finished blocks' ``(sum u)(sum u)'``, newest first;
            held_power: (HELD, 10, 10) their ``sum u u'``.
        long: (10, 10) exponentially weighted sum of the blocks' ``(sum u)(sum u)'`` once
            released; long_power: (10, 10) the same of their ``sum u u'``.
    """

    block: jax.Array
    block_power: jax.Array
    held: jax.Array
    held_power: jax.Array
    long: jax.Array
    long_power: jax.Array


class PayloadDetectorState(NamedTuple):
    """State of :class:`PayloadDetector`.

    Attributes:
        A: (3, 10, 10) the fits' ``sum Y_b' Y_b``: each window's, exponentially weighted (rows
            whitened by the errors' prior covariance), then the change's since the last alarm
            (rows whitened by the noise only, errors under the baseline).
        b: (3, 10) the fits' ``sum Y_b' e``, the same way.
        since: () int32, samples since the start or the last alarm.
        moved: () int32, samples in motion (a joint faster than the learner's Coulomb width)
            since the start: the first test waits for ``arm_after`` seconds of them.
        tested: (3 + H, 10) the fitted changes at the last test and tested_std: (3 + H,) their
            masses' standard deviations (:meth:`PayloadDetector.fits`).
        alarmed: () bool, an alarm has been raised (the next test waits ``hold``, not
            ``arm_after``).
        snapshots: (SNAPSHOTS, p) the learner's parameters, every window, newest first.
        baseline: (p,) the learner's parameters before the last change, which a change is
            measured from: its parameters at the start, then at each alarm the baseline's.
        onsets: the change hypotheses (:class:`OnsetBank`).
        scores: the score's batch means (:class:`ScoreMeans`).
    """

    A: jax.Array
    b: jax.Array
    since: jax.Array
    moved: jax.Array
    tested: jax.Array
    tested_std: jax.Array
    alarmed: jax.Array
    snapshots: jax.Array
    baseline: jax.Array
    onsets: OnsetBank
    scores: ScoreMeans


class PayloadDetector(eqx.Module):
    """A generalised likelihood-ratio test for a change of one body's inertial parameters.

    See the module docstring. Times are in seconds; the learner passes its sampling rate.

    Attributes:
        window: s, the exponential window of the fit (its time constant).
        min_mass: kg, the smallest mass change that raises an alarm.
        z: the fitted mass change must be at least ``z`` standard deviations.
        arm_after: s of motion before the first test (the learner's own transient).
        hold: s after an alarm before the next test (the learner re-learns the body).
        every: s between tests (at most one a sample).
        prior: (10,) standard deviations of a payload change (:func:`payload_std`): the fit's
            ridge, and the covariance added to the body's parameters on an alarm.
    """

    window: float | jax.Array = 1.5
    min_mass: float | jax.Array = 0.6
    z: float | jax.Array = 5.0
    arm_after: float | jax.Array = 10.0
    hold: float | jax.Array = 3.0
    every: float | jax.Array = 0.01
    prior: jax.Array | np.ndarray = eqx.field(default_factory=payload_std)

    def __check_init__(self):
        for name, rule in (("window", lambda v: v > 0), ("min_mass", lambda v: v >= 0), ("z", lambda v: v >= 0),
                           ("arm_after", lambda v: v >= 0), ("hold", lambda v: v >= 0), ("every", lambda v: v >= 0)):
            value = getattr(self, name)
            if isinstance(value, (int, float)) and not (np.isfinite(value) and rule(value)):
                raise ValueError(f"PayloadDetector {name} out of range, got {value!r}")
        prior = np.asarray(self.prior) if not isinstance(self.prior, jax.core.Tracer) else None
        if prior is not None and (prior.shape != (10,) or not np.all(np.isfinite(prior)) or not np.all(prior > 0)):
            raise ValueError(f"PayloadDetector prior: expected 10 positive standard deviations, got {self.prior!r}")

    def init(self, params, dtype) -> PayloadDetectorState:
        """Nothing seen; ``params`` (p,) the learner's parameters."""
        params = jnp.asarray(params, dtype)
        fits, p = len(WINDOWS) + 1, params.shape[-1]
        square, held = jnp.zeros((10, 10), dtype), jnp.zeros((HELD, 10, 10), dtype)
        return PayloadDetectorState(
            A=jnp.zeros((fits, 10, 10), dtype), b=jnp.zeros((fits, 10), dtype), since=jnp.zeros((), jnp.int32),
            moved=jnp.zeros((), jnp.int32),
            tested=jnp.zeros((fits + ONSETS, 10), dtype), tested_std=jnp.zeros(fits + ONSETS, dtype),  # a test at since = 0
            alarmed=jnp.zeros((), bool), snapshots=jnp.broadcast_to(params, (SNAPSHOTS, p)), baseline=params,
            onsets=OnsetBank(jnp.zeros((p, ONSETS, 10), dtype), jnp.zeros((ONSETS, 10, 10), dtype),
                             jnp.zeros((ONSETS, 10), dtype), jnp.zeros(ONSETS, jnp.int32), jnp.zeros(ONSETS, dtype)),
            scores=ScoreMeans(jnp.zeros(10, dtype), square, held, held, square, square),
        )

    @full_precision
    def fits(self, state: PayloadDetectorState, correlation, rate):
        """The ridge fits of the body's change: each window's, the change's since the last
        alarm, then each onset's (see the module docstring).

        Returns:
            ``(Delta, mass_std)``: (3 + H, 10) the fitted changes and (3 + H,) their masses'
            standard deviations, the errors' correlation time counted, or each fit's score's
            if larger (the payload prior's own before any sample).
        """
        dtype = state.b.dtype
        A, b = (jnp.concatenate([x, y]) for x, y in ((state.A, state.onsets.A), (state.b, state.onsets.b)))
        mass = jnp.broadcast_to(jnp.eye(10, dtype=dtype)[0], b.shape)
        solved = rls.spd_solve(A + jnp.diag(1.0 / jnp.asarray(self.prior, dtype) ** 2), jnp.stack([b, mass], -1))
        # an exponential window's weights count twice in its variance: 1 / (1 + lam)
        weights = jnp.concatenate([1.0 / (1.0 + self._lam(dtype, rate)), jnp.ones(1 + ONSETS, dtype)])
        # each fit's mass is g' b: its score's correlation time along g, from the batch means
        g, scores = solved[..., 1], state.scores
        power = jnp.einsum("ki,ij,kj->k", g, scores.long_power, g)
        own = jnp.einsum("ki,ij,kj->k", g, scores.long, g) / jnp.where(power > 0, power, 1.0)
        variance = solved[:, 0, 1] * weights * jnp.maximum(jnp.maximum(correlation, 1.0), own)
        return solved[..., 0], jnp.sqrt(jnp.maximum(variance, 0.0))

    def _lam(self, dtype, rate):
        """(2,) the windows' forgetting factors per sample."""
        return jnp.exp(-1.0 / (jnp.asarray(self.window, dtype) * jnp.array(WINDOWS, dtype) * jnp.asarray(rate, dtype)))

    def moved_enough(self, state: PayloadDetectorState, rate) -> jax.Array:
        """() bool: ``arm_after`` seconds of motion seen (the learner's own transient is past)."""
        return state.moved >= jnp.asarray(self.arm_after, state.b.dtype) * rate

    def settling(self, state: PayloadDetectorState, rate) -> jax.Array:
        """() bool: within ``hold`` seconds after an alarm (the learner learns the body only)."""
        return state.alarmed & (state.since < jnp.asarray(self.hold, state.b.dtype) * rate)

    @full_precision
    def step(self, state: PayloadDetectorState, Xw, ew, r, L, e_baseline, params, mass, columns: slice, correlation,
             rate, valid, moving):
        """Test the body's parameters for a change, then learn the sample into the fits.

        Args:
            Xw: (n, p) the learner's rows and ew: (n,) its prior errors, whitened by each
                joint's noise std.
            r: (n,) each row's widening, the inverse square root of its band's excess.
            L: (n, n) the Cholesky factor of the widened errors' prior covariance: the fits'
                rows and errors are ``L^-1 r X`` and ``L^-1 r e``.
            e_baseline: (n,) the errors under :attr:`PayloadDetectorState.baseline`, whitened
                by the noise std (for the change's fit against the baseline).
            params: (p,) the learner's current parameters; ``columns`` the body's among them;
                mass: () kg, what the body carries, the most a drop can take (the whole-robot
                learner's: the body's mass and the mass it has added to the links before it).
            correlation: () the errors' integrated autocorrelation time, samples (>= 1).
            rate: samples per second.
            valid: () bool; an invalid sample changes nothing.
            moving: () bool, the arm moves (a sample of motion for ``arm_after``).

        Returns:
            ``(state, alarm, baseline, change, std, signature)``: the new state, () bool, the
            learner's parameters before the change (p,) (to restore on an alarm), the change
            since the last alarm (10,) with its mass's standard deviation (), both fitted
            at the last test (to the samples before it), and each onset's signature (n, H, 10)
            for :meth:`absorb` once the learner has learned the sample.
        """
        dtype = state.b.dtype
        rate = jnp.asarray(rate, dtype)
        min_mass, z_min = jnp.asarray(self.min_mass, dtype), jnp.asarray(self.z, dtype)
        # the fits to the samples before this one, at a test; else those of the last test
        testing = state.since % _samples(jnp.asarray(self.every, dtype), rate) == 0
        estimate, std = jax.lax.cond(testing, lambda: self.fits(state, correlation, rate),
                                     lambda: (state.tested, state.tested_std))
        change = len(WINDOWS)  # then the change since the last alarm, then the onsets
        m, m_std = estimate[change + 1 :, 0], std[change + 1 :]
        armed = jnp.where(state.alarmed, state.since >= jnp.asarray(self.hold, dtype) * rate, self.moved_enough(state, rate))
        # two windows: the long one for small changes, a third as long for quick large ones
        # (an exponential window dilutes a change with what came before it)
        mass_change = jnp.abs(estimate[:change, 0])
        passes = (mass_change >= jnp.array(STRICTER_MASS, dtype) * min_mass) & (
            mass_change >= jnp.array(STRICTER_Z, dtype) * z_min * std[:change])
        passes = passes & jnp.stack([state.since >= SHORT_AFTER, jnp.ones((), bool)])  # (short, long) windows
        # and each onset's fit: a change since then, of a mass the body can lose
        bank = state.onsets
        onset_passes = ((bank.age >= jnp.maximum(ONSET_AGE * rate, 1.0)) & (jnp.abs(m) >= ONSET_MASS * min_mass)
                        & (jnp.abs(m) >= z_min * m_std) & (bank.mass + m + FEASIBLE_Z * m_std >= 0.0))
        alarm = valid & testing & armed & (jnp.any(passes) | jnp.any(onset_passes))
        # snapshots of the learner's parameters every window; on an alarm, the baseline is
        # the newest one at least two windows old or, on an onset's alarm, the newest one
        # taken an onset spacing before that onset (the change cannot have bent it)
        period = _samples(jnp.asarray(self.window, dtype), rate)
        due = valid & (state.since % period == 0)
        snapshots = jnp.where(due, jnp.concatenate([params[None], state.snapshots[:-1]]), state.snapshots)
        spacing = _samples(ONSET_SPACING, rate)
        fired = jnp.argmax(jnp.where(onset_passes, jnp.abs(m) / m_std, -1.0))
        ages = (state.since - 1) % period + 1 + period * jnp.arange(SNAPSHOTS)  # samples ago, newest first
        before = ages >= bank.age[fired] + spacing
        chosen = jnp.where(jnp.any(onset_passes) & jnp.any(before), jnp.argmax(before), SNAPSHOTS - 1)
        baseline = state.snapshots[chosen]
        # once armed, a new onset every ONSET_SPACING s replaces the oldest
        spawn = valid & armed & (state.since % spacing == 0)
        new = spawn & (jnp.arange(ONSETS) == jnp.argmax(jnp.where(bank.age == 0, jnp.iinfo(jnp.int32).max, bank.age)))
        active = new | (bank.age > 0)
        D = jnp.where(new[None, :, None], 0.0, bank.D)
        # a change at an onset moves the errors by its signature: the body's columns less
        # what the learner has absorbed of it
        Y = Xw[:, columns]
        n = Y.shape[0]
        signature = jnp.where(active[None, :, None], Y[:, None] - (Xw @ D.reshape(D.shape[0], -1)).reshape(n, ONSETS, 10), 0.0)
        whiten = jax.scipy.linalg.solve_triangular(L, jnp.diag(r), lower=True)  # L^-1 r: one small solve
        # the fits' rows transposed, (k, n): each sum of products below runs over the last axis
        whitened = jnp.concatenate([ew[None], Y.T, signature.reshape(n, -1).T]) @ whiten.T
        eb, Yb, Sb = whitened[0], whitened[1:11], whitened[11:].reshape(ONSETS, 10, n)
        # the windows forget, the change since the alarm does not; one product for all sums
        zz = jnp.concatenate([Yb, eb[None], (Y * r[:, None]).T, (e_baseline * r)[None]])
        Z = zz @ zz.T
        YY = jnp.stack([Z[:10, :10], Z[:10, :10], Z[11:21, 11:21]])  # (short, long, change)
        Ye = jnp.stack([Z[:10, 10], Z[:10, 10], Z[11:21, 21]])
        scores = self._scores(state, Z[:10, 10], valid & armed & ~self.settling(state, rate), valid, rate)
        keep = jnp.concatenate([self._lam(dtype, rate), jnp.ones(1, dtype)])
        A = jnp.where(valid, keep[:, None, None] * state.A + YY, state.A)
        b = jnp.where(valid, keep[:, None] * state.b + Ye, state.b)
        fresh = new[:, None]
        onsets = OnsetBank(
            D=D, A=jnp.where(fresh[..., None], 0.0, bank.A) + dot_last(Sb[:, :, None], Sb[:, None]),
            b=jnp.where(fresh, 0.0, bank.b) + dot_last(Sb, eb),
            age=jnp.where(new, 1, jnp.where(active, bank.age + 1, 0)), mass=jnp.where(new, mass, bank.mass))
        onsets = jax.tree.map(lambda a, f: jnp.where(valid, a, f), onsets, bank)
        new_state = PayloadDetectorState(A, b, jnp.where(valid, state.since + 1, state.since),
                                         jnp.where(valid & moving, state.moved + 1, state.moved), estimate, std, state.alarmed,
                                         snapshots, state.baseline, onsets, scores)
        # after an alarm: empty fits and onsets, snapshots of the restored baseline; the batch
        # means keep what they have released, this sample's release included (the held blocks
        # may have seen the change)
        empty = self.init(baseline, dtype)
        restart = empty._replace(alarmed=jnp.ones((), bool), moved=new_state.moved,
                                 snapshots=jnp.broadcast_to(baseline, snapshots.shape),
                                 scores=empty.scores._replace(long=scores.long, long_power=scores.long_power))
        new_state = jax.tree.map(lambda a, f: jnp.where(alarm, f, a), new_state, restart)
        signature = jnp.where(valid & ~alarm, signature, 0.0)
        return new_state, alarm, baseline, estimate[change], std[change], signature

    def _scores(self, state: PayloadDetectorState, u, counting, valid, rate) -> ScoreMeans:
        """The batch means with this sample's score ``u`` (10,) (counted if ``counting``); at a
        block's end it is held, and the oldest held block released into the sums."""
        dtype = u.dtype
        means = state.scores
        u = jnp.where(counting, u, 0.0)
        block, block_power = means.block + u, means.block_power + jnp.outer(u, u)
        length = _samples(BLOCK, rate)
        ends = valid & (state.since % length == length - 1)
        keep = 1.0 - length.astype(dtype) / jnp.maximum(BLOCK_MEMORY * rate, length.astype(dtype))
        ended = ScoreMeans(
            block=jnp.zeros_like(block), block_power=jnp.zeros_like(block_power),
            held=jnp.concatenate([jnp.outer(block, block)[None], means.held[:-1]]),
            held_power=jnp.concatenate([block_power[None], means.held_power[:-1]]),
            long=keep * means.long + means.held[-1], long_power=keep * means.long_power + means.held_power[-1])
        going = means._replace(block=block, block_power=block_power)
        return jax.tree.map(lambda e, g: jnp.where(ends, e, g), ended, going)

    def absorb(self, state: PayloadDetectorState, gain, signature) -> PayloadDetectorState:
        """Follow how much of each onset's change the learner has absorbed, once it has
        learned the sample: ``D += K S``, ``gain`` (p, n) its ``K`` (``w += K e``)."""
        bank = state.onsets
        absorbed = (gain @ signature.reshape(signature.shape[0], -1)).reshape(bank.D.shape)
        return state._replace(onsets=bank._replace(D=bank.D + absorbed))
