"""Careless and hostile use of the API: clear errors, nothing lost, nothing hidden."""

from __future__ import annotations

import json
import re
import threading
import warnings

import chex
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dense_armor import learners, parse_urdf
from dense_armor.dynamics import frame_jacobian
from dense_armor.dynamics.urdf_dynamics import RigidBodyModel
from dense_armor.robots import minimal_urdf
from dense_armor.urdf import URDFError, URDFWarning
from dense_armor.utility.learn.online_dynamics import (
    PayloadResidualDynamicsLearner,
    RecursiveLeastSquares,
    ResidualDynamicsLearner,
    RobotResidualDynamicsLearner,
    write_minimal_urdf,
)

NOMINAL = RigidBodyModel(write_minimal_urdf())


def _samples(k, seed=0):
    return np.random.default_rng(seed).uniform(-1, 1, (k, 4, 2))


@pytest.mark.parametrize("make", [lambda: ResidualDynamicsLearner(NOMINAL),
                                  pytest.param(lambda: PayloadResidualDynamicsLearner(NOMINAL), marks=pytest.mark.slow)])
def test_two_threads_lose_no_update(make):
    learner, serial = make(), make()
    data = _samples(400)
    threads = [threading.Thread(target=lambda part: [learner.learn_one(*s) for s in part], args=(data[k::2],)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert int(learner.state.count) == 400
    for s in np.concatenate([data[0::2], data[1::2]]):  # the order does not matter at lam = 1 up to rounding
        serial.learn_one(*s)
    np.testing.assert_allclose(learner.weights, serial.weights, rtol=1e-6, atol=1e-8)


def test_rls_validates_before_it_changes_anything():
    rls = RecursiveLeastSquares()
    with pytest.raises(ValueError, match="y: expected one real number"):
        rls.learn_one({"a": 1.0, "b": 0.0}, np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match="non-empty dict"):
        rls.learn_one({}, 1.0)
    for y in ("abc", "5", None):
        with pytest.raises(ValueError, match="y: expected one real number"):
            rls.learn_one({"a": 1.0, "b": 2.0}, y)
    with pytest.raises(ValueError, match="every feature must be a real number"):
        rls.learn_one({"a": "1.5", "b": 2.0}, 1.0)
    with pytest.raises(ValueError, match="non-empty dict"):
        rls.predict_one("junk")
    assert rls.state is None and rls._keys is None  # nothing was learned or fixed
    rls.learn_one({"a": 1.0, "b": 2.0}, 5.0)
    assert round(rls.predict_one({"a": 1.0, "b": 2.0}), 4) == 5.0


@pytest.mark.parametrize("kwargs, message", [
    ({"delta": float("inf")}, "delta"), ({"delta": 1e308}, "delta"), ({"lam": np.array(1.5)}, "lam"),
    ({"lam": np.float32(0.0)}, "lam"),
])
def test_hyperparameters_are_checked_whatever_their_type(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ResidualDynamicsLearner(NOMINAL, **kwargs)


@pytest.mark.parametrize("q, message", [([0.5j, 0.0], "q: expected real numbers, got complex128"),
                                         (["0.1", "x"], "q: expected real numbers, got <U3"),
                                         ([[0.1], [0.1, 0.2]], "q: not an array of numbers")])
def test_the_model_refuses_what_is_not_real_numbers_naming_the_argument(q, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        NOMINAL.inverse_dynamics(q, [0.0, 0.0], [0.0, 0.0])


@pytest.mark.parametrize("make", [ResidualDynamicsLearner, PayloadResidualDynamicsLearner,
                                  lambda m: RobotResidualDynamicsLearner(m, rate=100.0)])
def test_a_urdf_path_for_a_model_says_what_to_give(make):
    with pytest.raises(TypeError, match=r"model: expected a RigidBodyModel or a Model .* got str; for a URDF file, RigidBodyModel\(path\)"):
        make(write_minimal_urdf())


@pytest.mark.parametrize("kwargs, message", [
    ({"hampel_n_sigmas": -1.0, "trigger": "hampel"}, "n_sigmas"), ({"warmup_steps": -1}, "warmup_steps"),
    ({"drift_h": -1.0, "trigger": "cusum"}, "CUSUM h"), ({"drift_k": -0.5, "trigger": "cusum"}, "CUSUM k"),
    ({"innovation_h": 0.0, "trigger": "innovation"}, "Innovation h"),
])
def test_negative_trigger_options_are_refused(kwargs, message):
    from dense_armor.utility.learn.online_dynamics import DriftAwareResidualDynamicsLearner

    with pytest.raises(ValueError, match=message):
        DriftAwareResidualDynamicsLearner(NOMINAL, **kwargs)


def test_a_file_that_is_no_state_says_so_without_numpys_words(tmp_path):
    (tmp_path / "log.csv").write_text("t,q0\n0,1\n")
    with pytest.raises(ValueError, match=r"log.csv: not a learner state file \(an NPZ written by save\)$"):
        learners.saved_options(tmp_path / "log.csv")  # NumPy says 'allow_pickle=False' of any such file


def test_state_files_know_what_they_belong_to(tmp_path):
    learner = RobotResidualDynamicsLearner(NOMINAL, rate=100.0)
    for s in _samples(20):
        learner.learn_one(*s)
    learner.save(tmp_path / "x")  # one name in, the same name out
    assert (tmp_path / "x").is_file() and not (tmp_path / "x.npz").exists()
    RobotResidualDynamicsLearner(NOMINAL, rate=100.0).load(tmp_path / "x")
    assert learners.saved_options(tmp_path / "x")[".rate"] == 100.0
    with pytest.raises(ValueError, match="another robot"):
        RobotResidualDynamicsLearner(RigidBodyModel(write_minimal_urdf(payload_mass=0.1)), rate=100.0).load(tmp_path / "x")
    with pytest.raises(ValueError, match=r"another learner configuration \(rate = 100.0 in the file, 200.0 here"):
        RobotResidualDynamicsLearner(NOMINAL, rate=200.0).load(tmp_path / "x")
    RobotResidualDynamicsLearner(NOMINAL, rate=100).load(tmp_path / "x")  # the same options, an int
    with pytest.raises(ValueError, match="another learner"):
        PayloadResidualDynamicsLearner(NOMINAL).load(tmp_path / "x")
    ResidualDynamicsLearner(NOMINAL, lam=1).save(tmp_path / "r")
    ResidualDynamicsLearner(NOMINAL, lam=np.float32(1.0), delta=1000000).load(tmp_path / "r")
    with pytest.raises(ValueError, match="another learner configuration"):
        ResidualDynamicsLearner(NOMINAL, forgetting="exponential").load(tmp_path / "r")  # a static option
    PayloadResidualDynamicsLearner(NOMINAL).save(tmp_path / "p")  # a payload on link2 ...
    with pytest.raises(ValueError, match="another learner configuration"):
        PayloadResidualDynamicsLearner(NOMINAL, link="link1").load(tmp_path / "p")  # ... is not one on link1
    data = dict(np.load(tmp_path / "x"))
    older = dict(data)  # as a version of the learner without an option would have saved it
    options = json.loads(str(older["identity_option_values"]))
    del options[".detector.every"]
    older["identity_option_values"], older["identity_options"] = np.array(json.dumps(options)), np.array("0" * 16)
    with open(tmp_path / "version.npz", "wb") as f:
        np.savez(f, **older)
    with pytest.raises(ValueError, match=r"another learner configuration \(detector.every here, not in the file: a learner "
                                         r"of another version; a state belongs"):
        RobotResidualDynamicsLearner(NOMINAL, rate=100.0).load(tmp_path / "version.npz")
    older["identity_version"] = np.array("0.0.9")
    with open(tmp_path / "version.npz", "wb") as f:
        np.savez(f, **older)
    with pytest.raises(ValueError, match=r"detector.every here, not in the file: the file is of dense_armor 0.0.9, this is "):
        RobotResidualDynamicsLearner(NOMINAL, rate=100.0).load(tmp_path / "version.npz")
    data["leaf_0"] = data["leaf_0"] + 1.0  # an edit, finite
    with open(tmp_path / "edited.npz", "wb") as f:
        np.savez(f, **data)
    with pytest.raises(ValueError, match="edited.npz: the state's arrays do not match the checksum"):
        RobotResidualDynamicsLearner(NOMINAL, rate=100.0).load(tmp_path / "edited.npz")
    del data["checksum"]  # as a file saved before the checksum: loads
    with open(tmp_path / "older.npz", "wb") as f:
        np.savez(f, **data)
    RobotResidualDynamicsLearner(NOMINAL, rate=100.0).load(tmp_path / "older.npz")
    data["leaf_0"][0] = np.nan
    with open(tmp_path / "nan.npz", "wb") as f:
        np.savez(f, **data)
    with pytest.raises(ValueError, match="NaN or inf"):
        RobotResidualDynamicsLearner(NOMINAL, rate=100.0).load(tmp_path / "nan.npz")
    for damaged in (b"", (tmp_path / "x").read_bytes()[:200]):
        (tmp_path / "bad").write_bytes(damaged)
        with pytest.raises(ValueError, match="bad: not a learner state file"):
            RobotResidualDynamicsLearner(NOMINAL, rate=100.0).load(tmp_path / "bad")
    np.save(tmp_path / "plain.npy", np.zeros(3))  # one array, not an NPZ
    with pytest.raises(ValueError, match="plain.npy: not a learner state file"):
        RobotResidualDynamicsLearner(NOMINAL, rate=100.0).load(tmp_path / "plain.npy")
    anonymous = {k: v for k, v in np.load(tmp_path / "x").items() if not k.startswith("identity_")}
    with open(tmp_path / "anonymous.npz", "wb") as f:
        np.savez(f, **anonymous)
    with pytest.raises(ValueError, match="does not say which learner and robot"):
        RobotResidualDynamicsLearner(NOMINAL, rate=100.0).load(tmp_path / "anonymous.npz")
    core = RobotResidualDynamicsLearner(NOMINAL, rate=100.0).learner
    state32 = learners.init(core, jnp.float32)  # its covariance as a factor
    learners.save_state(tmp_path / "f32.npz", state32, core)
    chex.assert_trees_all_equal(learners.load_state(tmp_path / "f32.npz", state32, core), state32)
    with pytest.raises(ValueError, match=r"another layout \(\.rls\.P in the file, \.rls\.S here\)"):
        learners.load_state(tmp_path / "x", state32, core)  # a float64 state keeps P itself
    data = dict(np.load(tmp_path / "f32.npz"))
    del data["paths"]  # as saved when the whole-robot learner kept P in float32 too: same shapes, P read as S
    with open(tmp_path / "covariance.npz", "wb") as f:
        np.savez(f, **data)
    with pytest.raises(ValueError, match="before the whole-robot learner kept its float32 covariance as a factor"):
        learners.load_state(tmp_path / "covariance.npz", state32, core)
    data = dict(np.load(tmp_path / "p"))
    P = next(k for k, v in data.items() if v.ndim == 2 and v.shape[0] == v.shape[1] and v.shape[0] > 2)
    data[P] = -data[P]  # symmetric, finite, and no covariance
    del data["checksum"]  # in a file saved before checksums, the covariance's own check
    with open(tmp_path / "negative.npz", "wb") as f:
        np.savez(f, **data)
    with pytest.raises(ValueError, match="not positive semi-definite"):
        PayloadResidualDynamicsLearner(NOMINAL).load(tmp_path / "negative.npz")


def test_the_plain_rls_takes_turns_between_threads_and_checks_its_keys():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(600, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=600)
    rls = RecursiveLeastSquares(lam=1.0, delta=1e8)
    keys = ("a", "b", "c")
    threads = [threading.Thread(target=lambda part: [rls.learn_one(dict(zip(keys, X[i])), float(y[i])) for i in part],
                                args=(range(k, 600, 2),)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    np.testing.assert_allclose(rls._w, np.linalg.lstsq(X, y, rcond=None)[0], atol=1e-6)  # every sample, once
    with pytest.raises(ValueError, match="given twice"):
        RecursiveLeastSquares(feature_keys=["a", "a"])
    with pytest.raises(ValueError, match="expected a real number"):
        RecursiveLeastSquares(lam="0.5")


def test_a_sample_too_large_to_learn_is_skipped_by_the_plain_rls():
    learner = RecursiveLeastSquares()
    learner.learn_one({"a": 1.0, "b": 1.0}, 1.7e308)
    learner.learn_one({"a": 1.0, "b": 1.0}, -1.7e308)  # finite, and its update is not
    learner.learn_one({"a": 1.0, "b": 2.0}, 3.0)
    assert learner.rejected >= 1 and np.all(np.isfinite(learner._w))


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(0, 4000), flip=st.integers(0, 4000), value=st.integers(0, 255))
def test_a_corrupted_state_file_is_refused_or_loads_intact(tmp_path_factory, cut, flip, value):
    folder = tmp_path_factory.mktemp("state")
    learner = ResidualDynamicsLearner(NOMINAL)
    for s in _samples(5):
        learner.learn_one(*s)
    learner.save(folder / "s.npz")
    raw = bytearray((folder / "s.npz").read_bytes())
    raw = raw[: max(1, len(raw) - cut % len(raw))]
    raw[flip % len(raw)] = value
    (folder / "d.npz").write_bytes(bytes(raw))
    other = ResidualDynamicsLearner(NOMINAL)
    before = other.state
    try:
        other.load(folder / "d.npz")
    except ValueError as err:
        assert "d.npz" in str(err)
        np.testing.assert_array_equal(other.state.rls.w, before.rls.w)  # nothing changed
    else:
        assert np.all(np.isfinite(other.state.rls.P))


def test_frame_index_and_mimic_joints():
    model = parse_urdf(minimal_urdf())
    with pytest.raises(ValueError, match="out of range"):
        frame_jacobian(model, np.zeros(2), -1)
    text = minimal_urdf().replace('<axis xyz="0 0 1"/>\n    <limit lower="-3.14" upper="3.14" velocity="10.0"/>\n  </joint>\n</robot>',
                                  '<axis xyz="0 0 1"/>\n    <limit lower="-3.14" upper="3.14" velocity="10.0"/>\n'
                                  '    <mimic joint="joint1"/>\n  </joint>\n</robot>')
    with pytest.warns(URDFWarning, match="'joint2' mimics 'joint1'"):
        assert parse_urdf(text).n == 2


def test_a_urdf_in_its_declared_encoding(tmp_path):
    text = '<?xml version="1.0" encoding="ISO-8859-1"?>\n' + minimal_urdf().replace("two_link", "bras_\u00e9l\u00e9gant")
    (tmp_path / "latin.urdf").write_bytes(text.encode("latin-1"))
    assert parse_urdf(tmp_path / "latin.urdf").name == "bras_\u00e9l\u00e9gant"
    utf16 = '<?xml version="1.0" encoding="UTF-16"?>\n' + minimal_urdf().replace("two_link", "bras_\u00e9l\u00e9gant")
    (tmp_path / "utf16.urdf").write_bytes(utf16.encode("utf-16"))  # with its byte-order mark
    assert parse_urdf(tmp_path / "utf16.urdf").name == "bras_\u00e9l\u00e9gant"
    (tmp_path / "bad.urdf").write_bytes(b'<robot name="\xe9"/>')
    with pytest.raises(URDFError, match="bad.urdf: not a utf-8 text file"):
        parse_urdf(tmp_path / "bad.urdf")


@pytest.mark.slow
def test_many_fixed_links_parse_in_linear_time():
    links = "".join(f'<link name="l{k}"/><joint name="f{k}" type="fixed"><parent link="link2"/><child link="l{k}"/></joint>'
                    for k in range(20000))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = parse_urdf(minimal_urdf().replace("</robot>", links + "</robot>"))
    assert len(model.frame_names) == 20003


@pytest.mark.slow
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from(["", ",", "\n", "nan", "-", "1e999", "x", "\ufeff", "\x00", "9"])),
                      min_size=1, max_size=6))
def test_a_corrupted_log_gives_a_replay_or_one_line_and_status_2(tmp_path_factory, edits):
    import contextlib
    import io

    from dense_armor.cli import main

    folder = tmp_path_factory.mktemp("log")
    rng = np.random.default_rng(0)
    t = np.arange(200) * 0.01
    rows = ["t,q_joint1,q_joint2,tau_joint1,tau_joint2"] + [
        f"{t[k]:.4f},{a:.5f},{b:.5f},{c:.5f},{d:.5f}" for k, (a, b, c, d) in enumerate(rng.uniform(-1, 1, (200, 4)))]
    text = "\n".join(rows)
    for at, piece in edits:
        at %= len(text) + 1
        text = text[:at] + piece + text[at:]
    log = folder / "log.csv"
    log.write_text(text, encoding="utf-8", errors="surrogatepass")
    urdf = write_minimal_urdf(folder / "arm.urdf")
    before = log.read_bytes()
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["replay", urdf, str(log), "--out", str(folder / "o.csv"), "--chunk", "100"])
    assert code in (0, 2), err.getvalue()
    if code == 2:
        lines = err.getvalue().strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("dense-armor: error: "), err.getvalue()
        assert not (folder / "o.csv").exists()
    assert log.read_bytes() == before
