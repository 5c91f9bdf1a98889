"""Tests for dense_armor.rls: recursive least squares with exponential forgetting."""

import functools

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from dense_armor import rls

jax.config.update("jax_enable_x64", True)


# Jitted once at module level: eager op-by-op dispatch would compile every primitive.
update = jax.jit(rls.update, static_argnames=("directional", "joseph"))
update_rows = jax.jit(rls.update_rows, static_argnames=("joseph",))
predict = jax.jit(rls.predict)
prior_variance = jax.jit(rls.prior_variance)


@functools.partial(jax.jit, static_argnames=("directional", "joseph"))
def _scan(state, X, Y, lam, directional=False, joseph=False, max_trace=None):
    def body(s, xy):
        s = rls.update(
            s, xy[0], xy[1], lam, directional=directional, joseph=joseph, max_trace=max_trace
        )
        return s, s

    return jax.lax.scan(body, state, (X, Y))


def _run(state, X, Y, lam, **kw):
    """Sequential updates over the rows of X under lax.scan: (final state, trajectory)."""
    dt = state.w.dtype
    return _scan(state, jnp.asarray(X, dt), jnp.asarray(Y, dt), lam, **kw)


def _random_state(rng, p, batch=(), dtype=np.float64):
    A = rng.standard_normal((*batch, p, p))
    P = A @ np.swapaxes(A, -1, -2) + 0.1 * np.eye(p)
    return rls.RLSState(w=rng.standard_normal((*batch, p)).astype(dtype), P=P.astype(dtype))


def _at(tree, j):
    """Index every leaf (on the host, so no per-shape compile)."""
    return jax.tree.map(lambda a: np.asarray(a)[j], tree)


# --- the design document's hand case -------------------------------------------------


def test_hand_case():
    s = rls.init(2, delta=1e6)
    s = update(s, jnp.array([1.0, 2.0]), 5.0, 1.0)
    np.testing.assert_allclose(s.w, [1.0, 2.0], atol=1e-5)
    assert round(float(predict(s, jnp.array([1.0, 2.0]))), 4) == 5.0
    assert round(float(predict(s, jnp.array([1.0, 0.0]))), 4) == 1.0
    # Exact values: K = (1e6, 2e6) / (1 + 5e6), w = 5 K.
    np.testing.assert_allclose(s.w, 5 * np.array([1e6, 2e6]) / (1 + 5e6), rtol=1e-14)


def test_init_shapes_and_validation():
    s = rls.init(5, delta=10.0, batch_shape=(3,), dtype=jnp.float32)
    chex.assert_shape(s.w, (3, 5))
    chex.assert_shape(s.P, (3, 5, 5))
    assert s.w.dtype == jnp.float32 and s.P.dtype == jnp.float32
    np.testing.assert_array_equal(s.P[1], 10 * np.eye(5))
    # Per-estimator delta.
    s = rls.init(2, delta=jnp.array([1.0, 2.0, 3.0]), batch_shape=(3,))
    np.testing.assert_array_equal(s.P[:, 0, 0], [1, 2, 3])
    with pytest.raises(ValueError):
        rls.init(2, delta=0.0)
    with pytest.raises(ValueError):
        rls.init(0)
    for bad in (0.0, -0.5, 1.5):
        with pytest.raises(ValueError):
            rls.update(s, jnp.ones((3, 2)), jnp.ones(3), bad)
        with pytest.raises(ValueError):
            rls.update_rows(rls.init(2), jnp.ones((3, 2)), jnp.ones(3), bad)


# --- equivalence with batch least squares ---------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lam1_equals_batch_least_squares(seed):
    rng = np.random.default_rng(seed)
    n, p = 80, 5  # the same (80, 5) stream shape in several tests: one compile each
    X = rng.standard_normal((n, p))
    y = X @ rng.standard_normal(p) + 0.3 * rng.standard_normal(n)
    s, _ = _run(rls.init(p, delta=1e10), X, y, 1.0)
    w_ls = np.linalg.lstsq(X, y, rcond=None)[0]
    np.testing.assert_allclose(s.w, w_ls, rtol=1e-7, atol=1e-8)
    # P carries rounding of order delta * eps ~ 1e-6 times the tiny first-step factors.
    np.testing.assert_allclose(s.P, np.linalg.inv(X.T @ X), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("lam", [0.9, 0.97])
@pytest.mark.parametrize("joseph", [False, True])
def test_forgetting_equals_exponentially_weighted_least_squares(lam, joseph):
    """w_t minimises sum_i lam^(t-i) (y_i - x_i'w)^2 + lam^t / delta |w|^2 exactly."""
    rng = np.random.default_rng(3)
    n, p, delta = 80, 5, 100.0
    X = rng.standard_normal((n, p))
    y = X @ rng.standard_normal(p) + 0.3 * rng.standard_normal(n)
    _, traj = _run(rls.init(p, delta=delta), X, y, lam, joseph=joseph)
    for t in (1, 3, 10, 40, n):
        c = lam ** (t - 1 - np.arange(t))
        R = (X[:t] * c[:, None]).T @ X[:t] + lam**t / delta * np.eye(p)
        w = np.linalg.solve(R, (X[:t] * c[:, None]).T @ y[:t])
        np.testing.assert_allclose(traj.w[t - 1], w, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(traj.P[t - 1], np.linalg.inv(R), rtol=1e-9, atol=1e-11)


# --- block update ---------------------------------------------------------------------


@pytest.mark.parametrize("joseph", [False, True])
def test_update_rows_equals_sequential_updates(joseph):
    rng = np.random.default_rng(4)
    p, m = 6, 4
    s0 = _random_state(rng, p)
    X = rng.standard_normal((m, p))
    y = rng.standard_normal(m)
    block = update_rows(s0, X, y, 1.0, joseph=joseph)
    seq, _ = _run(s0, X, y, 1.0)
    chex.assert_trees_all_close(block, seq, rtol=1e-10, atol=1e-12)


def test_update_rows_with_forgetting_is_one_information_step():
    """P_new^-1 = lam P^-1 + X'X and w_new = P_new (lam P^-1 w + X'y)."""
    rng = np.random.default_rng(5)
    p, m, lam = 5, 3, 0.9
    s0 = _random_state(rng, p)
    X = rng.standard_normal((m, p))
    y = rng.standard_normal(m)
    s1 = update_rows(s0, X, y, lam)
    R0 = np.linalg.inv(s0.P)
    R1 = lam * R0 + X.T @ X
    np.testing.assert_allclose(np.linalg.inv(s1.P), R1, rtol=1e-9)
    np.testing.assert_allclose(s1.w, np.linalg.solve(R1, lam * R0 @ s0.w + X.T @ y), rtol=1e-9)


def test_update_rows_batched_lam_broadcasts():
    rng = np.random.default_rng(6)
    p, m = 4, 2
    s0 = _random_state(rng, p)
    X = rng.standard_normal((m, p))
    y = rng.standard_normal(m)
    lams = jnp.array([0.8, 0.9, 1.0])
    out = update_rows(s0, X, y, lams)
    chex.assert_shape(out.w, (3, p))
    chex.assert_shape(out.P, (3, p, p))
    for i, lam in enumerate(lams):
        one = update_rows(s0, X, y, float(lam))
        chex.assert_trees_all_close(_at(out, i), one, rtol=1e-12)


# --- batching -------------------------------------------------------------------------


def test_batch_dims_broadcasting_and_vmap_equal_loop():
    rng = np.random.default_rng(7)
    n, p = 3, 5
    s0 = _random_state(rng, p, batch=(n,))
    x = rng.standard_normal((n, p))
    y = rng.standard_normal(n)
    lam = jnp.array([0.9, 0.95, 1.0])

    batched = update(s0, x, y, lam)
    vmapped = jax.jit(jax.vmap(rls.update))(s0, x, y, lam)
    for j in range(n):
        one = update(_at(s0, j), x[j], y[j], float(lam[j]))
        chex.assert_trees_all_close(_at(batched, j), one, rtol=1e-12)
        chex.assert_trees_all_close(_at(vmapped, j), one, rtol=1e-12)

    # One shared state, a batch of samples: the state broadcasts.
    shared = _at(s0, 0)
    out = update(shared, x, y, 0.95)
    chex.assert_shape(out.w, (n, p))
    for j in range(n):
        chex.assert_trees_all_close(
            _at(out, j), update(shared, x[j], y[j], 0.95), rtol=1e-12
        )

    # predict / prior_variance broadcast the same way.
    np.testing.assert_allclose(predict(s0, x), np.einsum("ni,ni->n", s0.w, x))
    np.testing.assert_allclose(
        prior_variance(s0, x), np.einsum("ni,nij,nj->n", x, s0.P, x), rtol=1e-12
    )
    X = rng.standard_normal((7, p))
    np.testing.assert_allclose(predict(shared, X), X @ shared.w, rtol=1e-12)
    np.testing.assert_allclose(
        prior_variance(shared, X), np.diag(X @ shared.P @ X.T), rtol=1e-12
    )


def test_jitted_update_compiles_once_across_lam_values():
    rng = np.random.default_rng(8)
    s = _random_state(rng, 5, batch=(2,))
    x = jnp.asarray(rng.standard_normal((2, 5)))
    y = jnp.asarray(rng.standard_normal(2))

    @jax.jit
    @chex.assert_max_traces(n=1)
    def step(s, x, y, lam):
        return update(s, x, y, lam, directional=True, max_trace=1e3)

    for lam in (0.9, 0.95, 0.99, 1.0):
        s = step(s, x, y, lam)  # Python floats are traced (weakly typed) arguments
    for lam in (jnp.asarray(0.9), jnp.asarray(0.97)):  # weakly typed arrays: same trace
        s = step(s, x, y, lam)
    chex.assert_tree_all_finite(s)

    # A sweep over lam is a vmap, compiled once.
    @jax.jit
    @chex.assert_max_traces(n=1)
    def sweep(s, x, y, lams):
        return jax.vmap(lambda lam: update(s, x, y, lam))(lams)

    for lams in (jnp.array([0.9, 0.95, 1.0]), jnp.array([0.5, 0.8, 0.99])):
        out = sweep(s, x, y, lams)
        chex.assert_shape(out.P, (3, 2, 5, 5))


@pytest.mark.parametrize("kw", [{}, {"joseph": True}, {"directional": True}])
def test_P_stays_symmetric(kw):
    rng = np.random.default_rng(9)
    X = rng.standard_normal((80, 5)) * rng.uniform(0.1, 10, 5)
    y = rng.standard_normal(80)
    _, traj = _run(rls.init(5, 1e6), X, y, 0.97, **kw)
    # Symmetric to rounding at every step (XLA may fuse the average into FMAs
    # differently for (i, j) and (j, i), so bitwise equality is not guaranteed).
    P = np.asarray(traj.P)
    scale = np.abs(P).max(axis=(1, 2), keepdims=True)
    assert (np.abs(P - np.swapaxes(P, -1, -2)) <= 4 * np.finfo(P.dtype).eps * scale).all()


def test_joseph_and_textbook_agree_in_float64():
    rng = np.random.default_rng(10)
    s0 = _random_state(rng, 5, batch=(3,))
    x = rng.standard_normal((3, 5))
    y = rng.standard_normal(3)
    lam = jnp.array([0.9, 0.99, 1.0])
    for directional in (False, True):
        a = update(s0, x, y, lam, directional=directional)
        b = update(s0, x, y, lam, directional=directional, joseph=True)
        chex.assert_trees_all_close(a, b, rtol=1e-10, atol=1e-12)


def test_dtype_follows_the_state():
    s = rls.init(3, dtype=jnp.float32)
    x64 = np.ones(3, np.float64)
    shape = lambda f, *a, **k: jax.eval_shape(functools.partial(f, **k), *a)  # noqa: E731
    for out in (
        shape(rls.update, s, x64, 1.0, np.float64(0.9)),
        shape(rls.update, s, x64, 1.0, 0.9, directional=True, max_trace=10.0),
        shape(rls.update, s, x64, 1.0, 0.9, directional=True, joseph=True),
        shape(rls.update_rows, s, np.ones((2, 3)), np.ones(2), 0.9),
        shape(rls.update_rows, s, np.ones((2, 3)), np.ones(2), 0.9, joseph=True, max_trace=1.0),
    ):
        assert out.w.dtype == jnp.float32 and out.P.dtype == jnp.float32
    assert shape(rls.predict, s, x64).dtype == jnp.float32
    assert shape(rls.prior_variance, s, x64).dtype == jnp.float32


# --- float32 over a long run ----------------------------------------------------------


@pytest.mark.parametrize("joseph", [False, True])
def test_float32_long_run_stays_psd_and_tracks_float64(joseph):
    """1e5 samples at lam = 0.99, delta = 1e6: float32 stays finite and positive definite,
    and after the first 100 samples its weights are within 2e-3 of float64's (|w| ~ 1)."""
    n, p, lam = 100_000, 5, 0.99
    rng = np.random.default_rng(11)
    X = rng.standard_normal((n, p))
    # A slowly varying truth so forgetting matters.
    w_true = rng.standard_normal(p) + 0.5 * np.sin(np.arange(n) / 2000.0)[:, None]
    y = np.einsum("ti,ti->t", X, w_true) + 0.1 * rng.standard_normal(n)

    s32, traj32 = _run(rls.init(p, 1e6, dtype=jnp.float32), X, y, lam, joseph=joseph)
    _, traj64 = _run(rls.init(p, 1e6), X, y, lam)
    assert s32.P.dtype == jnp.float32
    chex.assert_tree_all_finite(traj32)
    # Smallest eigenvalue at every step, in float64 so that it measures P, not eigvalsh.
    assert np.linalg.eigvalsh(np.asarray(traj32.P, np.float64)).min() > 0.0
    err = np.abs(np.asarray(traj32.w, np.float64) - np.asarray(traj64.w))
    assert err[100:].max() < 2e-3, err[100:].max()
    assert err[-1000:].max() < 1e-4, err[-1000:].max()


# --- covariance wind-up ---------------------------------------------------------------


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
@pytest.mark.parametrize("rest", ["zero", "at_rest"])
def test_windup_guarded_stays_bounded_and_recovers(dtype, rest):
    """200 excited samples, 2000 unexciting ones, 50 excited ones, at lam = 0.95.

    Plain RLS: P blows up like 0.95^-2000 ~ 1e44. Guarded: P stays bounded and finite,
    and the excited samples afterwards give sane predictions (noise-free data)."""
    p, lam = 5, 0.95
    rng = np.random.default_rng(12)
    w_true = rng.standard_normal(p)
    if rest == "zero":
        X_rest = np.zeros((2000, p))
    else:  # robot standing still: features (qdd, qd, sign qd, g, 1) = (0, 0, 0, g, 1)
        X_rest = np.tile([0.0, 0.0, 0.0, 2.0, 1.0], (2000, 1))
    X = np.concatenate([rng.uniform(-1, 1, (200, p)), X_rest, rng.uniform(-1, 1, (50, p))])
    X_test = rng.uniform(-1, 1, (20, p))
    before, rested = 199, 2199

    def phases(**kw):
        final, traj = _run(rls.init(p, 1e6, dtype=dtype), X, X @ w_true, lam, **kw)
        return _at(traj, before), _at(traj, rested), final

    tr = lambda s: float(jnp.trace(s.P.astype(jnp.float64)))  # noqa: E731

    # Plain: P explodes (float64: entries ~1e43, often indefinite; float32: inf / NaN).
    _, plain, _ = phases()
    big = np.abs(np.asarray(plain.P, np.float64)).max()
    assert not np.isfinite(big) or big > 1e30, big

    tol = 1e-3 if dtype == jnp.float32 else 1e-8
    for kw in ({"directional": True}, {"max_trace": 10.0}):
        s_before, s_rested, s_after = phases(**kw)
        chex.assert_tree_all_finite((s_rested, s_after))
        assert tr(s_rested) <= max(10.0 * (1 + 1e-6), 2 * tr(s_before)), (kw, tr(s_rested))
        assert np.linalg.eigvalsh(np.asarray(s_after.P, np.float64)).min() > 0
        pred = np.asarray(predict(s_after, jnp.asarray(X_test, dtype)), np.float64)
        np.testing.assert_allclose(pred, X_test @ w_true, atol=tol * np.abs(X_test @ w_true).max())
        if "directional" in kw and rest == "zero":  # x = 0 leaves P exactly unchanged
            np.testing.assert_array_equal(s_rested.P, s_before.P)


def test_directional_forgetting_information_form():
    """R_new = R - (1 - lam) x x' / (x' P x) + x x', with R = P^-1; lam = 1 is the plain update."""
    rng = np.random.default_rng(13)
    p, lam = 5, 0.9
    s0 = _random_state(rng, p)
    x = rng.standard_normal(p)
    y = 0.7
    s1 = update(s0, x, y, lam, directional=True)
    R0 = np.linalg.inv(s0.P)
    R1 = R0 - (1 - lam) * np.outer(x, x) / (x @ s0.P @ x) + np.outer(x, x)
    np.testing.assert_allclose(np.linalg.inv(s1.P), R1, rtol=1e-9, atol=1e-10)
    # Same gain as the plain update, so the same weights.
    np.testing.assert_allclose(s1.w, update(s0, x, y, lam).w, rtol=1e-12)
    chex.assert_trees_all_close(
        update(s0, x, y, 1.0, directional=True), update(s0, x, y, 1.0), rtol=1e-12
    )
    # Tiny x: the update is scale-free in P's forgetting term and stays finite.
    s_tiny = update(s0, 1e-200 * x, 0.0, lam, directional=True)
    chex.assert_tree_all_finite(s_tiny)


def test_max_trace_bounds_trace_and_is_inactive_below():
    rng = np.random.default_rng(14)
    s0 = _random_state(rng, 4)
    x = rng.standard_normal(4)
    plain = update(s0, x, 1.0, 0.5)
    tr = float(jnp.trace(plain.P))
    bounded = update(s0, x, 1.0, 0.5, max_trace=tr / 2)
    np.testing.assert_allclose(jnp.trace(bounded.P), tr / 2, rtol=1e-12)
    np.testing.assert_allclose(bounded.P, plain.P / 2, rtol=1e-12)
    chex.assert_trees_all_close(update(s0, x, 1.0, 0.5, max_trace=2 * tr), plain)
    rows = update_rows(s0, rng.standard_normal((2, 4)), np.ones(2), 0.5, max_trace=1.0)
    np.testing.assert_allclose(jnp.trace(rows.P), 1.0, rtol=1e-12)


def test_reopen_adds_to_the_diagonal_and_keeps_the_weights():
    s = _random_state(np.random.default_rng(5), 4, batch=(3,))
    opened = jax.jit(rls.reopen)(s, 2.5, jnp.array([True, False, True]))
    np.testing.assert_array_equal(opened.w, s.w)
    np.testing.assert_allclose(opened.P[0], s.P[0] + 2.5 * np.eye(4), rtol=1e-15)
    np.testing.assert_array_equal(opened.P[1], s.P[1])
    np.testing.assert_allclose(opened.P[2], s.P[2] + 2.5 * np.eye(4), rtol=1e-15)
    assert opened.P.dtype == s.P.dtype


@pytest.mark.parametrize("joseph", [pytest.param(False, marks=pytest.mark.slow), True])
def test_block_update_given_its_product_is_the_same_update(joseph):
    """With ``PXt`` given, directional forgetting and the update are one correction of P (P_f X' =
    P X' / lam): the same state, innovation and gain as forgetting P first; rank-deficient rows too."""
    rng = np.random.default_rng(21)
    p, lam = 9, 0.95
    s0 = _random_state(rng, p)
    X = rng.standard_normal((4, p))
    X[3] = X[0] - 2 * X[1]  # dependent rows: G is singular
    y = rng.standard_normal(4)
    for rows in (X[:3], X):
        plain, inno = rls.block_update(s0, rows, y[: len(rows)], lam, directional=True, joseph=joseph)
        fused, inno_f = rls.block_update(s0, rows, y[: len(rows)], lam, directional=True, joseph=joseph,
                                         PXt=s0.P @ rows.T)
        chex.assert_trees_all_close(fused, plain, rtol=1e-9, atol=1e-10)
        chex.assert_trees_all_close(inno_f, inno, rtol=1e-9, atol=1e-10)
        # the gain is the update, and the posterior's P X'
        np.testing.assert_allclose(fused.w - s0.w, inno_f.gain @ inno_f.error, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(inno_f.gain, fused.P @ rows.T, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_block_update_with_its_product_keeps_the_covariance_exactly_symmetric(dtype):
    """The one-correction form writes P's update as Dt (sign(d) Dt)', symmetric as computed: no
    symmetrising pass, and none needed, over many updates with forgetting."""
    rng = np.random.default_rng(3)
    p, m = 30, 5
    state = rls.RLSState(jnp.zeros(p, dtype), jnp.eye(p, dtype=dtype))
    step = jax.jit(lambda s, X, y: rls.block_update(s, X, y, 0.99, directional=True, PXt=s.P @ X.T)[0])
    for _ in range(200):
        state = step(state, jnp.asarray(rng.standard_normal((m, p)), dtype), jnp.asarray(rng.standard_normal(m), dtype))
    P = np.asarray(state.P)
    assert np.array_equal(P, P.T)
    assert np.linalg.eigvalsh(P.astype(np.float64)).min() > 0


@pytest.mark.parametrize("directional", [False, True])
@pytest.mark.parametrize("lam", [1.0, 0.97])
def test_the_factor_form_is_the_block_updates_estimate(directional, lam):
    """``S S'`` after :func:`rls.factor_update` is :func:`rls.block_update`'s ``P``; the weights
    and the innovation are the same, also for rows that do not span (dependent rows, unexcited
    columns), and the gain is the update."""
    rng = np.random.default_rng(8)
    p, m = 9, 3
    plain = _random_state(rng, p)
    factor = rls.FactorState(plain.w, jnp.linalg.cholesky(plain.P))
    for t in range(30):
        X = rng.standard_normal((m, p))
        X[:, :2] *= t % 2  # two columns excited every other sample
        X[2] = X[0] - 2 * X[1] if t % 3 == 0 else X[2]
        y = rng.standard_normal(m)
        _, product = rls.rows_covariance(plain, X)
        plain, inno = rls.learn_rows(plain, X, y, lam, directional=directional, product=product)
        G, F = rls.rows_covariance(factor, X)
        before = factor
        factor, inno_f = rls.learn_rows(factor, X, y, lam, directional=directional, product=F)
        np.testing.assert_allclose(G, X @ before.P @ X.T, rtol=1e-12, atol=1e-12)
        chex.assert_trees_all_close(inno_f, inno, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(factor.w - before.w, inno_f.gain @ inno_f.error, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(factor.w, plain.w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(factor.P, plain.P, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(rls.variances(factor), np.diag(plain.P), rtol=1e-9)


def test_decoupling_a_block_keeps_the_rest_and_adds_the_blocks_variance():
    """Both forms: the rest's covariance kept, the block's raised by the variance, none between
    them, the weights kept; ``where=False`` changes nothing."""
    rng = np.random.default_rng(9)
    p, block, variance = 8, slice(3, 6), np.array([1.0, 2.0, 3.0])
    plain = _random_state(rng, p)
    factor = rls.FactorState(plain.w, jnp.asarray(rng.standard_normal((p, p))))  # any factor, not triangular
    rest = np.r_[0:3, 6:8]
    for state in (plain, factor):
        P = np.asarray(state.P)
        opened = rls.decouple(state, block, variance)
        Q = np.asarray(opened.P)
        np.testing.assert_allclose(Q[np.ix_(rest, rest)], P[np.ix_(rest, rest)], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(Q[block, block], P[block, block] + np.diag(variance), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(Q[np.ix_(rest, np.arange(3, 6))], 0.0, atol=1e-12)
        np.testing.assert_array_equal(opened.w, state.w)
        kept = jax.jit(lambda s, where: rls.decouple(s, block, variance, where))(state, False)  # traced: a cond
        chex.assert_trees_all_equal(kept, jax.tree.map(jnp.asarray, state))


def test_the_factor_form_holds_in_float32_what_the_covariance_form_cannot():
    """Directions known to 1e-9 beside a prior of 100 (and a combination known far better than
    its parts), as a robot's minute of data leaves them: a float32 factor follows float64's
    covariance in every direction, and the weights; float32's ``P`` itself does not (it breaks
    down on these data)."""
    rng = np.random.default_rng(5)
    p, m, T = 14, 3, 4000
    X = rng.standard_normal((T, m, p)) * np.r_[np.geomspace(1, 300, 10), np.zeros(4)]
    X[:, :, 1] = X[:, :, 0] + 1e-3 * X[:, :, 1]
    y = rng.standard_normal((T, m))

    @jax.jit
    def run(state, X, y):
        def learn(s, rows):
            return rls.learn_rows(s, *rows, 0.999, directional=True, product=rls.rows_covariance(s, rows[0])[1])[0], None

        return jax.lax.scan(learn, state, (X.astype(state.w.dtype), y.astype(state.w.dtype)))[0]

    prior = np.full(p, 10.0)
    exact = run(rls.RLSState(jnp.zeros(p), jnp.diag(prior**2)), X, y)
    g, V = np.linalg.eigh(np.asarray(exact.P))
    assert g[0] < 1e-8 * g[-1]  # past float32's resolution
    f32 = run(rls.FactorState(jnp.zeros(p, jnp.float32), jnp.diag(jnp.asarray(prior, jnp.float32))), X, y)
    assert f32.S.dtype == jnp.float32
    along = np.einsum("ik,ij,jk->k", V, np.asarray(f32.P, np.float64), V)
    np.testing.assert_allclose(along, g, rtol=0.05)
    np.testing.assert_allclose(f32.w, exact.w, atol=1e-3 * np.abs(exact.w).max())
