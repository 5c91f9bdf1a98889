"""Every dynamics quantity against Pinocchio, on real robots and on random URDF trees.

Robots: Panda (9 joints, the fingers included: the second finger's ``mimic`` tag is kept as an
independent coordinate, as Pinocchio does), Panda with the fingers locked, UR5, the double
pendulum (revolute and continuous), and 20 random trees from ``tests/urdf_factory.py``. For each
robot one vmapped function computes every quantity on a batch of random states, and the result
is compared with ``tests/oracle.py`` (Pinocchio in the library's conventions).

Why eagerly: the dynamics are unrolled into straight-line scalar code, which XLA compiles
slowly (Panda, default options, CPU seconds: regressor 22, ABA 21, forward kinematics 19, CRBA
11, RNEA 8). Evaluating the maths op by op under ``jax.disable_jit()``, with the states batched
by ``vmap``, costs a few seconds per robot instead, so the broad comparison runs eagerly and
``test_jit_matches_eager`` checks on a small tree that the compiled functions give the same
numbers.

Tolerances are relative to the largest entry of the reference (floored at 1, so near-zero
quantities are held to the same absolute level):

- float64: 1e-10. Both sides are float64 recursions of a few dozen operations per joint; the
  worst difference measured over all robots and states is 5e-14 (ABA on a random tree), most
  are around 1e-15.
- float32 (q, qd, qdd, tau cast to float32; the model follows q): 1e-5 for every quantity that
  is a forward recursion (placements, Jacobians, rnea, crba, gravity, bias, regressor). Unit
  round-off is 6e-8 and a 9-joint recursion accumulates some tens of round-offs; measured worst
  4e-7, so the bound has a 25x margin and still catches any float64-only constant or a lost
  digit. ABA solves ``M qdd = tau - h``, so its forward error grows with the condition number
  of ``M`` (up to about 1e3 here: the Panda's fingers weigh 15 g); it gets 1e-4 (measured
  6e-6), and its backward error ``|M qdd32 + h - tau| / |tau|`` with Pinocchio's float64 ``M``
  and ``h``, which a stable algorithm keeps at the float32 level whatever the conditioning, gets
  the 1e-5 of the forward recursions (measured 3e-7).
"""

from __future__ import annotations

import functools
import xml.etree.ElementTree as ET

import jax
import jax.numpy as jnp
import numpy as np
import pytest

pin = pytest.importorskip("pinocchio")

from oracle import PinOracle  # noqa: E402
from urdf_factory import (  # noqa: E402
    dfs_joint_order,
    example_robot_urdf,
    example_robot_urdfs,
    lock_joints,
    random_tree,
)

from dense_armor.dynamics import (  # noqa: E402
    aba,
    body_regressor,
    crba,
    forward_kinematics,
    frame_jacobian,
    generalized_gravity,
    joint_torque_regressor,
    nonlinear_effects,
    rnea,
)
from dense_armor.dynamics import traversal  # noqa: E402
from dense_armor.urdf import URDFWarning, parse_urdf  # noqa: E402

RTOL64 = 1e-10
RTOL32 = 1e-5
RTOL32_ABA = 1e-4  # forward error of a linear solve in float32, see the module docstring
N_STATES = 4
PANDA = "panda_description/urdf/panda.urdf"
PANDA_FINGERS = ("panda_finger_joint1", "panda_finger_joint2")
ROBOTS = {
    "panda": PANDA,
    "ur5": "ur_description/urdf/ur5_robot.urdf",
    "double_pendulum": "double_pendulum_description/urdf/double_pendulum.urdf",
    "double_pendulum_continuous": "double_pendulum_description/urdf/double_pendulum_continuous.urdf",
}
N_RANDOM = 20
CASES = [*ROBOTS, "panda_locked", *(f"random_{s}" for s in range(N_RANDOM)),
         "random_reversed_0", "random_reversed_1", "random_reversed_2"]
# the dynamics compile once a robot: Panda by default, the others under the slow marker
CASES64 = ["panda", *(pytest.param(name, marks=pytest.mark.slow) for name in CASES if name != "panda")]
# float32 on the real robots and a few random trees keeps the compile count down
CASES32 = ["panda", "ur5", "double_pendulum_continuous", "random_1"]


def expected_joint_order(xml: str) -> tuple[str, ...]:
    """SPEC section 3: depth-first, children in the order the file lists their joints.

    Pinocchio (urdfdom) sorts the children of a link by joint name instead; the two agree on
    chains and on files whose sibling joints are listed in name order. The oracle maps by name,
    so the dynamics checks do not depend on which order the library picks.
    """
    return dfs_joint_order(xml)


class Case:
    """One robot: our model (parsed from the file when there is one) and the oracle."""

    def __init__(self, name: str):
        self.name = name
        self.tree = None
        if name in ROBOTS:
            self.path = example_robot_urdf(ROBOTS[name])
            self.xml = self.path.read_text()
            self.model = parse_urdf(self.path)
            locked = ()
        elif name == "panda_locked":
            self.path = None
            self.xml = lock_joints(example_robot_urdf(PANDA).read_text(), PANDA_FINGERS)
            self.model = parse_urdf(self.xml)
            locked = PANDA_FINGERS
        else:
            seed = int(name.rsplit("_", 1)[1])
            self.tree = random_tree(seed, sibling_names="reversed" if "reversed" in name else "file")
            self.path = None
            self.xml = self.tree.xml
            self.model = parse_urdf(self.xml)
            locked = ()
        source = self.path if self.path is not None else example_robot_urdf(PANDA) if locked else self.xml
        self.oracle = PinOracle(source, joint_names=self.model.joint_names, locked=locked)
        self.links = self.model.frame_names
        # Jacobians at the root and at every tip of the tree: every joint column appears, and
        # tips sit behind fixed joints (tool frames, Panda's hand_tcp) as often as not
        root = ET.fromstring(self.xml.encode())
        parents = {j.find("parent").get("link") for j in root.findall("joint")}
        self.jacobian_frames = tuple(f for i, f in enumerate(self.links) if i == 0 or f not in parents)

    def states(self, seed: int = 0, count: int = N_STATES):
        """Random (q, qd, qdd, tau) batches; joint positions cover whole turns."""
        rng = np.random.default_rng(seed)
        n = self.model.n
        span = np.array([0.4 if k == "prismatic" else np.pi for k in self.model.joint_kinds])
        q = rng.uniform(-1, 1, (count, n)) * span
        qd = rng.uniform(-2, 2, (count, n))
        qdd = rng.uniform(-3, 3, (count, n))
        # torques that produce moderate accelerations, so aba is checked in a useful range
        tau = np.stack([self.oracle.rnea(q[i], qd[i], rng.uniform(-3, 3, n)) for i in range(count)])
        return q, qd, qdd, tau

    def reference(self, q, qd, qdd, tau) -> dict[str, np.ndarray]:
        o = self.oracle
        out: dict[str, list] = {k: [] for k in ("R", "p", "J", "rnea", "crba", "nle", "gravity",
                                                "aba", "regressor")}
        for i in range(len(q)):
            R, p = o.frame_placements(q[i], self.links)
            out["R"].append(R)
            out["p"].append(p)
            out["J"].append(o.frame_jacobians(q[i], self.jacobian_frames))
            out["rnea"].append(o.rnea(q[i], qd[i], qdd[i]))
            out["crba"].append(o.crba(q[i]))
            out["nle"].append(o.nonlinear_effects(q[i], qd[i]))
            out["gravity"].append(o.generalized_gravity(q[i]))
            out["aba"].append(o.aba(q[i], qd[i], tau[i]))
            out["regressor"].append(o.joint_torque_regressor(q[i], qd[i], qdd[i]))
        return {k: np.stack(v) for k, v in out.items()}


@functools.cache
def case(name: str) -> Case:
    return Case(name)


def _everything(model, frames, q, qd, qdd, tau):
    R, p = forward_kinematics(model, q)
    J = jnp.stack([frame_jacobian(model, q, f) for f in frames])
    return {
        "R": R,
        "p": p,
        "J": J,
        "rnea": rnea(model, q, qd, qdd),
        "crba": crba(model, q),
        "nle": nonlinear_effects(model, q, qd),
        "gravity": generalized_gravity(model, q),
        "aba": aba(model, q, qd, tau),
        "regressor": joint_torque_regressor(model, q, qd, qdd),
    }


def everything(model, frames, q, qd, qdd, tau):
    """Every quantity on a batch of states, op by op (see the module docstring); Jacobians of
    the named frames."""
    with jax.disable_jit():
        return jax.vmap(functools.partial(_everything, model, frames))(q, qd, qdd, tau)


def rel_err(actual, expected) -> float:
    actual = np.asarray(actual, np.float64)
    expected = np.asarray(expected, np.float64)
    assert actual.shape == expected.shape, (actual.shape, expected.shape)
    scale = max(float(np.max(np.abs(expected), initial=0.0)), 1.0)
    return float(np.max(np.abs(actual - expected), initial=0.0)) / scale


def assert_close(actual, expected, rtol, what):
    err = rel_err(actual, expected)
    assert err <= rtol, f"{what}: relative error {err:.3e} > {rtol:.0e}"


# --- structure ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_structure_matches_pinocchio(name):
    c = case(name)
    m, o = c.model, c.oracle
    assert m.n == o.model.nv
    assert m.joint_names == expected_joint_order(c.xml)
    assert len(m.joint_kinds) == len(m.parents) == m.n
    pin_kind = {1: "revolute", 2: "continuous"}
    for i, jn in enumerate(m.joint_names):
        joint = o.model.joints[o.model.getJointId(jn)]
        short = joint.shortname()
        kind = "prismatic" if "Prismatic" in short or short.startswith("JointModelP") else pin_kind[joint.nq]
        assert m.joint_kinds[i] == kind, (jn, m.joint_kinds[i], short)
        # parent body, by name: Pinocchio's parent joint of this joint
        parent = o.model.parents[o.model.getJointId(jn)]
        expected_parent = -1 if parent == 0 else m.joint_names.index(o.model.names[parent])
        assert m.parents[i] == expected_parent, (jn, m.parents[i], expected_parent)
    assert set(m.frame_names) == {f.name for f in o.model.frames if f.type == pin.FrameType.BODY}
    assert len(m.frame_names) == len(set(m.frame_names))
    assert_close(m.inertia, o.inertia(), 1e-12, "inertial parameters")
    np.testing.assert_allclose(np.asarray(m.gravity), o.gravity(), rtol=0, atol=1e-15)
    if c.tree is not None:
        assert m.joint_names == c.tree.expected_joint_names
        assert m.joint_kinds == c.tree.expected_joint_kinds
        assert tuple(m.parents) == c.tree.expected_parents
        assert set(m.frame_names) == c.tree.link_names


@pytest.mark.parametrize("name", CASES)
def test_limits_match_urdf(name):
    c = case(name)
    m, lim = c.model, c.oracle.limits()
    bounded = np.array([k != "continuous" for k in m.joint_kinds])
    np.testing.assert_array_equal(np.asarray(m.lower)[bounded], lim["lower"][bounded])
    np.testing.assert_array_equal(np.asarray(m.upper)[bounded], lim["upper"][bounded])
    # a <limit> without effort or velocity: the oracle filled in 0 for urdfdom; ours must not
    # invent a zero limit (SPEC: accepted, i.e. no limit)
    root = ET.fromstring(c.xml.encode())
    for i, jn in enumerate(m.joint_names):
        (el,) = [j for j in root.findall("joint") if j.get("name") == jn]
        limit = el.find("limit")
        for attr, ours in (("effort", m.effort_limit), ("velocity", m.velocity_limit)):
            if limit is not None and limit.get(attr) is not None:
                assert float(ours[i]) == float(limit.get(attr)), (jn, attr)
            else:
                assert float(ours[i]) > 0, (jn, attr, float(ours[i]))


# --- dynamics, float64 ---------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES64)
def test_float64_matches_pinocchio(name):
    check_float64(name)


# op by op through the level walk is slow: the real robots and trees that branch, with every
# joint kind (test_a_deep_tree_... compiles a level walk in the default run)
LEVEL_CASES = ["panda", "ur5", "double_pendulum_continuous", "random_0", "random_3", "random_reversed_1"]


@pytest.mark.slow
@pytest.mark.parametrize("name", LEVEL_CASES)
def test_the_walk_over_levels_matches_pinocchio(name, monkeypatch):
    """What runs over a walk of the tree, with every tree walked level by level in a
    ``lax.scan`` (what trees of more than ``UNROLLED_BODIES`` bodies get; ``aba`` then the
    articulated-body algorithm), op by op at one state."""
    monkeypatch.setattr(traversal, "UNROLLED_BODIES", 0)
    c = case(name)
    model, o = c.model, c.oracle
    assert isinstance(traversal.walk(model.parents), traversal.Levels)
    q, qd, qdd, tau = (x[0] for x in c.states(seed=1, count=1))
    body = model.n - 1
    with jax.disable_jit():
        ours = {"rnea": rnea(model, q, qd, qdd), "nle": nonlinear_effects(model, q, qd), "gravity": generalized_gravity(model, q),
                "aba": aba(model, q, qd, tau), "body": body_regressor(model, q, qd, qdd, body)}
    expected = {"rnea": o.rnea(q, qd, qdd), "nle": o.nonlinear_effects(q, qd), "gravity": o.generalized_gravity(q),
                "aba": o.aba(q, qd, tau), "body": o.joint_torque_regressor(q, qd, qdd)[:, 10 * body :]}
    for key, value in expected.items():
        assert_close(ours[key], value, RTOL64, f"{name} {key}")


def check_float64(name):
    c = case(name)
    q, qd, qdd, tau = c.states(seed=1)
    ref = c.reference(q, qd, qdd, tau)
    ours = everything(c.model, c.jacobian_frames, *(jnp.asarray(x) for x in (q, qd, qdd, tau)))
    errors = {}
    for key, value in ours.items():
        assert value.dtype == jnp.float64, (key, value.dtype)
        errors[key] = rel_err(value, ref[key])
    bad = {k: f"{e:.3e}" for k, e in errors.items() if not e <= RTOL64}
    assert not bad, f"{name}: relative errors above {RTOL64:.0e}: {bad}"
    # the regressor's identity with the model's own parameters
    tau_y = np.einsum("bij,j->bi", np.asarray(ours["regressor"]), np.asarray(c.model.inertia).reshape(-1))
    assert_close(tau_y, ref["rnea"], RTOL64, "regressor @ inertia vs rnea")


# --- dynamics, float32 ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("name", CASES32)
def test_float32_matches_pinocchio(name):
    c = case(name)
    q, qd, qdd, tau = c.states(seed=2)
    # the reference at the float32-rounded inputs, so only the arithmetic is compared
    q, qd, qdd, tau = (x.astype(np.float32) for x in (q, qd, qdd, tau))
    ref = c.reference(*(x.astype(np.float64) for x in (q, qd, qdd, tau)))
    ours = everything(c.model, c.jacobian_frames, *(jnp.asarray(x) for x in (q, qd, qdd, tau)))
    errors = {}
    for key, value in ours.items():
        assert value.dtype == jnp.float32, (key, value.dtype)
        errors[key] = rel_err(value, ref[key])
    # aba: backward error with the float64 reference M and h
    qdd32 = np.asarray(ours["aba"], np.float64)
    residual = np.einsum("bij,bj->bi", ref["crba"], qdd32) + ref["nle"] - tau.astype(np.float64)
    errors["aba (backward)"] = float(np.max(np.abs(residual))) / max(float(np.max(np.abs(tau))), 1.0)
    bound = {k: RTOL32_ABA if k == "aba" else RTOL32 for k in errors}
    bad = {k: f"{e:.3e} > {bound[k]:.0e}" for k, e in errors.items() if not e <= bound[k]}
    assert not bad, f"{name}: float32 relative errors: {bad}"


# --- joint order where the file and Pinocchio disagree -------------------------------------


def test_reversed_sibling_names_differ_from_pinocchio_order():
    """The trees named backwards do exercise the case where urdfdom's name sort and the file
    order of sibling joints disagree (otherwise the reversed cases above prove nothing)."""
    differing = [s for s in range(3) if not case(f"random_reversed_{s}").oracle.same_order_as]
    assert differing, "no random_reversed tree has siblings out of name order"


# --- every URDF of example-robot-data: parse, topology and inertias ------------------------


def _erd_cases():
    """Every example-robot-data URDF (the oracle is built in the test, not at collection)."""
    return sorted(example_robot_urdfs())


def _non_psd_inertia_links(xml: str) -> list[str]:
    """Links whose rotational inertia has an eigenvalue below -1e-12 kg m^2 (relative above
    1 kg m^2): iCub's all-zero tensors with 1e-20 round-off in one entry are not refused."""
    out = []
    for link in ET.fromstring(xml.encode()).findall("link"):
        inertia = link.find("inertial/inertia")
        if inertia is None:
            continue
        g = {k: float(inertia.get(k, 0.0)) for k in ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")}
        tensor = np.array([[g["ixx"], g["ixy"], g["ixz"]], [g["ixy"], g["iyy"], g["iyz"]],
                           [g["ixz"], g["iyz"], g["izz"]]])
        if np.linalg.eigvalsh(tensor)[0] < -1e-12 * max(np.abs(tensor).max(), 1.0):
            out.append(link.get("name"))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("key", _erd_cases())
def test_example_robot_data_parses_like_pinocchio(key):
    path = example_robot_urdfs()[key]
    xml = path.read_text()
    try:
        oracle = PinOracle(path)
    except Exception:  # noqa: BLE001 - urdfdom refuses it (e.g. ur3.urdf has no robot name)
        pytest.skip(f"Pinocchio (urdfdom) refuses {key}")
    if oracle.n == 0:
        # no movable joint: a model with n == 0 or a clear ValueError are both acceptable
        try:
            model = parse_urdf(path)
        except ValueError:
            return
        assert model.n == 0
        return
    bad_inertia = _non_psd_inertia_links(xml)
    if bad_inertia:
        # Pinocchio loads these (TIAGo's antennas: |ixy| > ixx, iyy; romeo_laas_small); the
        # library loads them too, warning about each such link, and refuses them when strict
        with pytest.warns(URDFWarning) as record:
            parse_urdf(path)
        warned = " ".join(str(w.message) for w in record)
        assert all(repr(link) in warned for link in bad_inertia), warned
        with pytest.raises(ValueError) as err:
            parse_urdf(path, strict=True)
        assert str(path) in str(err.value) and "strict" in str(err.value)
    model = parse_urdf(path)
    assert model.joint_names == expected_joint_order(xml)
    oracle = PinOracle(path, joint_names=model.joint_names)
    assert_close(model.inertia, oracle.inertia(), 1e-12, f"{key} inertial parameters")
    assert set(model.frame_names) == {
        f.name for f in oracle.model.frames if f.type == pin.FrameType.BODY
    }


# --- the compiled functions --------------------------------------------------------------

# compiling is the slow part: one small tree with all three joint kinds and fixed joints
JIT_CASES = ["random_38"]


@pytest.mark.slow
@pytest.mark.parametrize("name", JIT_CASES)
def test_jit_matches_eager(name):
    c = case(name)
    q, qd, qdd, tau = (jnp.asarray(x[0]) for x in c.states(seed=3))
    eager = jax.tree.map(lambda x: x[0], everything(c.model, c.model.frame_names, q[None], qd[None], qdd[None], tau[None]))
    compiled = {
        "R": forward_kinematics(c.model, q)[0],
        "p": forward_kinematics(c.model, q)[1],
        "J": jnp.stack([frame_jacobian(c.model, q, f) for f in c.model.frame_names]),
        "rnea": rnea(c.model, q, qd, qdd),
        "crba": crba(c.model, q),
        "nle": nonlinear_effects(c.model, q, qd),
        "gravity": generalized_gravity(c.model, q),
        "aba": aba(c.model, q, qd, tau),
        "regressor": joint_torque_regressor(c.model, q, qd, qdd),
    }
    for key in compiled:
        assert_close(compiled[key], eager[key], 1e-13, f"{name} {key}: jit vs eager")


def test_a_deep_tree_is_walked_by_levels_and_matches_pinocchio():
    """A tree of 24 joints, past ``UNROLLED_BODIES``, compiled: its walk is the ``lax.scan``
    over depth levels, and ``aba`` the articulated-body algorithm."""
    tree = random_tree(1, n_movable=24)
    model = parse_urdf(tree.xml)
    assert isinstance(traversal.walk(model.parents), traversal.Levels)
    oracle = PinOracle(tree.xml, joint_names=model.joint_names)
    rng = np.random.default_rng(0)
    q, qd, qdd = rng.uniform(-1, 1, (3, model.n))
    tau = oracle.rnea(q, qd, qdd)
    assert_close(rnea(model, q, qd, qdd), tau, RTOL64, "rnea")
    assert_close(generalized_gravity(model, q), oracle.generalized_gravity(q), RTOL64, "generalized_gravity")
    assert_close(nonlinear_effects(model, q, qd), oracle.nonlinear_effects(q, qd), RTOL64, "nonlinear_effects")
    assert_close(aba(model, q, qd, tau), qdd, RTOL64, "aba")
    body = model.n - 1
    assert_close(body_regressor(model, q, qd, qdd, body), oracle.joint_torque_regressor(q, qd, qdd)[:, 10 * body :], RTOL64,
                 "body_regressor")


@pytest.mark.slow
@pytest.mark.parametrize("name", ["panda", "random_3", "deep"])
def test_armature_matches_pinocchio(name):
    with jax.disable_jit():  # op by op: nothing to compile
        _armature_matches_pinocchio(name)


def _armature_matches_pinocchio(name):
    """A rotor inertia per joint (``model.armature``, Pinocchio's ``model.armature``): on the
    mass matrix's diagonal, in ``rnea`` and ``aba`` (the deep tree's is the articulated-body
    algorithm over levels), not in the bias forces or the regressor of the links."""
    if name == "deep":
        xml = random_tree(1, n_movable=24).xml
        model, source = parse_urdf(xml), xml
    else:
        c = case(name)
        model, source = c.model, c.path if c.path is not None else c.xml
    oracle = PinOracle(source, joint_names=model.joint_names)
    rng = np.random.default_rng(7)
    armature = rng.uniform(0.01, 0.5, model.n)
    model = model.replace(armature=armature)
    pin_armature = np.zeros(oracle.model.nv)
    pin_armature[oracle._iv] = armature
    oracle.model.armature = pin_armature
    for _ in range(2):
        q, qd, qdd = rng.uniform(-1, 1, (3, model.n))
        tau = oracle.rnea(q, qd, qdd)
        assert_close(rnea(model, q, qd, qdd), tau, RTOL64, "rnea")
        assert_close(crba(model, q), oracle.crba(q), RTOL64, "crba")
        assert_close(aba(model, q, qd, tau), qdd, RTOL64, "aba")
        assert_close(nonlinear_effects(model, q, qd), oracle.nonlinear_effects(q, qd), RTOL64, "nonlinear_effects")
        Y = joint_torque_regressor(model, q, qd, qdd)
        assert_close(Y @ np.asarray(model.inertia).reshape(-1) + armature * qdd, tau, RTOL64, "regressor + armature")


@pytest.mark.parametrize("name", ["panda", "random_3", "random_5"])
def test_the_urdf_joint_dynamics_are_kept_as_pinocchio_reads_them(name):
    c = case(name)
    assert_close(c.model.damping, np.asarray(c.oracle.model.damping)[c.oracle._iv], 0.0, "damping")
    assert_close(c.model.friction, np.asarray(c.oracle.model.friction)[c.oracle._iv], 0.0, "friction")
    np.testing.assert_array_equal(np.asarray(c.model.armature), 0.0)
