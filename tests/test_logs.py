"""Logs as robots log them: CSV, NPZ and ROS bags, on their own clocks."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import chex
import jax.numpy as jnp
import numpy as np
import pytest

from dense_armor import parse_urdf
from dense_armor.learners import ResidualLearner, Sample, replay
from dense_armor.logs import LogError, load_log, open_log, write_bag, write_table
from dense_armor.replay import Scores, replay_trajectory
from dense_armor.robots import minimal_urdf

JOINTS = ("joint1", "joint2")


def _csv(path, columns):
    write_table(path, columns)
    return path


def _motion(rate=200.0, seconds=4.0, jitter=0.3, seed=0):
    """A smooth motion sampled at jittered times, with its exact derivatives."""
    rng = np.random.default_rng(seed)
    count = int(rate * seconds)
    t = np.arange(count) / rate + rng.uniform(-jitter, jitter, count) / rate
    t[0] = 0.0
    q = np.stack([np.sin(1.5 * t), 0.5 * np.cos(2.0 * t)], 1)
    qd = np.stack([1.5 * np.cos(1.5 * t), -np.sin(2.0 * t)], 1)
    qdd = np.stack([-2.25 * np.sin(1.5 * t), -2.0 * np.cos(2.0 * t)], 1)
    tau = np.stack([np.cos(t), np.sin(t)], 1)
    return t, q, qd, qdd, tau


def _columns(t, q, tau, qd=None, named=True):
    cols = {"t": t} if t is not None else {}
    for j, name in enumerate(JOINTS):
        key = (lambda qty: f"{qty}_{name}") if named else (lambda qty: f"{qty}{j}")
        cols[key("q")] = q[:, j]
        if qd is not None:
            cols[key("qd")] = qd[:, j]
        cols[key("tau")] = tau[:, j]
    return cols


def test_named_and_indexed_columns_csv_and_npz_agree(tmp_path):
    t, q, qd, qdd, tau = _motion()
    named = _columns(t, q, tau, qd)
    named["temperature"] = np.zeros(len(t))  # other columns are ignored
    a = load_log(_csv(tmp_path / "a.csv", named), JOINTS)
    b = load_log(_csv(tmp_path / "b.csv", _columns(t, q, tau, qd, named=False)), JOINTS)
    np.savez(tmp_path / "c.npz", t=t, q=q, qd=qd, tau=tau)
    c = load_log(tmp_path / "c.npz", JOINTS)
    for log in (a, b, c):
        np.testing.assert_allclose(log.q, q, rtol=1e-8)
        np.testing.assert_allclose(log.qd, qd, rtol=1e-8)
        assert log.info.estimated == ("qdd",) and log.info.derivative == "zero-phase"
    np.testing.assert_allclose(c.qdd, a.qdd, atol=1e-6)  # the CSV holds 9 digits


def test_jittered_clock_is_differentiated_on_its_stamps(tmp_path):
    t, q, qd, qdd, tau = _motion(rate=100.0, jitter=0.3)
    log = load_log(_csv(tmp_path / "jitter.csv", _columns(t, q, tau)), JOINTS)
    assert log.info.estimated == ("qd", "qdd") and log.info.gaps == []
    assert log.info.period == pytest.approx(0.01, rel=0.05)
    inner = (t > 0.3) & (t < t[-1] - 0.3)
    assert np.abs(log.qd - qd)[inner].max() < 1e-3
    assert np.abs(log.qdd - qdd)[inner].max() < 2e-2
    causal = load_log(tmp_path / "jitter.csv", JOINTS, causal=True)
    assert causal.info.derivative == "causal"
    assert np.abs(causal.qd - qd)[inner].max() > 2 * np.abs(log.qd - qd)[inner].max()  # it lags


def test_gaps_are_bridged_and_reported_and_long_ones_split_the_log(tmp_path):
    t, q, qd, qdd, tau = _motion(rate=1000.0, jitter=0.0)
    keep = np.ones(len(t), bool)
    keep[1000:1006] = False  # a 7-period gap: bridged
    keep[2000:2300] = False  # 0.3 s: split
    cols = _columns(t[keep], q[keep], tau[keep])
    log = load_log(_csv(tmp_path / "gaps.csv", cols), JOINTS)
    (bridged, split) = log.info.gaps
    assert (bridged.index, bridged.bridged, split.index, split.bridged) == (1000, True, 1994, False)
    assert bridged.t == pytest.approx(t[1006]) and bridged.step == pytest.approx(0.007)
    assert log.info.segments == 2 and len(log) == keep.sum()
    inner = np.abs(log.t - 1.0) < 0.2  # across the bridged gap, derivatives hold
    assert np.abs(log.qdd - qdd[keep])[inner].max() < 2e-2
    assert load_log(tmp_path / "gaps.csv", JOINTS, max_gap=0.5).info.segments == 1


def test_short_segments_between_long_gaps_are_dropped_not_differentiated(tmp_path):
    """At 1 kHz, a dozen messages lost leave a gap under half the cut-off's period: bridged by
    default. A piece of log between two gaps too long to bridge, shorter than ``SHORTEST``
    periods of the cut-off, gives its filter no time to settle: its rows are dropped and
    counted, and every row kept has accurate accelerations. A log of nothing but such pieces is
    an error naming --max-gap; a short log on its own is kept."""
    t, q, qd, qdd, tau = _motion(rate=1000.0, jitter=0.0)
    keep = np.ones(len(t), bool)
    keep[1000:1012] = False  # 13 ms: bridged
    keep[2000:2300] = keep[2400:2700] = False  # 100 ms of log between two 0.3 s gaps
    log = load_log(_csv(tmp_path / "gaps.csv", _columns(t[keep], q[keep], tau[keep])), JOINTS)
    assert [g.bridged for g in log.info.gaps] == [True, False, False]
    assert (log.info.segments, log.info.fragments) == (3, 100)
    kept = keep.copy()
    kept[2300:2400] = False
    np.testing.assert_array_equal(log.t, t[kept])
    np.testing.assert_allclose(log.qdd, qdd[kept], atol=0.1)  # 2 rad/s^2 at most; the ends of the segments
    pieces = np.arange(len(t)) % 300 < 140  # 140 ms every 0.3 s
    with pytest.raises(LogError, match=r"every segment of the log is shorter than 3 periods .* longer --max-gap"):
        load_log(_csv(tmp_path / "pieces.csv", _columns(t[pieces], q[pieces], tau[pieces])), JOINTS)
    short = load_log(_csv(tmp_path / "short.csv", _columns(t[:50], q[:50], tau[:50])), JOINTS)
    assert len(short) == 50 and short.info.fragments == 0


def test_a_pause_in_the_first_chunk_splits_the_log_and_is_no_burst(tmp_path):
    """A recording paused once, however early and however long, is a gap (the period is that
    of the samples), not stamps of arrivals in bursts."""
    t, q, qd, qdd, tau = _motion(rate=1000.0, jitter=0.0)
    paused = t + np.where(np.arange(len(t)) >= 500, 10.0, 0.0)
    log = load_log(_csv(tmp_path / "paused.csv", _columns(paused, q, tau)), JOINTS, chunk=2000)
    assert log.info.segments == 2 and log.info.period == pytest.approx(1e-3) and len(log) == len(t)


def test_a_wrapped_angle_is_unwrapped_before_its_derivatives(tmp_path):
    """A continuous joint's position logged in (-pi, pi], as drivers publish it, gives the
    derivatives of its unwrapped position, across chunks, when the joint is given as an angle;
    a step over pi across a gap too long to bridge is not taken as a wrap."""
    t, q, qd, qdd, tau = _motion(rate=500.0)
    q[:, 0] = 3.0 * t + 0.2 * np.sin(5.0 * t)  # turns 12 rad: wraps at pi and 3 pi
    wrapped = q.copy()
    wrapped[:, 0] = np.angle(np.exp(1j * q[:, 0]))
    turning = load_log(_csv(tmp_path / "turning.npz", _columns(t, q, tau)), JOINTS, chunk=700)
    log = load_log(_csv(tmp_path / "wrapped.npz", _columns(t, wrapped, tau)), JOINTS, chunk=700, angles=["joint1"])
    assert log.info.wrapped == {"joint1": 2}
    np.testing.assert_allclose(log.q, q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(log.qdd, turning.qdd, rtol=0, atol=1e-8)
    raw = load_log(tmp_path / "wrapped.npz", JOINTS, chunk=700)  # not an angle: as logged
    assert raw.info.wrapped == {} and np.abs(raw.qdd[:, 0]).max() > 1e3
    jump = q.copy()
    jump[1000:, 0] += 4.0  # the joint moved during a 1 s pause
    paused = t + np.where(np.arange(len(t)) >= 1000, 1.0, 0.0)
    log = load_log(_csv(tmp_path / "jump.npz", _columns(paused, jump, tau)), JOINTS, angles=["joint1"])
    assert log.info.segments == 2 and log.info.wrapped == {}
    np.testing.assert_array_equal(log.q, jump)
    with pytest.raises(LogError, match=r"angles: elbow not among the joints \(joint1, joint2\)"):
        load_log(tmp_path / "wrapped.npz", JOINTS, angles=["elbow"])


@pytest.mark.parametrize("damage, message", [
    ("repeat", r"clock repeats .* at sample 50 \(the sample before"),
    ("back", r"clock goes back to .* at sample 50"),
    ("nan", r"time stamp nan at sample 50 is not a number"),
])
def test_broken_clocks_are_errors_naming_the_sample(tmp_path, damage, message):
    t, q, qd, qdd, tau = _motion()
    t = t.copy()
    t[50] = {"repeat": t[49], "back": t[48], "nan": np.nan}[damage]
    with pytest.raises(LogError, match=message):
        load_log(_csv(tmp_path / "bad.csv", _columns(t, q, tau)), JOINTS)


@pytest.mark.parametrize("chunk", [20000, 101])
def test_drop_repeated_drops_the_rows_that_repeat_a_stamp_and_counts_them(tmp_path, chunk):
    t, q, qd, qdd, tau = _motion()
    # a message published twice (row 51 repeats row 50), and thrice across the end of a chunk of
    # 101 rows (rows 202 and 203 repeat row 201)
    rows = np.concatenate([np.arange(51), [50], np.arange(51, 201), [200, 200], np.arange(201, len(t))])
    damaged = _csv(tmp_path / "repeats.csv", _columns(t[rows], q[rows], tau[rows]))
    with pytest.raises(LogError, match=r"clock repeats .* at sample 51 .*--drop-repeated"):
        load_log(damaged, JOINTS)
    log = load_log(damaged, JOINTS, drop_repeated=True, chunk=chunk)
    clean = load_log(_csv(tmp_path / "clean.csv", _columns(t, q, tau)), JOINTS, chunk=chunk)
    assert (log.info.repeated, log.info.first_repeated, log.info.samples) == (3, (51, t[50]), len(rows))
    for field in ("t", "q", "tau"):
        np.testing.assert_array_equal(getattr(log, field), getattr(clean, field))
    # the derivatives are estimated over windows of the rows read: other rows, other windows
    if chunk > len(rows):
        np.testing.assert_array_equal(log.qdd, clean.qdd)
    inner = clean.t < clean.t[-1] - 0.1  # the last window's ends differ a little
    np.testing.assert_allclose(log.qdd[inner], clean.qdd[inner], atol=2e-2)
    back = t[rows].copy()
    back[300] = back[298]  # a stamp that goes back is still an error
    with pytest.raises(LogError, match="clock goes back .*--drop-unordered"):
        load_log(_csv(tmp_path / "back.csv", _columns(back, q[rows], tau[rows])), JOINTS, drop_repeated=True)
    # ... unless dropped until the clock passes its last stamp: two swapped messages (rows 400
    # and 401), and a clock stepped back by 10 periods (at row 600: rows 600-609 dropped)
    order = np.arange(len(t))
    order[[400, 401]] = order[[401, 400]]
    stepped = np.arange(len(t))[order] / 200.0  # a clock without jitter: the rows dropped are known
    stepped[600:] -= 10.5 / 200.0
    log = load_log(_csv(tmp_path / "unordered.csv", _columns(stepped, q[order], tau[order])), JOINTS,
                   drop_unordered=True, chunk=chunk)
    assert (log.info.repeated, log.info.first_repeated) == (1 + 10, (401, 400 / 200.0))
    assert np.all(np.diff(log.t) > 0) and len(log) == len(t) - 11
    np.testing.assert_allclose(log.q[:400], q[:400], atol=1e-9)  # 9 significant digits in the CSV


def test_non_finite_rows_are_skipped_and_counted(tmp_path):
    t, q, qd, qdd, tau = _motion()
    q = q.copy()
    q[100, 0] = np.nan
    log = load_log(_csv(tmp_path / "nan.csv", _columns(t, q, tau)), JOINTS)
    assert log.info.skipped == 1 and len(log) == len(t) - 1 and np.all(np.isfinite(log.qdd))


def test_stamps_in_another_unit_are_read_with_theirs_and_otherwise_an_error(tmp_path):
    """Epoch nanoseconds (as ROS tools write them) or milliseconds read as seconds would be a
    log at a hundredth of a hertz: an error that names the option, not a replay of nonsense."""
    t, q, qd, qdd, tau = _motion()
    seconds = load_log(_csv(tmp_path / "s.csv", _columns(t + 1.7e9, q, tau, qd)), JOINTS)
    for unit, factor in (("ns", 1e9), ("ms", 1e3)):
        path = _csv(tmp_path / f"{unit}.csv", _columns((t + 1.7e9) * factor, q, tau, qd))
        with pytest.raises(LogError, match=r"Hz\), too slow for a robot.s log: are they in seconds.*--time-unit"):
            load_log(path, JOINTS)
        log = load_log(path, JOINTS, time_unit=unit)
        np.testing.assert_allclose(log.t, seconds.t, rtol=0, atol=1e-6)
        np.testing.assert_allclose(log.qdd, seconds.qdd, rtol=0, atol=1e-4)  # float64 epoch ns: 256 ns steps
    with pytest.raises(LogError, match="time unit 'h'"):
        load_log(tmp_path / "s.csv", JOINTS, time_unit="h")


def test_without_stamps_the_period_is_needed_for_derivatives(tmp_path):
    t, q, qd, qdd, tau = _motion(jitter=0.0)
    path = _csv(tmp_path / "no_t.csv", _columns(None, q, tau))
    with pytest.raises(LogError, match="--dt"):
        load_log(path, JOINTS)
    log = load_log(path, JOINTS, dt=1 / 200.0)
    np.testing.assert_allclose(log.t, t, atol=1e-12)
    full = load_log(_csv(tmp_path / "full.csv", {**_columns(None, q, tau, qd), "qdd0": qdd[:, 0], "qdd1": qdd[:, 1]}), JOINTS)
    assert full.info.period is None and full.info.estimated == ()  # nothing to estimate: no period needed
    np.testing.assert_array_equal(full.t, np.arange(len(t)))


def test_locked_joints_columns_are_ignored_and_missing_joints_suggest_lock(tmp_path):
    t, q, qd, qdd, tau = _motion()
    cols = _columns(t, q, tau)
    cols["q_gripper"] = cols["q_des_joint1"] = np.zeros(len(t))  # a joint the URDF lacks, a setpoint
    log = load_log(_csv(tmp_path / "g.csv", cols), JOINTS)
    assert len(log) == len(t) and log.info.ignored == ("q_gripper", "q_des_joint1")
    locked = load_log(tmp_path / "g.csv", JOINTS, locked={"gripper"}).info
    assert locked.ignored == ("q_des_joint1",) and locked.locked_range == {"gripper": (0.0, 0.0)}
    del cols["q_joint2"], cols["q_gripper"]
    with pytest.raises(LogError, match=r"not for joint2 .* --lock joint2=VALUE \(columns naming no joint of the robot, "
                                       r"ignored: q_des_joint1\)"):
        load_log(_csv(tmp_path / "h.csv", cols), JOINTS)


def test_torque_scale_turns_currents_into_torques(tmp_path):
    t, q, qd, qdd, tau = _motion()
    path = _csv(tmp_path / "current.csv", _columns(t, q, tau))
    log = load_log(path, JOINTS, torque_scale=[2.0, -0.5])
    np.testing.assert_allclose(log.tau, tau * [2.0, -0.5], rtol=1e-8)
    with pytest.raises(LogError, match="one finite, non-zero gain per joint"):
        load_log(path, JOINTS, torque_scale=[1.0, 2.0, 3.0])


@pytest.mark.parametrize("content, message", [
    ("\ufeffq0,q1,tau0,tau1\n0,1,2,3\n0,1,2,3\n", None),  # Excel's byte-order mark is fine
    ('"q0","q1", "tau0","tau1"\n0,1,2,3\n0,1,2,3\n', None),  # and so are quoted names
    ("q_joint1,q0,tau0,tau1\n0,1,2,3\n", "logged twice"),
    ("q0,q1,tau0,tau1\n", "header but no samples"),
    ("q0,q1,tau0,tau1,\n0,1,2,3,\n0,1,2,3,\n", None),  # a comma ending every line, as some exporters write
    ("q0,q1,tau0,tau1\n0,1,2,abc\n", "not a numeric CSV table"),
    ("# exported\nq0,q1,tau0,tau1\n0,1,2,3\n\n0,1,x,3\n", r"'x' is not a number \(line 5, column 'tau0'\)"),
    ("q0,q1,tau0,tau1\n0,1,2,3\n0,1,,3\n,1,2,3\n0,1,2,\n", 3),  # empty fields, pandas' NaN: rows skipped
    ("q0,q1,tau0,tau1\n0,1,2,3\n# a note\n0,1,2\n", "line 4 has 3 fields, the lines before 4"),
    ("q0,q1,tau0,tau1\n0,1,2,3\n0,1,2,-1.#IND\n0,1,1.#INF,3\n0,1,1.#QNAN,3\n", 3),  # old Microsoft C runtimes' NaN
    ("q0,q1,tau0,tau1\n0,1,2,3\n0,1,2,3 # a note\n", r"'3 # a note' is not a number \(line 3, column 'tau1'\)"),
    ("# q0,q1,tau0,tau1\n0,1,2,3\n0.5,1e-3,-2,nan\n", "the first line is numbers, not column names"),  # np.savetxt's
])
def test_csv_quirks(tmp_path, content, message):
    path = tmp_path / "log.csv"
    path.write_text(content, encoding="utf-8")
    if message is None or isinstance(message, int):
        log = load_log(path, JOINTS, dt=0.01)
        np.testing.assert_array_equal(log.q[0], [0.0, 1.0])
        assert log.info.skipped == (message or 0)
    else:
        with pytest.raises(LogError, match=message):
            load_log(path, JOINTS, dt=0.01)


def test_a_csv_cut_off_mid_line_loses_its_last_line_only(tmp_path):
    """A logger stopped while writing leaves a last line without its end and its last fields:
    dropped and noted; a short line that ends is an error (above)."""
    path = tmp_path / "cut.csv"
    path.write_text("t,q0,q1,tau0,tau1\n0,0,1,2,3\n0.01,0,1,2,3\n0.02,0,1,2,3\n0.03,0,1,", encoding="utf-8")
    log = load_log(path, JOINTS)
    assert len(log) == 3 and log.info.cut_line == 5 and log.info.expected == 4


def test_a_csv_log_is_read_block_by_block(tmp_path):
    """Reading a CSV log holds a few blocks of its rows at a time, not the file: its peak
    memory is a small part of the file's size (reading it whole took about 8 times it)."""
    t, q, qd, qdd, tau = _motion(rate=1000.0, seconds=100.0)
    path = _csv(tmp_path / "long.csv", _columns(t, q, tau, qd))
    tracemalloc.start()
    try:
        rows = sum(len(chunk["t"]) for chunk in open_log(path, JOINTS, chunk=2000))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert rows == len(t) and peak < path.stat().st_size / 2


def test_npz_quirks(tmp_path):
    np.savez(tmp_path / "complex.npz", q=np.zeros((5, 2), complex), tau=np.zeros((5, 2)))
    with pytest.raises(LogError, match="not real numbers"):
        load_log(tmp_path / "complex.npz", JOINTS, dt=0.01)
    np.savez(tmp_path / "twice.npz", q=np.zeros((5, 2)), q0=np.zeros(5), tau=np.zeros((5, 2)))
    with pytest.raises(LogError, match="logged twice"):
        load_log(tmp_path / "twice.npz", JOINTS, dt=0.01)
    # arrays that are no columns of the log (the joints' names, a rate, gains) are left alone
    np.savez(tmp_path / "extra.npz", q=np.zeros((5, 2)), tau=np.zeros((5, 2)), joint_names=np.array(JOINTS),
             rate=np.array(100.0), gains=np.ones(2))
    assert len(load_log(tmp_path / "extra.npz", JOINTS, dt=0.01)) == 5
    (tmp_path / "gz.npz").write_bytes(b"\x1f\x8b" + bytes(100))
    with pytest.raises(LogError, match="gz.npz: not a readable NPZ"):
        load_log(tmp_path / "gz.npz", JOINTS, dt=0.01)


def test_stream_in_chunks_equals_the_whole_log(tmp_path):
    t, q, qd, qdd, tau = _motion(rate=1000.0, seconds=6.0)
    path = _csv(tmp_path / "long.csv", _columns(t, q, tau))
    whole = load_log(path, JOINTS)
    chunks = list(open_log(path, JOINTS, chunk=1000))
    assert len(chunks) >= 3
    joined = {k: np.concatenate([c[k] for c in chunks]) for k in ("t", "q", "qd", "qdd", "tau")}
    np.testing.assert_array_equal(joined["t"], whole.t)
    inner = whole.t < whole.t[-1] - 0.1  # each window's grid is its own: the ends differ a little
    np.testing.assert_allclose(joined["qdd"][inner], whole.qdd[inner], atol=2e-3)
    np.testing.assert_allclose(joined["qdd"], whole.qdd, atol=2e-2)


# ----------------------------------------------------------------------------- ROS bags


def write_joint_state_bag(path: Path, t, names, q, qd, effort, storage: str = "mcap", extra=False):
    """A bag written with the library's writer; with ``extra``, another publisher's joints (a
    gripper) on the same topic, between the arm's messages."""
    if not extra:
        write_bag(path, t, names, q, qd, effort, storage=storage)
        return
    T = len(t)
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    plugin = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}[storage]
    contiguous = lambda a: np.ascontiguousarray(a, np.float64)  # noqa: E731
    with Writer(path, version=8, storage_plugin=plugin) as writer:
        connection = writer.add_connection("/joint_states", JointState.__msgtype__, typestore=store)
        for k in range(T):
            sec = int(np.floor(t[k]))
            stamp = Time(sec=sec, nanosec=int(round((t[k] - sec) * 1e9)))
            for names_k, pos, vel, eff in ((list(names), q[k], qd[k], effort[k]), (["finger"], np.zeros(1), np.zeros(1), np.zeros(1))):
                msg = JointState(header=Header(stamp=stamp, frame_id=""), name=names_k, position=contiguous(pos),
                                 velocity=contiguous(vel), effort=contiguous(eff))
                writer.write(connection, int(t[k] * 1e9) + (len(names_k) == 1), store.serialize_cdr(msg, JointState.__msgtype__))


def _write_messages(path: Path, header, received, q, qd, effort):
    """A bag of the arm's JointState messages, each with its own header and receive stamps (s)
    and its own velocity and effort arrays (empty: the message has none)."""
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    f64 = lambda a: np.ascontiguousarray(a, np.float64)  # noqa: E731
    with Writer(path, version=8) as writer:
        connection = writer.add_connection("/joint_states", JointState.__msgtype__, typestore=store)
        for h, r, pos, vel, eff in zip(header, received, q, qd, effort):
            ns = int(round(h * 1e9))
            msg = JointState(header=Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""), name=JOINTS,
                             position=f64(pos), velocity=f64(vel), effort=f64(eff))
            writer.write(connection, int(round(r * 1e9)), store.serialize_cdr(msg, JointState.__msgtype__))


def test_a_bags_clock_is_its_headers_or_else_its_receive_times(tmp_path):
    t, q, qd, _, tau = _motion(jitter=0.0)
    received = 1.7e9 + t + 0.002
    # simulated time: four messages before the first tick of the clock
    header = t.copy()
    header[:4] = 0.0
    _write_messages(tmp_path / "sim", header, received, q, qd, tau)
    log = load_log(tmp_path / "sim", JOINTS)
    assert (log.info.clock, log.info.unstamped, len(log)) == ("header", 4, len(t) - 4)
    np.testing.assert_allclose(log.t, t[4:])
    # no header stamps at all: the receive times
    _write_messages(tmp_path / "unstamped", 0 * t, received, q, qd, tau)
    log = load_log(tmp_path / "unstamped", JOINTS)
    assert (log.info.clock, log.info.unstamped, len(log)) == ("receive", 0, len(t))
    np.testing.assert_allclose(log.t, received)
    # a wall clock's first message sent before the clock was set: dropped, not the clock's time 0
    wall = 1.7e9 + t
    wall[0] = 0.0
    _write_messages(tmp_path / "wall", wall, received, q, qd, tau)
    log = load_log(tmp_path / "wall", JOINTS)
    assert (log.info.clock, log.info.unstamped, len(log)) == ("header", 1, len(t) - 1)
    # receive times of messages that arrive ten at a time are not the samples' times
    bursts = 1.7e9 + np.floor(t * 20) / 20 + (np.arange(len(t)) % 10) * 2e-5
    _write_messages(tmp_path / "bursts", 0 * t, bursts, q, qd, tau)
    with pytest.raises(LogError, match=r"stamps come in bursts .*\(the bag's receive times"):
        load_log(tmp_path / "bursts", JOINTS)


def test_a_bags_messages_without_a_quantity_are_rows_without_it(tmp_path):
    t, q, qd, qdd, tau = _motion()
    velocity, effort = list(qd), list(tau)
    for k in range(100, 110):
        velocity[k] = np.zeros(0)
    for k in (300, 301, 500):
        effort[k] = np.zeros(0)
    _write_messages(tmp_path / "partial", t, t, q, velocity, effort)
    log = load_log(tmp_path / "partial", JOINTS)
    assert log.info.skipped == 13 and len(log) == len(t) - 13 and "qd" in log.info.logged
    # ros2_control's NaN for a joint without a velocity interface: estimated
    nan = np.where(np.arange(2) == 1, np.nan, qd)
    _write_messages(tmp_path / "nan", t, t, q, nan, tau)
    log = load_log(tmp_path / "nan", JOINTS)
    assert log.info.unestimated == ("qd",) and log.info.estimated == ("qd", "qdd") and len(log) == len(t)
    inner = (t > 0.3) & (t < t[-1] - 0.3)
    assert np.abs(log.qd - qd)[inner].max() < 1e-3
    # a torque that is never a number names its joint
    _write_messages(tmp_path / "no_tau", t, t, q, qd, np.where(np.arange(2) == 0, np.nan, tau))
    with pytest.raises(LogError, match=r"torques of joint1 are not numbers in any of the first 800 samples.*--lock joint1="):
        load_log(tmp_path / "no_tau", JOINTS)


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_a_ros2_bag_reads_like_its_csv(tmp_path, storage):
    t, q, qd, qdd, tau = _motion()
    t = t + 1.7e9  # epoch stamps
    names = ["joint2", "joint1"]  # the message's order is not the model's
    bag = tmp_path / f"log_{storage}"
    write_joint_state_bag(bag, t, names, q[:, ::-1], qd[:, ::-1], tau[:, ::-1], storage, extra=True)
    log = load_log(bag, JOINTS)
    csv = load_log(_csv(tmp_path / "same.csv", _columns(t, q, tau, qd)), JOINTS)
    np.testing.assert_allclose(log.t, csv.t, atol=2e-9)
    np.testing.assert_allclose(log.q, q, rtol=1e-12)
    np.testing.assert_allclose(log.qd, qd, rtol=1e-12)
    np.testing.assert_allclose(log.tau, tau, rtol=1e-12)
    assert log.info.other == len(t) and log.info.skipped == 0  # the gripper's messages, not NaN rows
    with pytest.raises(LogError, match=r"no topic '/other'.*/joint_states"):
        load_log(bag, JOINTS, topic="/other")
    with pytest.raises(LogError, match="message 0 on /joint_states has joint1 but no joint3; .* --lock joint3=VALUE$"):
        load_log(bag, ("joint1", "joint3"))
    # a URDF with the gripper: its joint comes in messages of its own, to be locked
    with pytest.raises(LogError, match="message 0 on /joint_states has joint1, joint2 but no finger; .* --lock finger=VALUE$"):
        load_log(bag, ("joint1", "joint2", "finger"))


def test_a_bag_whose_publisher_changes_its_joints_order_reads_like_its_csv(tmp_path):
    """Messages are decoded in batches by the byte layout of their size: runs of messages of
    the same size but the joints in the other order (another layout) are decoded one by one,
    and every row lands where it belongs."""
    from rosbags.rosbag2 import Writer
    from rosbags.typesys import Stores, get_typestore

    t, q, qd, _, tau = _motion(seconds=1.0)
    t = t + 1.7e9
    store = get_typestore(Stores.ROS2_HUMBLE)
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    with Writer(tmp_path / "bag", version=8) as writer:
        connection = writer.add_connection("/joint_states", JointState.__msgtype__, typestore=store)
        for k in range(len(t)):
            turn = slice(None, None, -1 if (k // 7) % 3 == 1 else 1)  # runs of 7 in the other order
            ns = int(round(t[k] * 1e9))
            msg = JointState(header=Header(stamp=Time(sec=ns // 10**9, nanosec=ns % 10**9), frame_id=""),
                             name=list(JOINTS)[turn], position=np.ascontiguousarray(q[k, turn]),
                             velocity=np.ascontiguousarray(qd[k, turn]), effort=np.ascontiguousarray(tau[k, turn]))
            writer.write(connection, ns, store.serialize_cdr(msg, JointState.__msgtype__))
    log = load_log(tmp_path / "bag", JOINTS)
    np.testing.assert_allclose(log.t, t, atol=2e-9)
    for got, want in ((log.q, q), (log.qd, qd), (log.tau, tau)):
        np.testing.assert_array_equal(got, want)


def test_a_bag_message_naming_a_joint_twice_is_an_error(tmp_path):
    t, q, qd, qdd, tau = _motion(seconds=0.5)
    twice = lambda x: np.concatenate([x, 9.0 + x[:, 1:]], 1)  # noqa: E731 (a second joint2, other values)
    write_joint_state_bag(tmp_path / "bag", t, [*JOINTS, "joint2"], twice(q), twice(qd), twice(tau))
    with pytest.raises(LogError, match="message 0 on /joint_states names joint2 more than once"):
        load_log(tmp_path / "bag", JOINTS)
    write_joint_state_bag(tmp_path / "good", t, JOINTS, q, qd, tau)
    with pytest.raises(LogError, match="a ROS bag's stamps are seconds"):
        load_log(tmp_path / "good", JOINTS, time_unit="ns")


def test_a_ros1_bag_reads_like_its_csv(tmp_path):
    """A ROS 1 ``.bag`` (written with rosbags' ROS 1 writer, Noetic's JointState)."""
    from rosbags.rosbag1 import Writer
    from rosbags.typesys import Stores, get_typestore

    t, q, qd, qdd, tau = _motion()
    t = t + 1.7e9
    store = get_typestore(Stores.ROS1_NOETIC)
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    bag = tmp_path / "log.bag"
    with Writer(bag) as writer:
        connection = writer.add_connection("/joint_states", JointState.__msgtype__, typestore=store)
        for k, stamp in enumerate(t):
            sec = int(np.floor(stamp))
            msg = JointState(header=Header(seq=k, stamp=Time(sec=sec, nanosec=int(round((stamp - sec) * 1e9))), frame_id=""),
                             name=list(JOINTS), position=q[k].copy(), velocity=qd[k].copy(), effort=tau[k].copy())
            writer.write(connection, int(round(stamp * 1e9)), store.serialize_ros1(msg, JointState.__msgtype__))
    log = load_log(bag, JOINTS)
    np.testing.assert_allclose(log.t, t, atol=2e-9)
    np.testing.assert_allclose(log.q, q, rtol=1e-12)
    np.testing.assert_allclose(log.tau, tau, rtol=1e-12)


def test_bag_without_velocities_estimates_them(tmp_path):
    t, q, qd, qdd, tau = _motion()
    write_joint_state_bag(tmp_path / "bag", t, JOINTS, q, None, tau)
    log = load_log(tmp_path / "bag", JOINTS)
    assert log.info.estimated == ("qd", "qdd")
    inner = (t > 0.3) & (t < t[-1] - 0.3)
    assert np.abs(log.qd - qd)[inner].max() < 1e-3


# ----------------------------------------------------------------------------- replay in blocks


def test_blocked_replay_equals_one_scan():
    model = parse_urdf(minimal_urdf())
    learner = ResidualLearner(model, lam=0.98)
    rng = np.random.default_rng(3)
    trajectory = Sample(*rng.uniform(-1, 1, (4, 31, 2)))
    state0 = learner.init(jnp.float64)
    whole_state, whole = replay(learner, state0, trajectory)
    seen = []
    state, out = replay_trajectory(learner, state0, trajectory, block=7, progress=seen.append)
    assert seen == [7, 7, 7, 7, 3]
    chex.assert_trees_all_close(state, whole_state, rtol=1e-12, atol=1e-12)
    chex.assert_trees_all_close(out, whole, rtol=1e-12, atol=1e-12)
    assert int(state.count) == 31 and int(state.rejected) == 0  # the padding was never learned


def test_scores_keep_the_windows_with_samples_whatever_the_gaps_between():
    scores = Scores()
    nominal, learner = np.arange(10.0).reshape(5, 2), np.ones((5, 2))  # squared errors
    nominal[:2] = 0.0  # the URDF exact in window 0
    scores.add(np.array([0, 0, 1]), nominal[:3], learner[:3])
    scores.add(np.array([1, 10**9]), nominal[3:], learner[3:])  # a clock that jumped 30 years
    assert scores.windows == [0, 1, 10**9] and scores.count == [2, 2, 1]
    assert scores.rmse() == pytest.approx((np.sqrt(np.mean(nominal)), 1.0))
    assert scores.rmse(1, 2, joint=1)[0] == pytest.approx(np.sqrt((5 + 7) / 2))
    assert scores.rmse(2, 10**9) == (pytest.approx(float("nan"), nan_ok=True),) * 2
    assert scores.harmful() == [0]  # the learner worse than the URDF there, not where the URDF erred more


def test_joint_states_decoded_by_their_byte_layout_equal_the_general_decoder():
    """The fast path of bag reading: a layout read from one CDR message decodes every message
    that differs only in stamp and values exactly as rosbags does, and refuses any other."""
    from rosbags.typesys import Stores, get_typestore

    from dense_armor.logs import _JointStateLayout

    store = get_typestore(Stores.ROS2_HUMBLE)
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    rng = np.random.default_rng(0)

    def message(names, sec, frame="", velocity=True):
        n = len(names)
        msg = JointState(header=Header(stamp=Time(sec=sec, nanosec=123_456_789), frame_id=frame), name=list(names),
                         position=rng.standard_normal(n), velocity=rng.standard_normal(n if velocity else 0),
                         effort=rng.standard_normal(n))
        raw = bytes(store.serialize_cdr(msg, JointState.__msgtype__))
        fields = (tuple(names), sec + 0.123456789, msg.position, msg.velocity, msg.effort)
        return raw, fields

    for names, frame, velocity in [(("a", "bb", "ccc"), "", True), (("shoulder_pan_joint",), "base_link", True),
                                   (("j1", "j2"), "x", False)]:
        first, fields = message(names, 1_700_000_000, frame, velocity)
        layout = _JointStateLayout.of(first, fields)
        assert layout is not None
        for sec in (1_700_000_001, -5):
            raw, expected = message(names, sec, frame, velocity)
            decoded = layout.decode([raw])
            assert decoded[0] == expected[0] and decoded[1] == pytest.approx([expected[1]], abs=1e-9)
            for a, b in zip(decoded[2:], expected[2:]):
                np.testing.assert_array_equal(a, np.reshape(b, (1, -1)))
        # several at once, as the bag reader decodes them
        batch = [message(names, sec, frame, velocity) for sec in (3, 4, 5)]
        decoded = layout.decode([raw for raw, _ in batch])
        assert decoded[1] == pytest.approx([fields[1] for _, fields in batch], abs=1e-9)
        for k, a in enumerate(decoded[2:]):
            np.testing.assert_array_equal(a, np.reshape([fields[2 + k] for _, fields in batch], a.shape))
        assert layout.decode([first, message(names, 1, frame + "y", velocity)[0]]) is None
        assert layout.decode([message(names[::-1], 1, frame, velocity)[0]]) is None or names == names[::-1]
        assert layout.decode([message(names, 1, frame, not velocity)[0]]) is None
        assert layout.decode([message(names, 1, frame + "y", velocity)[0]]) is None
    # not CDR, or fields the offsets do not reproduce: no layout
    raw, fields = message(("a",), 1)
    assert _JointStateLayout.of(b"\x01\x00" + raw[2:], fields) is None
    assert _JointStateLayout.of(raw, (fields[0], fields[1] + 1, *fields[2:])) is None
