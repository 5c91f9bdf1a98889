"""Bad URDFs get a clear ``ValueError`` naming the file and the element (SPEC section 5), and
the documented leniencies hold (SPEC section 3).

Every bad input is parsed twice, from a string and from a file, and the message must name the
offending element (joint or link name) and, for the file, the path. A hypothesis test mutates a
good URDF at random and requires a model or a ``ValueError``, never another exception.
"""

from __future__ import annotations

import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from urdf_factory import example_robot_urdf, random_tree

from dense_armor.dynamics.urdf_dynamics import RigidBodyModel
from dense_armor.robots import minimal_urdf, write_minimal_urdf
from dense_armor.urdf import URDFError, URDFWarning, parse_urdf

INERTIAL = (
    '<inertial><origin xyz="0.1 0 0"/><mass value="{m}"/>'
    '<inertia ixx="{ixx}" ixy="{ixy}" ixz="0" iyy="0.01" iyz="0" izz="0.01"/></inertial>'
)


def link(name: str, mass="1.0", ixx="0.01", ixy="0") -> str:
    return f'<link name="{name}">{INERTIAL.format(m=mass, ixx=ixx, ixy=ixy)}</link>'


def joint(name, parent, child, kind="revolute", xyz="0 0 0.1", rpy="0 0 0", axis="0 0 1",
          limit='<limit lower="-1" upper="1" effort="10" velocity="2"/>') -> str:
    origin = f'<origin xyz="{xyz}" rpy="{rpy}"/>'
    axis_el = "" if axis is None else f'<axis xyz="{axis}"/>'
    return (f'<joint name="{name}" type="{kind}">{origin}<parent link="{parent}"/>'
            f'<child link="{child}"/>{axis_el}{limit}</joint>')


def robot(*elements: str) -> str:
    return '<?xml version="1.0"?>\n<robot name="r">\n' + "\n".join(elements) + "\n</robot>\n"


def two_link(**joint_kwargs) -> str:
    """base -> j1 -> l1 -> j2 -> l2, with ``joint_kwargs`` applied to j2."""
    return robot('<link name="base"/>', link("l1"), link("l2"),
                 joint("j1", "base", "l1"), joint("j2", "l1", "l2", **joint_kwargs))


GOOD = two_link()


def assert_refused(xml: str, tmp_path: Path, *names: str) -> None:
    """Parsing ``xml`` from a string and from a file raises a URDFError (a ValueError) whose
    message names every one of ``names`` (and the file)."""
    path = tmp_path / "bad_robot.urdf"
    path.write_text(xml)
    for source in (xml, path, str(path)):
        with pytest.raises(ValueError) as err:
            parse_urdf(source)
        assert isinstance(err.value, URDFError), type(err.value)
        msg = str(err.value)
        for name in names:
            assert name in msg, f"{name!r} not in message {msg!r}"
        if not isinstance(source, str) or not source.lstrip().startswith("<"):
            assert str(path) in msg, f"file not named in {msg!r}"


def test_good_robot_parses():
    model = parse_urdf(GOOD)
    assert model.joint_names == ("j1", "j2")


# --- SPEC section 5: malformed documents ----------------------------------------------------


def test_malformed_xml(tmp_path):
    assert_refused(GOOD.replace("</robot>", ""), tmp_path)
    assert_refused('<robot name="r"><link name="a"></robot>', tmp_path)


def test_not_a_robot(tmp_path):
    assert_refused('<?xml version="1.0"?><model name="r"><link name="a"/></model>', tmp_path, "model")


def test_no_links(tmp_path):
    assert_refused('<robot name="r"></robot>', tmp_path)


def test_entity_expansion_bomb_is_refused_quickly(tmp_path):
    lol = ('<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lollollollollollollollollollol">'
           + "".join(f'<!ENTITY lol{i} "{("&lol%s;" % ("" if i == 1 else i - 1)) * 10}">' for i in range(1, 10))
           + ']><robot name="&lol9;"><link name="a"/></robot>')
    with pytest.raises(ValueError):
        parse_urdf(lol)


# --- SPEC section 5: joints ---------------------------------------------------------------


def test_unknown_joint_type(tmp_path):
    assert_refused(two_link(kind="hinge"), tmp_path, "j2", "hinge")


@pytest.mark.parametrize("kind", ["floating", "planar"])
def test_floating_and_planar_joints(tmp_path, kind):
    assert_refused(two_link(kind=kind), tmp_path, "j2", kind)


def test_joint_without_type(tmp_path):
    assert_refused(GOOD.replace('<joint name="j2" type="revolute">', '<joint name="j2">'), tmp_path, "j2")


def test_missing_parent_link(tmp_path):
    xml = robot('<link name="base"/>', link("l1"), link("l2"),
                joint("j1", "base", "l1"), joint("j2", "ghost", "l2"))
    assert_refused(xml, tmp_path, "j2", "ghost")


def test_missing_child_link(tmp_path):
    xml = robot('<link name="base"/>', link("l1"), joint("j1", "base", "l1"), joint("j2", "l1", "ghost"))
    assert_refused(xml, tmp_path, "j2", "ghost")


@pytest.mark.parametrize("end", ["parent", "child"])
def test_missing_parent_or_child_element(tmp_path, end):
    j2 = joint("j2", "l1", "l2")
    broken = re.sub(rf'<{end} link="[^"]*"/>', "", j2)
    assert_refused(GOOD.replace(j2, broken), tmp_path, "j2", end)


def test_missing_link_attribute(tmp_path):
    j2 = joint("j2", "l1", "l2")
    assert_refused(GOOD.replace(j2, j2.replace('<child link="l2"/>', "<child/>")), tmp_path, "j2")


def test_two_roots(tmp_path):
    xml = robot('<link name="base"/>', link("l1"), link("island"), joint("j1", "base", "l1"))
    assert_refused(xml, tmp_path, "base", "island")


def test_cycle_without_root(tmp_path):
    xml = robot(link("a"), link("b"), joint("ja", "a", "b"), joint("jb", "b", "a"))
    assert_refused(xml, tmp_path, "cycle")


def test_cycle_beside_a_root(tmp_path):
    # base -> l1 is a fine tree; b <-> c is a loop nobody reaches
    xml = robot('<link name="base"/>', link("l1"), link("b"), link("c"),
                joint("j1", "base", "l1"), joint("jb", "b", "c"), joint("jc", "c", "b"))
    assert_refused(xml, tmp_path, "cycle")
    path = tmp_path / "bad_robot.urdf"
    msg = str(pytest.raises(ValueError, parse_urdf, path).value)
    assert "'b'" in msg or "'c'" in msg or "jb" in msg or "jc" in msg, msg


def test_self_loop(tmp_path):
    xml = robot('<link name="base"/>', link("l1"), joint("j1", "base", "l1"), joint("j2", "l1", "l1"))
    assert_refused(xml, tmp_path, "l1")


def test_link_with_two_parents(tmp_path):
    xml = robot('<link name="base"/>', link("l1"), link("l2"), joint("j1", "base", "l1"),
                joint("j2", "l1", "l2"), joint("j3", "base", "l2"))
    assert_refused(xml, tmp_path, "l2", "j2", "j3")


def test_duplicate_link_names(tmp_path):
    xml = robot('<link name="base"/>', link("l1"), link("l1"), joint("j1", "base", "l1"))
    assert_refused(xml, tmp_path, "l1")


def test_duplicate_joint_names(tmp_path):
    # urdfdom refuses this too; silently keeping both would give two coordinates one name
    xml = robot('<link name="base"/>', link("l1"), link("l2"), joint("j1", "base", "l1"), joint("j1", "l1", "l2"))
    assert_refused(xml, tmp_path, "j1")


def test_zero_axis(tmp_path):
    assert_refused(two_link(axis="0 0 0"), tmp_path, "j2")


# --- SPEC section 5: numbers --------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [
        {"xyz": "nan 0 0"},
        {"xyz": "0 inf 0"},
        {"rpy": "0 0 -inf"},
        {"axis": "0 nan 1"},
        {"limit": '<limit lower="nan" upper="1" effort="10" velocity="2"/>'},
        {"xyz": "0 0"},
        {"xyz": "0 0 0 0"},
        {"rpy": "a b c"},
        {"axis": "0,0,1"},
        {"limit": '<limit lower="-1" upper="one" effort="10" velocity="2"/>'},
    ],
    ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()),
)
def test_bad_joint_numbers(tmp_path, kwargs):
    assert_refused(two_link(**kwargs), tmp_path, "j2")


@pytest.mark.parametrize(
    "kwargs",
    [{"mass": "nan"}, {"mass": "inf"}, {"mass": "heavy"}, {"ixx": "nan"}, {"ixy": "-inf"}],
    ids=lambda kw: "-".join(f"{k}={v}" for k, v in kw.items()),
)
def test_bad_link_numbers(tmp_path, kwargs):
    xml = robot('<link name="base"/>', link("l1"), link("l2", **kwargs),
                joint("j1", "base", "l1"), joint("j2", "l1", "l2"))
    assert_refused(xml, tmp_path, "l2")


def test_bad_inertial_origin(tmp_path):
    bad = '<link name="l2"><inertial><origin xyz="0 nan 0"/><mass value="1"/></inertial></link>'
    xml = robot('<link name="base"/>', link("l1"), bad, joint("j1", "base", "l1"), joint("j2", "l1", "l2"))
    assert_refused(xml, tmp_path, "l2")


def test_negative_mass(tmp_path):
    xml = robot('<link name="base"/>', link("l1"), link("l2", mass="-0.5"),
                joint("j1", "base", "l1"), joint("j2", "l1", "l2"))
    assert_refused(xml, tmp_path, "l2", "mass")


@pytest.mark.parametrize("kwargs", [{"ixx": "-0.01"}, {"ixy": "0.05"}, {"ixx": "0.1"}],
                         ids=["negative-ixx", "ixy-too-large", "triangle-inequality"])
def test_non_physical_inertia_warns_and_strict_refuses(tmp_path, kwargs):
    """Loaded as given with a warning naming the link and the problem (as Pinocchio and ROS load
    such URDFs; TIAGo's antennas have one); refused in strict mode."""
    xml = robot('<link name="base"/>', link("l1"), link("l2", **kwargs),
                joint("j1", "base", "l1"), joint("j2", "l1", "l2"))
    path = tmp_path / "robot.urdf"
    path.write_text(xml)
    with pytest.warns(URDFWarning, match=r"link 'l2'.*(semi-definite|triangle)") as record:
        model = parse_urdf(path)
    assert str(path) in str(record[0].message)
    assert model.inertia[1, 4] == float(kwargs.get("ixx", 0.01))  # used as given (the com is on the x axis)
    with pytest.raises(URDFError, match=r"l2.*strict"):
        parse_urdf(path, strict=True)


def test_missing_file_names_the_path(tmp_path):
    path = tmp_path / "nowhere.urdf"
    with pytest.raises((ValueError, OSError)) as err:
        parse_urdf(path)
    assert str(path) in str(err.value)
    with pytest.raises(URDFError, match="an empty URDF"):
        parse_urdf("")
    with pytest.raises(URDFError, match=f"{tmp_path}: a folder, not a URDF file"):
        parse_urdf(tmp_path)


@pytest.mark.parametrize("gravity", [(0, float("nan"), 0), (0, 0, float("inf")), (0, -9.81), ("a", 0, 0), None])
def test_gravity_must_be_three_finite_numbers(gravity):
    with pytest.raises(ValueError, match="gravity: expected three finite numbers"):
        parse_urdf(minimal_urdf(), gravity=gravity)
    with pytest.raises(ValueError, match="gravity"):
        RigidBodyModel(write_minimal_urdf(), gravity=gravity)


# --- no other exception, whatever the damage ------------------------------------------------

_GOOD_FOR_FUZZ = random_tree(5, n_movable=3, n_fixed=1).xml
_TOKENS = list(re.finditer(r'"[^"]*"|<[a-z_]+|/>|</[a-z_]+>', _GOOD_FOR_FUZZ))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    edits=st.lists(
        st.tuples(
            st.integers(0, len(_TOKENS) - 1),
            st.sampled_from(['""', '"nan"', '"-1"', '"1e400"', '"x y"', '"0 0 0"', '"link_1"',
                             '"fixed"', '"floating"', "", "<link", "</joint>", "/>"]),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_mutated_urdf_gives_model_or_value_error(edits):
    text = _GOOD_FOR_FUZZ
    for index, replacement in sorted(edits, key=lambda e: -_TOKENS[e[0]].start()):
        token = _TOKENS[index]
        # keep the quote/tag shape of attribute values so most mutants stay well-formed XML
        if token.group().startswith('"') != replacement.startswith('"'):
            replacement = replacement if not token.group().startswith('"') else '""'
        text = text[: token.start()] + replacement + text[token.end():]
    try:
        model = parse_urdf(text)
    except ValueError:
        return
    assert model.n >= 1
    assert np.all(np.isfinite(np.asarray(model.inertia)))
    assert np.all(np.isfinite(np.asarray(model.joint_translation)))
    np.testing.assert_allclose(np.linalg.norm(np.asarray(model.axis), axis=1), 1.0, rtol=1e-12)


# --- SPEC section 3: leniency ---------------------------------------------------------------


def test_limits_the_wrong_way_round_warn_naming_the_joint():
    with pytest.warns(URDFWarning, match=r"joint 'j2' has lower limit 1 above its upper limit -1"):
        model = parse_urdf(two_link(limit='<limit lower="1" upper="-1" effort="10" velocity="2"/>'))
    assert (float(model.lower[1]), float(model.upper[1])) == (1.0, -1.0)  # kept as written


def test_a_massless_robot_warns():
    """A kinematic URDF (no <inertial> on any link that moves) loads, with a warning: its
    torques are zero and its mass matrix singular. A mass on one moving link is enough."""
    bare = robot('<link name="base"/>', '<link name="l1"/>', '<link name="l2"/>', joint("j1", "base", "l1"), joint("j2", "l1", "l2"))
    with pytest.warns(URDFWarning, match=r"no link that moves has a mass \(no <inertial>\)"):
        model = parse_urdf(bare)
    assert not np.asarray(model.inertia).any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_urdf(bare.replace('<link name="l2"/>', link("l2")))


def test_an_unexpanded_xacro_macro_is_named(tmp_path):
    xml = robot('<link name="base"/>', link("l1"), link("l2", mass="${m}"), joint("j1", "base", "l1"), joint("j2", "l1", "l2"))
    assert_refused(xml, tmp_path, "l2", "<mass value='${m}'> is not a number (a xacro macro: expand the file with xacro first)")


def test_limit_without_effort_is_accepted():
    model = parse_urdf(two_link(limit='<limit lower="-3.14" upper="3.14" velocity="10.0"/>'))
    assert model.joint_names == ("j1", "j2")
    assert float(model.effort_limit[1]) == math.inf
    assert float(model.effort_limit[0]) == 10.0
    assert float(model.velocity_limit[1]) == 10.0
    assert (float(model.lower[1]), float(model.upper[1])) == (-3.14, 3.14)


def test_revolute_without_limit_is_accepted_unbounded():
    model = parse_urdf(two_link(limit=""))
    assert float(model.lower[1]) == -math.inf and float(model.upper[1]) == math.inf
    assert float(model.effort_limit[1]) == math.inf and float(model.velocity_limit[1]) == math.inf


def test_continuous_joint_is_unbounded():
    model = parse_urdf(two_link(kind="continuous", limit='<limit effort="3" velocity="4"/>'))
    assert model.joint_kinds == ("revolute", "continuous")
    assert float(model.lower[1]) == -math.inf and float(model.upper[1]) == math.inf
    assert (float(model.effort_limit[1]), float(model.velocity_limit[1])) == (3.0, 4.0)


def test_link_without_inertial_is_massless():
    xml = robot('<link name="base"/>', link("l1"), '<link name="l2"/>', link("tip", mass="2.0"),
                joint("j1", "base", "l1"), joint("j2", "l1", "l2"),
                joint("jt", "l2", "tip", kind="fixed", axis=None, limit=""))
    model = parse_urdf(xml)
    # l2 carries nothing: body 1 is exactly the tip, 2 kg with its centre of mass at (0.1, 0, 0)
    # in the tip frame, i.e. c = (0.1, 0, 0.1) in l2's frame, I_c = 0.01 * eye(3); about the
    # origin I = I_c + m (|c|^2 - c c^T) = [[0.03, 0, -0.02], [0, 0.05, 0], [-0.02, 0, 0.03]]
    assert model.frame_names.count("l2") == 1 and "tip" in model.frame_names
    expected = [2.0, 0.2, 0.0, 0.2, 0.03, 0.0, 0.05, -0.02, 0.0, 0.03]
    np.testing.assert_allclose(np.asarray(model.inertia[1]), expected, rtol=0, atol=1e-15)
    massless = parse_urdf(robot('<link name="base"/>', link("l1"), '<link name="l2"/>',
                                joint("j1", "base", "l1"), joint("j2", "l1", "l2")))
    np.testing.assert_array_equal(np.asarray(massless.inertia[1]), np.zeros(10))


def test_fixed_children_are_merged_and_kept_as_frames():
    xml = robot('<link name="base"/>', link("l1", mass="1.0"), link("l1b", mass="0.5"), link("l2"),
                joint("j1", "base", "l1"), joint("jf", "l1", "l1b", kind="fixed", axis=None, limit=""),
                joint("j2", "l1b", "l2"))
    model = parse_urdf(xml)
    assert model.joint_names == ("j1", "j2")
    assert set(model.frame_names) == {"base", "l1", "l1b", "l2"}
    assert float(model.inertia[0, 0]) == 1.5
    assert model.parents == (-1, 0)


def test_axis_is_normalised():
    scaled = parse_urdf(two_link(axis="0 3 4"))
    unit = parse_urdf(two_link(axis="0 0.6 0.8"))
    np.testing.assert_allclose(np.asarray(scaled.axis), np.asarray(unit.axis), rtol=0, atol=1e-15)
    np.testing.assert_allclose(np.linalg.norm(np.asarray(scaled.axis), axis=1), 1.0, rtol=1e-15)


def test_axis_defaults_to_x():
    default = parse_urdf(two_link(axis=None))
    explicit = parse_urdf(two_link(axis="1 0 0"))
    np.testing.assert_array_equal(np.asarray(default.axis), np.asarray(explicit.axis))


def test_origin_defaults_to_zero():
    j2 = joint("j2", "l1", "l2")
    variants = {
        "no origin": re.sub(r"<origin [^>]*/>", "", j2),
        "empty origin": re.sub(r"<origin [^>]*/>", "<origin/>", j2),
        "explicit zeros": j2.replace('xyz="0 0 0.1" rpy="0 0 0"', 'xyz="0 0 0" rpy="0 0 0"'),
    }
    models = {k: parse_urdf(GOOD.replace(j2, v)) for k, v in variants.items()}
    ref = models["explicit zeros"]
    for key, model in models.items():
        np.testing.assert_array_equal(np.asarray(model.joint_translation), np.asarray(ref.joint_translation), key)
        np.testing.assert_array_equal(np.asarray(model.joint_rotation), np.asarray(ref.joint_rotation), key)
    # xyz alone: rpy zero; rpy alone: xyz zero
    only_xyz = parse_urdf(GOOD.replace(j2, j2.replace(' rpy="0 0 0"', "")))
    only_rpy = parse_urdf(GOOD.replace(j2, j2.replace('xyz="0 0 0.1" rpy="0 0 0"', 'rpy="0.3 0 0"')))
    np.testing.assert_array_equal(np.asarray(only_xyz.joint_rotation[1]), np.eye(3))
    np.testing.assert_array_equal(np.asarray(only_xyz.joint_translation[1]), [0, 0, 0.1])
    np.testing.assert_array_equal(np.asarray(only_rpy.joint_translation[1]), [0, 0, 0])


def test_inertial_origin_defaults_to_zero():
    bare = '<link name="l2"><inertial><mass value="2"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.3"/></inertial></link>'
    model = parse_urdf(robot('<link name="base"/>', link("l1"), bare, joint("j1", "base", "l1"), joint("j2", "l1", "l2")))
    np.testing.assert_array_equal(np.asarray(model.inertia[1]), [2, 0, 0, 0, 0.1, 0, 0.2, 0, 0, 0.3])


def test_sources_string_path_and_pathlike(tmp_path):
    path = tmp_path / "ok.urdf"
    path.write_text(GOOD)
    models = [parse_urdf(GOOD), parse_urdf("\n  " + GOOD.split("\n", 1)[1]), parse_urdf(path), parse_urdf(str(path))]
    for m in models:
        assert m.joint_names == ("j1", "j2")
        np.testing.assert_array_equal(np.asarray(m.inertia), np.asarray(models[0].inertia))


def test_transmission_joints_are_ignored():
    tr = ('<transmission name="t"><type>x</type><joint name="j2"><hardwareInterface>E'
          '</hardwareInterface></joint><actuator name="a"/></transmission>')
    model = parse_urdf(GOOD.replace("</robot>", tr + "</robot>"))
    assert model.joint_names == ("j1", "j2")


def test_mimic_joint_is_an_independent_coordinate():
    model = parse_urdf(example_robot_urdf("panda_description/urdf/panda.urdf"))
    assert model.n == 9
    assert model.joint_names[-2:] == ("panda_finger_joint1", "panda_finger_joint2")
    assert model.joint_kinds[-2:] == ("prismatic", "prismatic")


def test_default_gravity():
    np.testing.assert_array_equal(np.asarray(parse_urdf(GOOD).gravity), [0.0, 0.0, -9.81])
