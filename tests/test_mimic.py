"""Coupled mimic joints (``parse_urdf(..., mimic=True)``, ``--mimic``).

Panda with its fingers against Pinocchio's own coupling (``buildModelFromUrdf(..., mimic=True)``,
which has ``rnea``, ``crba`` and kinematics for mimic joints, but no ``aba`` or regressor: those
are checked by identities), and random trees, with multipliers, offsets and chains of mimics,
against the uncoupled model through the coupling written out here: ``q_joints = G q + o`` and
joint forces ``G^T tau``.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")

from urdf_factory import example_robot_urdf, random_tree  # noqa: E402

import dense_armor as da  # noqa: E402
from dense_armor.dynamics import traversal  # noqa: E402
from dense_armor.model import lock_joints  # noqa: E402
from dense_armor.urdf import URDFError, URDFWarning, parse_urdf  # noqa: E402

PANDA = "panda_description/urdf/panda.urdf"


def close(actual, expected, rtol=1e-10):
    expected = np.asarray(expected, np.float64)
    scale = max(float(np.abs(expected).max(initial=0.0)), 1.0)
    np.testing.assert_allclose(np.asarray(actual, np.float64), expected, rtol=0, atol=rtol * scale)


def test_a_coupled_two_link_arm_with_armature_matches_pinocchio():
    """The design document's arm in a vertical plane, its elbow mimicking its shoulder (``q2 =
    2 q1 + 0.1``), with armature: one coordinate, against Pinocchio's own coupling."""
    from oracle import pin_compatible

    from dense_armor.robots import minimal_urdf

    text = minimal_urdf().replace('<axis xyz="0 0 1"/>', '<axis xyz="0 1 0"/>').replace(
        '<limit lower="-3.14" upper="3.14" velocity="10.0"/>\n  </joint>\n</robot>',
        '<limit lower="-3.14" upper="3.14" velocity="10.0"/>\n    <mimic joint="joint1" multiplier="2" offset="0.1"/>\n'
        '  </joint>\n</robot>')
    model = parse_urdf(text, mimic=True).replace(armature=np.array([0.3]))
    assert model.n == 1 and model.n_bodies == 2
    oracle = pin.buildModelFromXML(pin_compatible(text), mimic=True)
    oracle.armature = np.array([0.3])
    data = oracle.createData()
    for q, qd, qdd in np.random.default_rng(4).uniform(-1, 1, (2, 3, 1)):
        tau = pin.rnea(oracle, data, q, qd, qdd)
        close(da.rnea(model, q, qd, qdd), tau)
        close(da.crba(model, q), pin.crba(oracle, data, q))
        close(da.generalized_gravity(model, q), pin.computeGeneralizedGravity(oracle, data, q))
        close(da.aba(model, q, qd, tau), qdd)


@pytest.mark.slow
def test_panda_fingers_coupled_match_pinocchio():
    path = example_robot_urdf(PANDA)
    model = parse_urdf(path, mimic=True)
    assert model.n == 8 and model.n_bodies == 9
    assert model.mimics == (("panda_finger_joint2", 8, 7),)
    assert model.body_joint_names[-2:] == ("panda_finger_joint1", "panda_finger_joint2")
    oracle = pin.buildModelFromUrdf(str(path), mimic=True)
    data = oracle.createData()
    assert oracle.nv == model.n
    iv = [oracle.joints[oracle.getJointId(name)].idx_v for name in model.joint_names]
    frame = "panda_rightfinger"  # moved by the mimic joint
    rng = np.random.default_rng(0)
    for _ in range(3):
        q, qd, qdd = rng.uniform(-1, 1, (3, model.n))
        q[-1] = 0.02
        qp, vp, ap = (np.zeros(oracle.nv) for _ in range(3))
        qp[iv], vp[iv], ap[iv] = q, qd, qdd
        tau = pin.rnea(oracle, data, qp, vp, ap)[iv]
        close(da.rnea(model, q, qd, qdd), tau)
        close(da.nonlinear_effects(model, q, qd), pin.nonLinearEffects(oracle, data, qp, vp)[iv])
        close(da.generalized_gravity(model, q), pin.computeGeneralizedGravity(oracle, data, qp)[iv])
        M = pin.crba(oracle, data, qp)
        M = np.triu(M) + np.triu(M, 1).T
        close(da.crba(model, q), M[np.ix_(iv, iv)])
        close(da.aba(model, q, qd, tau), qdd, 1e-9)
        close(da.joint_torque_regressor(model, q, qd, qdd) @ np.asarray(model.inertia).reshape(-1), tau)
        pin.framesForwardKinematics(oracle, data, qp)
        R, p = da.forward_kinematics(model, q)
        f = oracle.getFrameId(frame)
        close(p[model.frame_index(frame)], data.oMf[f].translation)
        close(R[model.frame_index(frame)], data.oMf[f].rotation)
        J = pin.computeFrameJacobian(oracle, data, qp, f, pin.LOCAL_WORLD_ALIGNED)[:, iv]
        close(da.frame_jacobian(model, q, frame), J)


def coupled_tree(seed: int, n_movable: int, chain: bool):
    """A random tree's URDF with mimic tags (multipliers and offsets not 1 and 0), and the
    coupling written out: ``(xml, G, o, names of the coordinates)`` over the uncoupled joints."""
    root = ET.fromstring(random_tree(seed, n_movable=n_movable).xml)
    for tag in root.iter("mimic"):  # the factory's own tags: drop them
        for joint in root.iter("joint"):
            if tag in list(joint):
                joint.remove(tag)
    movable = [j.get("name") for j in root.iter("joint") if j.get("type") != "fixed"]
    uncoupled = parse_urdf(ET.tostring(root, encoding="unicode"))
    order = list(uncoupled.joint_names)
    rng = np.random.default_rng(seed)
    a, b, c = (str(x) for x in rng.choice(movable, 3, replace=False))
    tags = {b: (a, 0.7, 0.1), c: (b if chain else a, -1.3, 0.05)}
    for joint in root.iter("joint"):
        if joint.get("name") in tags:
            follows, k, o = tags[joint.get("name")]
            ET.SubElement(joint, "mimic", {"joint": follows, "multiplier": str(k), "offset": str(o)})
    coordinates = [name for name in order if name not in tags]
    G, offset = np.zeros((len(order), len(coordinates))), np.zeros(len(order))
    for i, name in enumerate(order):
        k, o, at = 1.0, 0.0, name
        while at in tags:
            follows, multiplier, add = tags[at]
            k, o, at = k * multiplier, k * add + o, follows
        G[i, coordinates.index(at)], offset[i] = k, o
    return ET.tostring(root, encoding="unicode"), uncoupled, G, offset, tuple(coordinates)


@pytest.mark.slow
@pytest.mark.parametrize("seed, n_movable, chain", [(3, 6, False), (5, 7, True), (1, 20, True)])
def test_a_coupled_tree_is_the_uncoupled_one_through_the_coupling(seed, n_movable, chain):
    with jax.disable_jit():  # op by op: nothing to compile
        _coupled_equals_uncoupled(seed, n_movable, chain)


def _coupled_equals_uncoupled(seed, n_movable, chain):
    xml, uncoupled, G, o, names = coupled_tree(seed, n_movable, chain)
    model = parse_urdf(xml, mimic=True)
    assert model.joint_names == names and model.n_bodies == uncoupled.n_bodies
    assert isinstance(traversal.walk(model.parents), traversal.Levels) == (n_movable > traversal.UNROLLED_BODIES)
    rng = np.random.default_rng(seed)
    q, qd, qdd = rng.uniform(-1, 1, (3, model.n))
    x, xd, xdd = G @ q + o, G @ qd, G @ qdd  # the joints
    tau = G.T @ np.asarray(da.rnea(uncoupled, x, xd, xdd))
    close(da.rnea(model, q, qd, qdd), tau)
    close(da.nonlinear_effects(model, q, qd), G.T @ np.asarray(da.nonlinear_effects(uncoupled, x, xd)))
    close(da.generalized_gravity(model, q), G.T @ np.asarray(da.generalized_gravity(uncoupled, x)))
    close(da.crba(model, q), G.T @ np.asarray(da.crba(uncoupled, x)) @ G)
    close(da.aba(model, q, qd, tau), qdd, 1e-8)
    close(da.joint_torque_regressor(model, q, qd, qdd), G.T @ np.asarray(da.joint_torque_regressor(uncoupled, x, xd, xdd)))
    body = model.n_bodies - 1
    close(da.body_regressor(model, q, qd, qdd, body), G.T @ np.asarray(da.body_regressor(uncoupled, x, xd, xdd, body)))
    close(da.forward_kinematics(model, q)[1], da.forward_kinematics(uncoupled, x)[1])
    frame = model.frame_names[-1]
    close(da.frame_jacobian(model, q, frame), np.asarray(da.frame_jacobian(uncoupled, x, frame)) @ G)


@pytest.mark.slow
def test_a_coupled_model_batches_and_differentiates():
    xml, _, _, _, _ = coupled_tree(3, 6, False)
    model = parse_urdf(xml, mimic=True)
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.uniform(-1, 1, (3, 4, model.n))
    batch = jax.vmap(da.rnea, in_axes=(None, 0, 0, 0))(model, q, qd, qdd)
    close(batch, np.stack([da.rnea(model, *x) for x in zip(q, qd, qdd)]))
    # d rnea / d qdd is the mass matrix, in the coordinates
    close(jax.jacfwd(lambda a: da.rnea(model, q[0], qd[0], a))(qdd[0]), da.crba(model, q[0]))
    assert np.asarray(da.rnea(model, jnp.float32(q[0]), qd[0].astype(np.float32), qdd[0].astype(np.float32))).dtype == np.float32


def test_the_mimic_tag_is_warned_about_or_coupled():
    text = example_robot_urdf(PANDA).read_text()
    with pytest.warns(URDFWarning, match=r"mimics 'panda_finger_joint1'.*mimic=True \(--mimic\)"):
        assert parse_urdf(text).n == 9
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", URDFWarning)
        assert parse_urdf(text, mimic=True).n == 8


@pytest.mark.parametrize("change, message", [
    (('<mimic joint="panda_finger_joint1"/>', '<mimic joint="panda_hand_joint"/>'), "not a movable joint"),
    (('<mimic joint="panda_finger_joint1"/>', '<mimic joint="nowhere"/>'), "not a movable joint"),
    (('<mimic joint="panda_finger_joint1"/>', '<mimic joint="panda_finger_joint1" multiplier="x"/>'), "is not a number"),
    (('<mimic joint="panda_finger_joint1"/>', '<mimic joint="panda_finger_joint1" offset="nan"/>'), "not finite"),
])
def test_a_bad_mimic_is_refused_when_coupling(change, message):
    text = example_robot_urdf(PANDA).read_text().replace(*change)
    with pytest.raises(URDFError, match=message):
        parse_urdf(text, mimic=True)


def test_a_cycle_of_mimics_is_refused():
    text = example_robot_urdf(PANDA).read_text()
    text = text.replace('<joint name="panda_finger_joint1" type="prismatic">',
                        '<joint name="panda_finger_joint1" type="prismatic">\n    <mimic joint="panda_finger_joint2"/>')
    with pytest.raises(URDFError, match="form a cycle"):
        parse_urdf(text, mimic=True)


def test_locking_a_coupled_joint_locks_its_mimic():
    path = example_robot_urdf(PANDA)
    model = parse_urdf(path, mimic=True)
    locked = lock_joints(model, {"panda_finger_joint1": 0.03})
    with pytest.warns(URDFWarning):
        reference = lock_joints(parse_urdf(path), {"panda_finger_joint1": 0.03, "panda_finger_joint2": 0.03})
    assert locked.n == locked.n_bodies == 7 and locked.mimics == ()
    assert locked.joint_names == reference.joint_names
    np.testing.assert_allclose(np.asarray(locked.data), np.asarray(reference.data), atol=1e-15)
    with pytest.raises(ValueError, match="'panda_finger_joint2' mimics 'panda_finger_joint1'"):
        lock_joints(model, {"panda_finger_joint2": 0.03})
    kept = lock_joints(model, {"panda_joint7": 0.5})  # the mimic keeps following its joint
    assert kept.mimics == (("panda_finger_joint2", 7, 6),)


@pytest.mark.slow
def test_the_learners_on_a_coupled_robot():
    """A payload on the right finger, which the mimic joint moves. The whole robot: 10 B inertial
    parameters (but those no torque depends on) and 4 n joint terms, and its prediction error falls; the payload learner, whose
    10 parameters are the payload's, finds its mass."""
    model = parse_urdf(example_robot_urdf(PANDA), mimic=True)
    learner = da.RobotLearner(model, rate=100.0, detector=None, link="panda_rightfinger")
    # less the 9 of link1 that no torque depends on (it turns about gravity's axis)
    assert learner.num_parameters == 10 * 9 + 5 * 8 - 9 == len(learner.parameter_names)
    true = da.attach_payload(model, "panda_rightfinger", 0.5)
    rng = np.random.default_rng(1)
    T = 400
    q, qd, qdd = rng.uniform(-1, 1, (3, T, model.n))
    q[:, -1] = 0.02
    tau = jax.vmap(da.rnea, in_axes=(None, 0, 0, 0))(true, q, qd, qdd)
    state, out = da.learners.replay(learner, learner.init(), da.Sample(q, qd, qdd, tau))
    est = da.robot_learner.estimate(learner, state)
    assert est.mass.shape == (9,) and est.armature.shape == (8,)
    urdf = np.asarray(out.error + out.prediction - out.nominal)[-100:]  # what the URDF misses
    rms = lambda x: float(np.sqrt(np.mean(np.square(x))))  # noqa: E731
    assert rms(np.asarray(out.error)[-100:]) < 0.05 * rms(urdf)
    payload = da.PayloadLearner(model, "panda_rightfinger", detector=None)
    state, out = da.learners.replay(payload, payload.init(), da.Sample(q, qd, qdd, tau))
    assert abs(float(da.payload.estimate(payload, state).mass) - 0.5) < 1e-3


GRIPPER = ('<link name="left"><inertial><mass value="0.2"/><inertia ixx="1e-4" ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/>'
           '</inertial></link><link name="right"><inertial><origin xyz="0.01 0 0"/><mass value="0.3"/><inertia ixx="1e-4" '
           'ixy="0" ixz="0" iyy="1e-4" iyz="0" izz="1e-4"/></inertial></link>'
           '<joint name="finger1" type="prismatic"><parent link="link2"/><child link="left"/><origin xyz="1 0 0"/>'
           '<axis xyz="0 1 0"/><limit lower="0" upper="0.05" effort="20" velocity="1"/></joint>'
           '<joint name="finger2" type="prismatic"><parent link="link2"/><child link="right"/><origin xyz="1 0 0"/>'
           '<axis xyz="0 1 0"/><limit lower="-0.05" upper="0" effort="20" velocity="1"/>'
           '<mimic joint="finger1" multiplier="-1" offset="0"/></joint></robot>')


def _gripper_log(tmp_path):
    """A two-link arm in a vertical plane with a two-finger gripper whose second finger mimics
    the first, its URDF and a log of it that also logs the mimic joint: ``(urdf, model, names,
    columns)``."""
    from dense_armor.robots import minimal_urdf

    text = minimal_urdf().replace("</robot>", GRIPPER).replace('<axis xyz="0 0 1"/>', '<axis xyz="0 1 0"/>', 2)
    urdf = tmp_path / "gripper.urdf"
    urdf.write_text(text)
    model = parse_urdf(text, mimic=True)
    assert model.joint_names == ("joint1", "joint2", "finger1")
    rate, T = 200.0, 2000
    t = np.arange(T) / rate
    q = np.stack([0.9 * np.sin(1.3 * t), 0.7 * np.cos(1.7 * t), 0.025 + 0.02 * np.sin(2.9 * t)], 1)
    qd = np.stack([1.17 * np.cos(1.3 * t), -1.19 * np.sin(1.7 * t), 0.058 * np.cos(2.9 * t)], 1)
    qdd = np.stack([-1.521 * np.sin(1.3 * t), -2.023 * np.cos(1.7 * t), -0.1682 * np.sin(2.9 * t)], 1)
    real = da.attach_payload(model, "link2", 0.4, com=(0.5, 0.0, 0.0))
    tau = np.asarray(jax.vmap(da.rnea, in_axes=(None, 0, 0, 0))(real, q, qd, qdd)) + 0.2 * qd
    names = ["t"]
    columns = [t]
    for j, name in enumerate(model.joint_names):
        names += [f"q_{name}", f"qd_{name}", f"tau_{name}"]
        columns += [q[:, j], qd[:, j], tau[:, j]]
    names += ["q_finger2", "qd_finger2", "tau_finger2"]  # the mimic joint, as a JointState would log it
    columns += [-q[:, 2], -qd[:, 2], np.zeros(T)]
    return urdf, model, names, columns


@pytest.mark.slow
def test_the_command_line_replays_a_coupled_gripper(tmp_path, capsys):
    """``--mimic`` learns the gripper from a log that also logs the mimic joint (its columns
    are not coordinates, and are left unread)."""
    from dense_armor.cli import main

    urdf, model, names, columns = _gripper_log(tmp_path)
    log = tmp_path / "log.csv"
    np.savetxt(log, np.column_stack(columns), delimiter=",", header=",".join(names), comments="")
    code = main(["replay", str(urdf), str(log), "--mimic", "--learner", "robot", "--report", str(tmp_path / "r.json")])
    out, err = capsys.readouterr()
    assert code == 0, err
    import json

    report = json.loads((tmp_path / "r.json").read_text())
    assert report["rmse_learner"] < 0.1 * report["rmse_nominal"]
    assert set(report["physical"]["joints"]) == {"joint1", "joint2", "finger1"}
    assert set(report["physical"]["bodies"]) == {"link1", "link2", "left", "right"}
    code = main(["info", str(urdf), "--mimic"])
    out, err = capsys.readouterr()
    assert code == 0 and "finger2 mimics finger1: q = -1 q_finger1 + 0" in out and "2 movable joints" not in out
    # identify reads what it wrote back with the coupling too
    code = main(["identify", str(urdf), str(log), "--mimic", "-o", str(tmp_path / "id.urdf")])
    out, err = capsys.readouterr()
    assert code == 0, err
    identified = parse_urdf(tmp_path / "id.urdf", mimic=True)
    assert identified.joint_names == model.joint_names and len(identified.mimics) == 1
    assert json.loads((tmp_path / "id.json").read_text())["source"]["rmse_written"] < 0.1 * report["rmse_nominal"]


@pytest.mark.slow
def test_armature_of_a_coupled_robot_matches_pinocchio():
    path = example_robot_urdf(PANDA)
    armature = np.linspace(0.1, 0.8, 8)
    model = parse_urdf(path, mimic=True).replace(armature=armature)
    oracle = pin.buildModelFromUrdf(str(path), mimic=True)
    data = oracle.createData()
    iv = [oracle.joints[oracle.getJointId(name)].idx_v for name in model.joint_names]
    pin_armature = np.zeros(oracle.nv)
    pin_armature[iv] = armature
    oracle.armature = pin_armature
    q, qd, qdd = np.random.default_rng(2).uniform(-1, 1, (3, model.n))
    qp, vp, ap = (np.zeros(oracle.nv) for _ in range(3))
    qp[iv], vp[iv], ap[iv] = q, qd, qdd
    tau = pin.rnea(oracle, data, qp, vp, ap)[iv]
    close(da.rnea(model, q, qd, qdd), tau)
    M = pin.crba(oracle, data, qp)
    close(da.crba(model, q), (np.triu(M) + np.triu(M, 1).T)[np.ix_(iv, iv)])
    close(da.aba(model, q, qd, tau), qdd, 1e-9)


@pytest.mark.slow
def test_locking_a_coupled_finger_locks_both_in_replay_and_identify(tmp_path, capsys):
    from dense_armor.cli import main

    urdf, model, names, columns = _gripper_log(tmp_path)
    arm = tmp_path / "arm.csv"  # the arm, and the mimic finger as a JointState would still log it
    np.savetxt(arm, np.column_stack(columns[:7] + columns[10:]), delimiter=",", header=",".join(names[:7] + names[10:]),
               comments="")
    code = main(["replay", str(urdf), str(arm), "--mimic", "--lock", "finger1=0.03"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "(2 joints: joint1, joint2; locked finger1=0.03)" in out
    code = main(["identify", str(urdf), str(arm), "--mimic", "--lock", "finger1=0.03", "-o", str(tmp_path / "id.urdf")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "id.urdf (the locked finger1, finger2 as the URDF has them);" in out
    identified = parse_urdf(tmp_path / "id.urdf", mimic=True)  # the fingers as the URDF has them, with its inertials
    assert identified.joint_names == model.joint_names and identified.mimics == model.mimics
    np.testing.assert_array_equal(np.asarray(identified.inertia)[2:], np.asarray(model.inertia)[2:])
    relocked, locked = lock_joints(identified, {"finger1": 0.03}), lock_joints(model, {"finger1": 0.03})
    assert relocked.n == relocked.n_bodies == 2  # locked again: both fingers fixed, at +-0.03, the robot learned
    np.testing.assert_allclose(np.asarray(relocked.frame_translation), np.asarray(locked.frame_translation), atol=1e-12)
    code = main(["replay", str(urdf), str(arm), "--mimic", "--lock", "finger2=0.03"])
    out, err = capsys.readouterr()
    assert code == 2 and "'finger2' mimics 'finger1'; lock 'finger1'" in err
