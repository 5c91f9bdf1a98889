"""Tests for dense_armor.drift: Hampel and CUSUM drift detectors."""

import collections

import chex
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dense_armor import drift

jax.config.update("jax_enable_x64", True)


# --- helpers --------------------------------------------------------------------------


@jax.jit
def _scan(det, state, zs, valid):
    """Run a detector over a stream (T, n) under lax.scan: (final state, alarms (T, n))."""
    return jax.lax.scan(lambda s, zv: det.step(s, zv[0], zv[1]), state, (zs, valid))


_step = jax.jit(lambda det, s, z, v: det.step(s, z, v))
# Many streams of one configuration at once (leading axis of zs), shared valid flags.
_vscan = jax.jit(jax.vmap(_scan, in_axes=(None, None, 0, None)))


def _hampel_ref(zs, ok, radius, n_sigmas, min_sigma=0.0):
    """Plain NumPy Hampel identifier, one joint at a time."""
    T, n = zs.shape
    alarms = np.zeros((T, n), bool)
    for j in range(n):
        win = collections.deque(maxlen=radius)
        for t in range(T):
            z = zs[t, j]
            if not (ok[t, j] and np.isfinite(z)):
                continue
            if len(win) == radius:
                w = np.array(win)
                med = np.median(w)
                mad = np.median(np.abs(w - med))
                alarms[t, j] = abs(z - med) > n_sigmas * max(1.4826 * mad, min_sigma)
            win.append(z)
    return alarms


def _cusum_ref(zs, ok, radius, ref_mult, k, h, two_sided, reference, min_std=1e-6):
    """Plain NumPy CUSUM with a lagged (adaptive) or first-L (fixed) reference."""
    T, n = zs.shape
    L = radius * ref_mult
    alarms = np.zeros((T, n), bool)
    sums = np.zeros((n, 2))
    for j in range(n):
        recent = collections.deque()
        ref = collections.deque(maxlen=L)
        sp = sn = 0.0
        for t in range(T):
            z = zs[t, j]
            if not (ok[t, j] and np.isfinite(z)):
                continue
            if len(ref) == L:
                r = np.array(ref)
                u = (z - r.mean()) / max(r.std(ddof=1), min_std)
                sp = max(0.0, sp + u - k)
                if two_sided:
                    sn = max(0.0, sn - u - k)
                if sp > h or (two_sided and sn > h):
                    alarms[t, j] = True
                    sp = sn = 0.0
            if reference == "adaptive":
                if len(recent) == radius:
                    ref.append(recent.popleft())
                recent.append(z)
            elif len(ref) < L:
                ref.append(z)
        sums[j] = sp, sn
    return alarms, sums


# Every scan in this file runs a (400, 3) stream, so each detector configuration compiles once.
T, N = 400, 3


def _stream(seed, T=T, n=N, p_invalid=0.1):
    """Gaussian noise with outliers, a step in joint 0, rejected samples and NaNs."""
    rng = np.random.default_rng(seed)
    zs = rng.standard_normal((T, n))
    zs[T // 2 :, 0] += 4.0
    zs[rng.random((T, n)) < 0.02] *= 8.0
    valid = rng.random(T) > p_invalid
    zs[rng.integers(0, T, 3), rng.integers(0, n, 3)] = np.nan  # non-finite: ignored
    ok = valid[:, None] & np.isfinite(zs)
    return zs, valid, ok


def _first_alarm(alarms, start=0):
    idx = np.flatnonzero(alarms[start:])
    return start + idx[0] if idx.size else None


# --- exact semantics against plain NumPy ---------------------------------------------


@pytest.mark.parametrize("radius,n_sigmas,min_sigma", [(20, 3.0, 0.0), (7, 2.5, 0.5)])
def test_hampel_matches_numpy_reference(radius, n_sigmas, min_sigma):
    det = drift.Hampel(radius=radius, n_sigmas=n_sigmas, min_sigma=min_sigma)
    for seed in (0, 1):
        zs, valid, ok = _stream(seed)
        _, alarms = _scan(det, det.init(3), jnp.asarray(zs), jnp.asarray(valid))
        expected = _hampel_ref(zs, ok, radius, n_sigmas, min_sigma)
        np.testing.assert_array_equal(np.asarray(alarms), expected)
        assert expected.any()


@pytest.mark.parametrize("reference", ["adaptive", "fixed"])
@pytest.mark.parametrize("two_sided", [True, False])
def test_cusum_matches_numpy_reference(reference, two_sided):
    det = drift.CUSUM(h=6.0, two_sided=two_sided, reference=reference)
    for seed in (0, 1):
        zs, valid, ok = _stream(seed)
        zs[60:80, 1] -= 3.0  # a downward excursion on joint 1
        ok = valid[:, None] & np.isfinite(zs)
        state, alarms = _scan(det, det.init(3), jnp.asarray(zs), jnp.asarray(valid))
        expected, sums = _cusum_ref(zs, ok, 10, 3, 0.5, 6.0, two_sided, reference)
        np.testing.assert_array_equal(np.asarray(alarms), expected)
        np.testing.assert_allclose(state.s_pos, sums[:, 0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(state.s_neg, sums[:, 1], rtol=1e-9, atol=1e-12)
        assert expected.any()


def test_documented_defaults():
    h, c = drift.Hampel(), drift.CUSUM()
    assert (h.radius, float(h.n_sigmas)) == (20, 3.0)
    assert (c.radius, c.ref_mult, float(c.k), float(c.h), c.two_sided, c.reference) == (
        10, 3, 0.5, 20.0, True, "adaptive",
    )
    assert c.ref_len == 30


# --- detection ------------------------------------------------------------------------


@pytest.mark.parametrize("reference", ["adaptive", "fixed"])
def test_cusum_detects_a_step_quickly(reference):
    """A 3-sigma step at sample 200 is flagged within 15 samples; the other joint stays quiet."""
    det = drift.CUSUM(reference=reference)
    seeds = range(10)
    zs = np.stack([np.random.default_rng(s).standard_normal((T, N)) for s in seeds])
    zs[:, 200:, 0] += 3.0
    _, alarms = _vscan(det, det.init(N), zs, np.ones(T, bool))
    alarms = np.asarray(alarms)
    early = [alarms[i, :200].any() for i in range(len(seeds))]
    assert sum(early) <= 1
    for i in range(len(seeds)):
        first = _first_alarm(alarms[i, :, 0], 200)
        assert first is not None and first - 200 <= 15, (i, first)


@pytest.mark.parametrize("two_sided", [True, False])
def test_cusum_downward_step_needs_two_sided(two_sided):
    det = drift.CUSUM(two_sided=two_sided)
    zs = np.random.default_rng(0).standard_normal((T, N))
    zs[200:] -= 3.0
    _, alarms = _scan(det, det.init(N), zs, np.ones(T, bool))
    first = _first_alarm(np.asarray(alarms)[:, 0], 200)
    if two_sided:
        assert first is not None and first - 200 <= 15
    else:
        assert first is None


def test_hampel_detects_a_large_step_at_once_and_then_adapts():
    det = drift.Hampel()
    zs = np.random.default_rng(0).standard_normal((T, N))
    zs[200:] += 10.0
    _, alarms = _scan(det, det.init(N), zs, np.ones(T, bool))
    alarms = np.asarray(alarms)[:, 0]
    assert alarms[200]
    # Alarmed values enter the window, so within radius / 2 + 1 samples the window's
    # MAD (then its median) takes the new level in and the run of alarms ends; were
    # alarmed values kept out, every sample after 200 would alarm.
    end_of_run = 200 + int(np.argmin(alarms[200:]))
    assert end_of_run <= 211, end_of_run
    assert alarms[200:].mean() < 0.2


@pytest.mark.parametrize("reference", ["adaptive", "fixed"])
def test_cusum_stationary_noise_gives_no_alarm_on_most_seeds(reference):
    """h = 20 over 400 N(0, 1) samples: at most 2 of 20 seeds raise any alarm on any joint."""
    det = drift.CUSUM(h=20.0, reference=reference)
    zs = np.stack([np.random.default_rng(s).standard_normal((T, N)) for s in range(20)])
    _, alarms = _vscan(det, det.init(N), zs, np.ones(T, bool))
    assert np.asarray(alarms).any(axis=(1, 2)).sum() <= 2


def test_no_alarm_until_the_windows_are_full():
    z = np.zeros((T, N))
    z[::2] = 1.0  # alternate 0, 1: MAD > 0, std > 0
    for det, first_eligible in (
        (drift.Hampel(radius=20), 20),
        (drift.CUSUM(radius=10, ref_mult=3, h=5.0), 40),
        (drift.CUSUM(radius=10, ref_mult=3, h=5.0, reference="fixed"), 30),
    ):
        for t, expect in ((first_eligible - 1, False), (first_eligible, True)):
            zt = z.copy()
            zt[t] = 1e3
            _, alarms = _scan(det, det.init(N), zt, np.ones(T, bool))
            assert bool(np.asarray(alarms)[t, 0]) is expect, (det, t)
            assert not np.asarray(alarms)[:t].any()


# --- invalid samples, scan, vmap, dtype ------------------------------------------------


@pytest.mark.parametrize("det", [drift.Hampel(), drift.CUSUM(h=3.0)])
def test_invalid_sample_leaves_state_unchanged(det):
    zs = np.random.default_rng(0).standard_normal((T, N))
    state, _ = _scan(det, det.init(N), zs, np.ones(T, bool))
    huge = jnp.array([50.0, -50.0, 50.0])

    new, alarm = _step(det, state, huge, False)
    chex.assert_trees_all_equal(new, state)
    assert not np.asarray(alarm).any()

    new, alarm = _step(det, state, jnp.array([np.nan, np.inf, -np.inf]), True)
    chex.assert_trees_all_equal(new, state)
    assert not np.asarray(alarm).any()

    # Per-joint validity: joint 1 rejected, joints 0 and 2 updated (and alarmed).
    new, alarm = _step(det, state, huge, jnp.array([True, False, True]))
    row = lambda tree, j: jax.tree.map(lambda a: a[j], tree)  # noqa: E731
    chex.assert_trees_all_equal(row(new, 1), row(state, 1))
    assert np.asarray(alarm).tolist() == [True, False, True]
    for j in (0, 2):
        assert not all(
            np.array_equal(a[j], b[j]) for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(state))
        )


@pytest.mark.parametrize(
    "det", [drift.Hampel(), drift.CUSUM(h=4.0), drift.CUSUM(h=4.0, reference="fixed")]
)
def test_scan_equals_loop(det):
    zs, valid, _ = _stream(3)
    state_scan, alarms_scan = _scan(det, det.init(3), zs, valid)
    state = det.init(3)
    alarms = []
    for t in range(len(zs)):
        state, a = _step(det, state, zs[t], valid[t])
        alarms.append(np.asarray(a))
    np.testing.assert_array_equal(np.asarray(alarms_scan), np.array(alarms))
    chex.assert_trees_all_close(state_scan, state, rtol=1e-12, atol=1e-12)
    assert np.array(alarms).any()


def test_threshold_sweep_is_a_vmap_compiled_once():
    zs = np.random.default_rng(0).standard_normal((T, N))
    zs[150:, 0] += 2.0
    valid = np.ones(T, bool)

    @jax.jit
    @chex.assert_max_traces(n=1)
    def sweep(hs, ks):
        def one(h, k):
            det = drift.CUSUM(k=k, h=h)
            body = lambda s, zv: det.step(s, zv[0], zv[1])  # noqa: E731
            return jax.lax.scan(body, det.init(N), (zs, valid))[1]

        return jax.vmap(one)(hs, ks)

    hs = jnp.array([2.0, 5.0, 20.0])
    out = sweep(hs, jnp.array([0.5, 0.5, 0.5]))
    sweep(jnp.array([3.0, 4.0, 6.0]), jnp.array([0.2, 0.5, 1.0]))  # no retrace
    for i, h in enumerate([2.0, 5.0, 20.0]):
        det = drift.CUSUM(h=h)
        _, alarms = _scan(det, det.init(N), zs, valid)
        np.testing.assert_array_equal(np.asarray(out[i]), np.asarray(alarms))
    # Lower thresholds alarm at least as often.
    counts = np.asarray(out).sum(axis=(1, 2))
    assert counts[0] >= counts[1] >= counts[2]


def test_dtype_and_shapes():
    for det in (drift.Hampel(), drift.CUSUM()):
        s = det.init(4, jnp.float32)
        new, alarm = jax.eval_shape(det.step, s, np.zeros(4, np.float64), True)
        assert alarm.dtype == jnp.bool_ and alarm.shape == (4,)
        for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(s)):
            assert a.dtype == b.dtype and a.shape == b.shape
    s = drift.CUSUM().init(4, jnp.float32)
    chex.assert_shape((s.recent, s.ref), [(4, 10), (4, 30)])
    chex.assert_shape(drift.Hampel().init(4).window, (4, 20))


def test_bad_hyperparameters_raise():
    with pytest.raises(ValueError, match="reference"):
        drift.CUSUM(reference="sliding")
    for bad in (
        lambda: drift.CUSUM(radius=0),
        lambda: drift.CUSUM(ref_mult=0),
        lambda: drift.CUSUM(radius=1, ref_mult=1),
        lambda: drift.Hampel(radius=0),
    ):
        with pytest.raises(ValueError):
            bad()


def test_detector_is_a_pytree_with_traced_thresholds():
    det = drift.CUSUM(h=7.0)
    leaves = jax.tree.leaves(det)
    assert all(isinstance(x, jax.Array) for x in leaves) and len(leaves) == 3
    assert eqx.tree_equal(det, drift.CUSUM(h=7.0))


# --- the innovation trigger -------------------------------------------------------------

_vscan_each = jax.jit(jax.vmap(_scan, in_axes=(None, None, 0, 0)))


def _innovation_ref(zs, ok, k=3.0, h=40.0, burn_in=10, min_samples=50.0, noise_lam=0.998,
                    gate=9.0, margin=2.0, min_sigma=1e-4):
    """Plain NumPy transcription of drift.Innovation, one joint at a time."""
    T, n = zs.shape
    alarms = np.zeros((T, n), bool)
    for j in range(n):
        seen, weight, var, stat = 0, 0.0, 0.0, 0.0
        for t in range(T):
            z = zs[t, j]
            if not (ok[t, j] and np.isfinite(z)):
                continue
            learning = seen >= burn_in
            armed = learning and weight >= min_samples
            ref = max(var, min_sigma**2) * (1 + margin * np.sqrt(2 / max(weight, 1)))
            if armed:
                stat = max(0.0, stat + z * z / ref - k)
                if stat > h:
                    alarms[t, j] = True
                    stat = 0.0
            if learning:
                entering = min(z * z, gate * ref) if armed else z * z
                weight = noise_lam * weight + 1
                var = var + (entering - var) / weight
            seen += 1
    return alarms


def test_innovation_matches_numpy_reference():
    det = drift.Innovation(h=12.0)
    zs, valid, ok = _stream(4)
    zs = 0.3 * zs
    _, alarms = _scan(det, det.init(N), jnp.asarray(zs), jnp.asarray(valid))
    expected = _innovation_ref(zs, ok, h=12.0)
    np.testing.assert_array_equal(np.asarray(alarms), expected)
    assert expected.any()


@pytest.mark.parametrize("sigma", [1e-3, 1.0, 100.0])
def test_innovation_is_quiet_on_white_noise_of_any_level(sigma):
    """200 streams x 3 joints x 2000 samples of N(0, sigma^2): no alarm (the in-control run
    length at k = 3, h = 40 is far beyond 10^8 samples)."""
    det = drift.Innovation()
    zs = sigma * np.random.default_rng(11).standard_normal((200, 2000, N))
    _, alarms = _vscan_each(det, det.init(N), zs, np.ones((200, 2000), bool))
    assert not np.asarray(alarms).any()


@pytest.mark.parametrize("shift,within", [(10.0, 1), (4.0, 10), (3.0, 30)])
def test_innovation_detects_a_mean_shift(shift, within):
    """A shift of ``shift`` noise standard deviations at sample 300 on joint 0 is flagged within
    ``within`` samples on every one of 50 streams; the other joints stay quiet."""
    det = drift.Innovation()
    zs = 0.01 * np.random.default_rng(12).standard_normal((50, 400, N))
    zs[:, 300:, 0] += shift * 0.01
    _, alarms = _vscan_each(det, det.init(N), zs, np.ones((50, 400), bool))
    alarms = np.asarray(alarms)
    assert not alarms[:, :300].any() and not alarms[:, :, 1:].any()
    delay = np.array([np.flatnonzero(a[300:, 0])[0] for a in alarms])
    assert delay.max() < within, delay.max()


def test_innovation_arms_after_burn_in_and_min_samples():
    det = drift.Innovation(burn_in=5, min_samples=20.0, noise_lam=1.0)
    z = np.random.default_rng(13).standard_normal((T, N))
    for t, expect in ((24, False), (25, True)):
        zt = z.copy()
        zt[t] = 1e3
        _, alarms = _scan(det, det.init(N), zt, np.ones(T, bool))
        assert bool(np.asarray(alarms)[t, 0]) is expect, t
        assert not np.asarray(alarms)[:t].any()


def test_innovation_noise_floor():
    """Exact zeros (a model that fits exactly, sigma = 0): rounding-sized values are below
    the ``min_sigma`` floor, a real error is not."""
    det = drift.Innovation()
    z = np.zeros((T, N))
    z[100::7] = 1e-9
    _, alarms = _scan(det, det.init(N), z, np.ones(T, bool))
    assert not np.asarray(alarms).any()
    z[300, 0] = 0.01
    _, alarms = _scan(det, det.init(N), z, np.ones(T, bool))
    assert np.flatnonzero(np.asarray(alarms)[:, 0]).tolist() == [300]


def test_innovation_invalid_sample_and_reset():
    det = drift.Innovation()
    zs = np.random.default_rng(14).standard_normal((T, N))
    state, _ = _scan(det, det.init(N), zs, np.ones(T, bool))
    new, alarm = _step(det, state, jnp.array([50.0, np.nan, np.inf]), jnp.array([False, True, True]))
    chex.assert_trees_all_equal(new, state)
    assert not np.asarray(alarm).any()
    reset = jax.jit(lambda d, s, w: d.reset(s, w))(det, state, jnp.array([True, False, True]))
    row = lambda tree, j: jax.tree.map(lambda a: a[j], tree)  # noqa: E731
    chex.assert_trees_all_equal(row(reset, 0), row(det.init(N), 0))
    chex.assert_trees_all_equal(row(reset, 1), row(state, 1))
    assert int(state.seen[0]) == T and float(state.weight[0]) > 50


def test_innovation_bad_hyperparameters_raise():
    for kwargs in ({"h": 0.0}, {"k": -1.0}, {"noise_lam": 0.0}, {"noise_lam": 1.5},
                   {"min_samples": 0.0}, {"gate": 0.5}, {"margin": -1.0}, {"min_sigma": -1.0}):
        with pytest.raises(ValueError, match=next(iter(kwargs))):
            drift.Innovation(**kwargs)
    det = drift.Innovation(h=30.0)
    assert all(isinstance(x, jax.Array) for x in jax.tree.leaves(det))
    s = det.init(4, jnp.float32)
    new, alarm = jax.eval_shape(det.step, s, np.zeros(4, np.float64), True)
    assert alarm.shape == (4,) and all(a.dtype == b.dtype for a, b in zip(jax.tree.leaves(new), jax.tree.leaves(s)))
