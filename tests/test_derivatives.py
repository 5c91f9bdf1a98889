"""Derivatives on a log's own stamps: zero-phase and causal, whole or in chunks."""

from __future__ import annotations

import numpy as np
import pytest

from dense_armor import derivatives


def _signal(rate=1000.0, seconds=6.0, jitter=0.3, seed=0):
    """Irregular stamps (+-jitter of the period) and a smooth two-joint motion, with its exact
    velocities and accelerations."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate + rng.uniform(-jitter, jitter, int(seconds * rate)) / rate
    t[0] = max(t[0], 0.0)
    w = np.array([[1.3, 2.1], [0.7, 3.0]])
    q = np.sin(w[0] * t[:, None]) + 0.5 * np.cos(w[1] * t[:, None])
    qd = w[0] * np.cos(w[0] * t[:, None]) - 0.5 * w[1] * np.sin(w[1] * t[:, None])
    qdd = -w[0] ** 2 * np.sin(w[0] * t[:, None]) - 0.5 * w[1] ** 2 * np.cos(w[1] * t[:, None])
    return t, q, qd, qdd


@pytest.mark.parametrize("rate", [100.0, 1000.0])
def test_zero_phase_on_jittered_stamps(rate):
    t, q, qd, qdd = _signal(rate)
    est_qd, est_qdd = derivatives.zero_phase(t, q, derivatives.default_cutoff(rate))
    inner = (t > 0.2) & (t < t[-1] - 0.2)
    assert np.abs(est_qd - qd)[inner].max() < 2e-3
    assert np.abs(est_qdd - qdd)[inner].max() < 2e-2
    # the ends too, within 10 % of the peak acceleration (a plain reflection flips the
    # curvature there: errors near the peak itself)
    assert np.abs(est_qdd - qdd).max() < 0.1 * np.abs(qdd).max()


def test_zero_phase_filters_encoder_steps_that_finite_differences_amplify():
    t, q, _, qdd = _signal(1000.0, seed=1)
    encoder = np.round(q / 2.0**-19) * 2.0**-19
    _, est = derivatives.zero_phase(t, encoder, 20.0)
    raw = np.gradient(np.gradient(encoder, t, axis=0), t, axis=0)
    inner = (t > 0.2) & (t < t[-1] - 0.2)
    assert np.sqrt(np.mean((est - qdd)[inner] ** 2)) < 0.02 * np.sqrt(np.mean((raw - qdd)[inner] ** 2))


def test_causal_lags_by_about_its_filter_and_uses_no_future():
    t, q, qd, _ = _signal(1000.0, seed=2)
    est, _ = derivatives.causal(t, q, 20.0)
    # no future: the estimate up to k does not change when later samples change
    changed = q.copy()
    changed[3000:] += 1.0
    est2, _ = derivatives.causal(t, changed, 20.0)
    np.testing.assert_array_equal(est[:3000], est2[:3000])
    # it lags: the best shift of the true velocity is about 2 / (2 pi 20) s for two poles
    shifts = np.arange(0, 60)
    errors = [np.mean((est[100 + s :] - qd[100 : len(qd) - s]) ** 2) for s in shifts]
    assert 5 <= shifts[int(np.argmin(errors))] <= 30


@pytest.mark.parametrize("causal", [False, True])
def test_chunks_agree_with_the_whole_log(causal):
    t, q, qd, qdd = _signal(1000.0, seconds=8.0, seed=3)
    tau = np.cos(q)
    whole = derivatives.Differentiator(20.0, 1000.0, causal=causal, chunk=100000)
    (one,) = whole.push({"t": t, "q": q, "tau": tau}) + whole.flush()
    pieces = derivatives.Differentiator(20.0, 1000.0, causal=causal, chunk=1500)
    parts = []
    for k in range(0, len(t), 777):
        parts += pieces.push({"t": t[k : k + 777], "q": q[k : k + 777], "tau": tau[k : k + 777]})
    parts += pieces.flush()
    joined = {key: np.concatenate([p[key] for p in parts]) for key in parts[0]}
    np.testing.assert_array_equal(joined["t"], t)
    np.testing.assert_array_equal(joined["tau"], tau)
    tol = 1e-12 if causal else 2e-4  # zero-phase: each window on its own grid
    np.testing.assert_allclose(joined["qd"], one["qd"], atol=tol)
    np.testing.assert_allclose(joined["qdd"], one["qdd"], atol=100 * tol)


def test_a_live_loop_pushing_one_sample_at_a_time_gets_the_whole_logs_causal_derivatives():
    """What a controller runs: each tick's sample pushed alone. The estimates are the whole
    log's; the first sample comes out with the second (its derivative is their difference's)."""
    t, q, qd, qdd = _signal(1000.0, seconds=2.0, seed=5)
    whole = derivatives.Differentiator(20.0, 1000.0, causal=True)
    (one,) = whole.push({"t": t, "q": q})
    live = derivatives.Differentiator(20.0, 1000.0, causal=True)
    ticks = [live.push({"t": t[k : k + 1], "q": q[k : k + 1]}) for k in range(len(t))]
    assert ticks[0] == [] and [len(tick[0]["t"]) for tick in ticks[1:3]] == [2, 1]
    streamed = {key: np.concatenate([tick[0][key] for tick in ticks[1:]]) for key in ("t", "qd", "qdd")}
    np.testing.assert_array_equal(streamed["t"], t)
    for key in ("qd", "qdd"):
        np.testing.assert_allclose(streamed[key], one[key], rtol=1e-9, atol=1e-9 * np.abs(one[key]).max())
    # the estimator itself, a sample at a time (given the rate): the first sample's derivative 0
    state, alone = None, []
    for k in range(len(t)):
        est, state = derivatives.causal(t[k : k + 1], q[k : k + 1], 20.0, state, rate=1000.0)
        alone.append(est)
    alone = np.concatenate(alone)
    np.testing.assert_array_equal(alone[0], 0.0)
    np.testing.assert_allclose(alone[1:], one["qd"][1:], rtol=1e-9, atol=1e-9 * np.abs(one["qd"]).max())
    # a controller's derivative is a filtered, lagging one, not noise: it follows the motion
    assert np.abs(streamed["qd"][500:] - qd[500 - 12 : len(qd) - 12]).max() < 0.1 * np.abs(qd).max()


def test_logged_velocities_are_kept_and_resampling_lands_on_a_grid():
    t, q, qd, qdd = _signal(1000.0, seed=4)
    d = derivatives.Differentiator(20.0, 1000.0)
    (out,) = d.push({"t": t, "q": q, "qd": qd}) + d.flush()
    np.testing.assert_array_equal(out["qd"], qd)
    inner = (t > 0.2) & (t < t[-1] - 0.2)
    assert np.abs(out["qdd"] - qdd)[inner].max() < 2e-2
    d = derivatives.Differentiator(20.0, 1000.0, resample=250.0)
    out = d.push({"t": t, "q": q, "tau": np.sin(t)[:, None]}) + d.flush()
    grid = np.concatenate([o["t"] for o in out])
    np.testing.assert_allclose(np.diff(grid), 1 / 250.0, atol=1e-9)
    resampled = np.concatenate([o["q"] for o in out])
    exact = _signal(1000.0, seed=4)  # same motion, evaluated at the grid
    w = np.array([[1.3, 2.1], [0.7, 3.0]])
    np.testing.assert_allclose(resampled, np.sin(w[0] * grid[:, None]) + 0.5 * np.cos(w[1] * grid[:, None]), atol=1e-6)
    del exact
    with pytest.raises(ValueError, match="causal"):
        derivatives.Differentiator(20.0, 1000.0, causal=True, resample=100.0)


@pytest.mark.parametrize("resample", [None, 500.0])
def test_an_epoch_clock_estimates_as_well_as_one_from_zero(tmp_path, resample):
    """A bag's stamps are epoch seconds (1.7e9 s), whose floats are 2.4e-7 s apart: a wobble
    of 2e-4 of a 1 kHz step, which a second derivative on them would magnify."""
    from dense_armor.logs import load_log

    rng = np.random.default_rng(1)
    t = np.arange(10000) / 1000 + rng.uniform(-0.3, 0.3, 10000) / 1000
    t[0] = 0.0
    q = np.stack([np.sin(1.5 * t), 0.5 * np.cos(2 * t)], 1)
    qdd = np.stack([-2.25 * np.sin(1.5 * t), -2 * np.cos(2 * t)], 1)
    out = {}
    for origin in (0.0, 1.7e9):
        np.savez(tmp_path / "log.npz", t=t + origin, q=q, tau=0 * q)
        log = load_log(tmp_path / "log.npz", ["a", "b"], chunk=2000, resample=resample)  # the command line's chunks
        out[origin] = log.t - origin, log.qdd
    np.testing.assert_allclose(out[1.7e9][0], out[0.0][0], atol=3e-7)
    if resample is None:
        assert np.sqrt(np.mean((out[1.7e9][1] - qdd) ** 2)) < 0.005
    assert np.sqrt(np.mean((out[1.7e9][1] - out[0.0][1]) ** 2)) < 1e-3 * np.sqrt(np.mean(qdd**2))
