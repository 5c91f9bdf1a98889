"""Seeded random URDF trees and helpers for real URDFs, for the tests.

``random_tree(seed)`` draws a small fixed-base kinematic tree (2-8 movable joints plus fixed
joints) and ``RandomTree.xml`` writes it as a URDF string. The draw covers what a parser has
to get right:

- revolute, continuous and prismatic joints (each kind at least once when there are three or
  more movable joints), fixed joints inside chains and at branch points, and a ``tool0`` frame
  behind a fixed joint at the end of the last chain;
- branched trees, not only chains;
- joint origins with random ``xyz`` and ``rpy`` (sometimes omitted, to exercise the zero
  defaults), axes of random direction and non-unit length (sometimes omitted: URDF's default
  is ``1 0 0``);
- physically valid inertias (positive definite, triangle inequality) given in a rotated,
  offset ``<inertial>`` frame; some links have no ``<inertial>`` at all (massless), but every
  movable joint keeps some mass behind it so the mass matrix stays invertible;
- ``<limit>`` elements that sometimes lack ``effort``, optional ``<dynamics>``, ``<mimic>``,
  ``<visual>`` and ``<transmission>`` clutter that a parser has to ignore;
- the elements in a shuffled file order. Joint names are ``jNN_kind`` with NN the joint's
  position in the file, so siblings in file order are also in name order (see
  ``tests/oracle.py`` on why that matters for Pinocchio).

The tree also carries what a parser must produce, computed independently of both the library
and Pinocchio: the movable joints in depth-first order, each joint's kind, the parent body
index, and the set of link names.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.metadata
import math
from pathlib import Path

import numpy as np

MOVABLE_KINDS = ("revolute", "continuous", "prismatic")


@dataclasses.dataclass
class LinkSpec:
    name: str
    # (mass, com_xyz, rpy of the inertial frame, (ixx, ixy, ixz, iyy, iyz, izz)) or None
    inertial: tuple | None = None


@dataclasses.dataclass
class JointSpec:
    name: str
    kind: str
    parent: str
    child: str
    xyz: tuple | None = None  # None: attribute omitted
    rpy: tuple | None = None
    write_origin: bool = True
    axis: tuple | None = None  # None: element omitted (URDF default 1 0 0)
    limit: dict | None = None  # attribute -> value; None: element omitted
    damping: float | None = None
    mimic: str | None = None


@dataclasses.dataclass
class RandomTree:
    seed: int
    links: list[LinkSpec]
    joints: list[JointSpec]  # in file order
    element_order: list[tuple[str, int]]  # ("link" | "joint", index) in file order

    @property
    def root(self) -> str:
        children = {j.child for j in self.joints}
        (root,) = [lk.name for lk in self.links if lk.name not in children]
        return root

    def children_of(self, link: str) -> list[JointSpec]:
        """Child joints of a link, in file order."""
        return [j for j in self.joints if j.parent == link]

    @property
    def expected_joint_names(self) -> tuple[str, ...]:
        """Movable joints in a depth-first walk, children in file order."""
        return tuple(j.name for j in self._dfs())

    @property
    def expected_joint_kinds(self) -> tuple[str, ...]:
        return tuple(j.kind for j in self._dfs())

    @property
    def expected_parents(self) -> tuple[int, ...]:
        """Parent body index of each movable joint (-1 = the fixed base)."""
        order = self._dfs()
        index = {j.child: i for i, j in enumerate(order)}
        by_child = {j.child: j for j in self.joints}
        parents = []
        for j in order:
            link = j.parent
            # climb over fixed joints to the moving body this link is welded to
            while link not in index and link in by_child:
                link = by_child[link].parent
            parents.append(index.get(link, -1))
        return tuple(parents)

    @property
    def link_names(self) -> set[str]:
        return {lk.name for lk in self.links}

    def _dfs(self) -> list[JointSpec]:
        out: list[JointSpec] = []

        def walk(link: str) -> None:
            for j in self.children_of(link):
                if j.kind != "fixed":
                    out.append(j)
                walk(j.child)

        walk(self.root)
        return out

    @functools.cached_property
    def xml(self) -> str:
        parts = ['<?xml version="1.0"?>', f'<robot name="random_{self.seed}">',
                 '  <material name="grey"><color rgba="0.5 0.5 0.5 1"/></material>']
        for kind, i in self.element_order:
            parts.append(_link_xml(self.links[i]) if kind == "link" else _joint_xml(self.joints[i]))
        # a transmission block names joints too; a parser must only read top-level <joint>s
        movable = [j for j in self.joints if j.kind != "fixed"]
        if movable:
            parts.append(
                f'  <transmission name="tr0"><type>transmission_interface/SimpleTransmission</type>'
                f'<joint name="{movable[0].name}"><hardwareInterface>EffortJointInterface'
                f'</hardwareInterface></joint><actuator name="m0"><mechanicalReduction>1'
                f'</mechanicalReduction></actuator></transmission>'
            )
        parts.append("</robot>")
        return "\n".join(parts) + "\n"


def _f(x: float) -> str:
    # repr round-trips a float64 exactly, so both parsers see the same numbers
    return repr(float(x))


def _vec(v) -> str:
    return " ".join(_f(x) for x in v)


def _link_xml(link: LinkSpec) -> str:
    body = []
    if link.inertial is not None:
        m, com, rpy, (ixx, ixy, ixz, iyy, iyz, izz) = link.inertial
        body.append(
            f'    <inertial><origin xyz="{_vec(com)}" rpy="{_vec(rpy)}"/>'
            f'<mass value="{_f(m)}"/>'
            f'<inertia ixx="{_f(ixx)}" ixy="{_f(ixy)}" ixz="{_f(ixz)}" iyy="{_f(iyy)}" '
            f'iyz="{_f(iyz)}" izz="{_f(izz)}"/></inertial>'
        )
        body.append(
            '    <visual><origin xyz="0 0 0"/><geometry><box size="0.1 0.05 0.02"/></geometry>'
            '<material name="grey"/></visual>'
        )
    return f'  <link name="{link.name}">\n' + "\n".join(body) + "\n  </link>" if body else (
        f'  <link name="{link.name}"/>'
    )


def _joint_xml(j: JointSpec) -> str:
    lines = [f'  <joint name="{j.name}" type="{j.kind}">']
    if j.write_origin:
        attrs = []
        if j.xyz is not None:
            attrs.append(f'xyz="{_vec(j.xyz)}"')
        if j.rpy is not None:
            attrs.append(f'rpy="{_vec(j.rpy)}"')
        lines.append(f"    <origin {' '.join(attrs)}/>")
    lines.append(f'    <parent link="{j.parent}"/>')
    lines.append(f'    <child link="{j.child}"/>')
    if j.axis is not None:
        lines.append(f'    <axis xyz="{_vec(j.axis)}"/>')
    if j.limit is not None:
        attrs = " ".join(f'{k}="{_f(v)}"' for k, v in j.limit.items())
        lines.append(f"    <limit {attrs}/>")
    if j.damping is not None:
        lines.append(f'    <dynamics damping="{_f(j.damping)}" friction="{_f(j.damping / 2)}"/>')
    if j.mimic is not None:
        lines.append(f'    <mimic joint="{j.mimic}" multiplier="1.0" offset="0.0"/>')
    lines.append("  </joint>")
    return "\n".join(lines)


def _rotation(rpy) -> np.ndarray:
    """URDF convention: R = Rz(yaw) @ Ry(pitch) @ Rx(roll)."""
    r, p, y = rpy
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def random_inertia(rng: np.random.Generator) -> tuple:
    """A physically valid rigid-body inertia: (mass, com, rpy, tensor 6-tuple).

    The rotational inertia about the centre of mass is built from the second moments
    ``a, b, c > 0`` of the mass distribution along principal axes (``I1 = b + c`` etc.), which
    makes it positive definite and satisfy the triangle inequality, then rotated by a random
    rotation so every off-diagonal entry is non-zero.
    """
    mass = rng.uniform(0.2, 3.0)
    a, b, c = mass * rng.uniform(2e-4, 2e-2, size=3)
    principal = np.diag([b + c, a + c, a + b])
    rot = _rotation(rng.uniform(-math.pi, math.pi, size=3))
    tensor = rot @ principal @ rot.T
    com = rng.uniform(-0.15, 0.15, size=3)
    rpy = rng.uniform(-math.pi, math.pi, size=3)
    six = (tensor[0, 0], tensor[0, 1], tensor[0, 2], tensor[1, 1], tensor[1, 2], tensor[2, 2])
    return (mass, tuple(com), tuple(rpy), six)


def _random_axis(rng: np.random.Generator) -> tuple | None:
    u = rng.uniform()
    if u < 0.1:
        return None  # URDF default: 1 0 0
    if u < 0.25:
        axis = np.zeros(3)
        axis[rng.integers(3)] = rng.choice([-1.0, 1.0])
        return tuple(axis)
    v = rng.standard_normal(3)
    v /= np.linalg.norm(v)
    return tuple(v * rng.uniform(0.3, 3.0))  # non-unit length: the parser must normalise


def random_tree(
    seed: int,
    *,
    n_movable: int | None = None,
    n_fixed: int | None = None,
    sibling_names: str = "file",
) -> RandomTree:
    """Draw a random fixed-base kinematic tree; ``.xml`` gives its URDF text.

    Args:
        seed: seeds everything.
        n_movable: number of revolute/continuous/prismatic joints (default: 2-8).
        n_fixed: number of fixed joints besides the tool mount (default: 1-3).
        sibling_names: ``"file"`` names joints ``jNN_kind`` by their position in the file,
            so sibling joints sort by name in file order; ``"reversed"`` numbers them
            backwards, so wherever the tree branches the file order and the name order of
            the siblings disagree (Pinocchio follows the name order).
    """
    rng = np.random.default_rng(seed)
    n_mov = int(rng.integers(2, 9)) if n_movable is None else n_movable
    n_fix = int(rng.integers(1, 4)) if n_fixed is None else n_fixed

    kinds = list(rng.choice(MOVABLE_KINDS, size=n_mov, p=[0.5, 0.25, 0.25]))
    if n_mov >= 3:
        kinds[:3] = list(MOVABLE_KINDS)
    kinds += ["fixed"] * n_fix
    kinds = [str(k) for k in rng.permutation(kinds)]
    if kinds[0] == "fixed" and rng.uniform() < 0.5:
        # half the time start with a movable joint on the base, otherwise a fixed mount
        first = next(i for i, k in enumerate(kinds) if k != "fixed")
        kinds[0], kinds[first] = kinds[first], kinds[0]

    links = [LinkSpec("base_link", random_inertia(rng) if rng.uniform() < 0.5 else None)]
    joints: list[JointSpec] = []
    for k, kind in enumerate(kinds):
        # mostly extend the newest link (chains), sometimes branch off an older one
        if k == 0 or rng.uniform() < 0.65:
            parent = links[-1].name
        else:
            parent = links[int(rng.integers(len(links)))].name
        child = f"link_{k + 1}"
        massless = rng.uniform() < (0.5 if kind == "fixed" else 0.2)
        links.append(LinkSpec(child, None if massless else random_inertia(rng)))
        joints.append(_random_joint(rng, kind, parent, child))

    # a tool frame behind a fixed joint at the end of the last chain
    last = joints[-1].child
    tool = JointSpec("tool", "fixed", last, "tool0", xyz=tuple(rng.uniform(-0.1, 0.1, 3)),
                     rpy=tuple(rng.uniform(-math.pi, math.pi, 3)))
    links.append(LinkSpec("tool0", None))
    joints.append(tool)

    # every movable joint needs mass behind it, or the mass matrix is singular
    by_parent: dict[str, list[JointSpec]] = {}
    for j in joints:
        by_parent.setdefault(j.parent, []).append(j)
    link_by_name = {lk.name: lk for lk in links}

    def subtree_has_mass(link: str) -> bool:
        if link_by_name[link].inertial is not None:
            return True
        return any(subtree_has_mass(j.child) for j in by_parent.get(link, []))

    for j in joints:
        if j.kind != "fixed" and not subtree_has_mass(j.child):
            link_by_name[j.child].inertial = random_inertia(rng)

    # occasionally a mimic tag (kept as an independent coordinate, as Pinocchio does)
    movable = [j for j in joints if j.kind != "fixed"]
    if len(movable) >= 2 and rng.uniform() < 0.4:
        movable[-1].mimic = "__placeholder__"

    # shuffle the file order; name joints by file position so siblings sort in file order
    order = rng.permutation(len(joints))
    joints = [joints[i] for i in order]
    mimic_target = None
    for pos, j in enumerate(joints):
        old = j.name
        num = pos if sibling_names == "file" else len(joints) - 1 - pos
        j.name = f"j{num:02d}_{j.kind}" if old != "tool" else f"j{num:02d}_tool"
        if j.mimic is not None:
            mimic_target = j
    if mimic_target is not None:
        others = [j for j in joints if j.kind != "fixed" and j is not mimic_target]
        mimic_target.mimic = others[int(rng.integers(len(others)))].name

    # interleave links (any order) with joints (in the order of `joints`, which is file order)
    tags = rng.permutation(["link"] * len(links) + ["joint"] * len(joints))
    link_order = iter(rng.permutation(len(links)))
    joint_order = iter(range(len(joints)))
    elements = [(str(t), int(next(link_order if t == "link" else joint_order))) for t in tags]
    return RandomTree(seed=seed, links=links, joints=joints, element_order=elements)


def _random_joint(rng: np.random.Generator, kind: str, parent: str, child: str) -> JointSpec:
    u = rng.uniform()
    xyz = tuple(rng.uniform(-0.3, 0.3, size=3))
    rpy = tuple(rng.uniform(-math.pi, math.pi, size=3))
    j = JointSpec("tmp", kind, parent, child, xyz=xyz, rpy=rpy)
    if u < 0.08:
        j.write_origin = False  # both default to zero
    elif u < 0.16:
        j.rpy = None
    elif u < 0.24:
        j.xyz = None
    if kind == "fixed":
        return j
    j.axis = _random_axis(rng)
    if kind == "revolute":
        j.limit = {"lower": rng.uniform(-3.0, -0.5), "upper": rng.uniform(0.5, 3.0),
                   "velocity": rng.uniform(1.0, 10.0)}
    elif kind == "prismatic":
        j.limit = {"lower": rng.uniform(-0.5, -0.1), "upper": rng.uniform(0.1, 0.5),
                   "velocity": rng.uniform(0.1, 2.0)}
    elif rng.uniform() < 0.5:
        j.limit = {"velocity": rng.uniform(1.0, 10.0)}
    if j.limit is not None and rng.uniform() < 0.7:
        j.limit["effort"] = rng.uniform(5.0, 150.0)  # otherwise <limit> without effort
    if rng.uniform() < 0.3:
        j.damping = rng.uniform(0.0, 1.0)
    return j


def random_urdf(seed: int, **kwargs) -> str:
    """URDF text of ``random_tree(seed, **kwargs)``."""
    return random_tree(seed, **kwargs).xml


def dfs_joint_order(xml: str) -> tuple[str, ...]:
    """Movable joints of any URDF text in a depth-first walk, children in file order."""
    import xml.etree.ElementTree as ET

    root = ET.fromstring(xml.encode())
    joints = root.findall("joint")
    children: dict[str, list] = {}
    child_links = set()
    for j in joints:
        children.setdefault(j.find("parent").get("link"), []).append(j)
        child_links.add(j.find("child").get("link"))
    (base,) = [lk.get("name") for lk in root.findall("link") if lk.get("name") not in child_links]
    out: list[str] = []

    def walk(link: str) -> None:
        for j in children.get(link, []):
            if j.get("type") != "fixed":
                out.append(j.get("name"))
            walk(j.find("child").get("link"))

    walk(base)
    return tuple(out)


# --- example-robot-data --------------------------------------------------------------------


@functools.cache
def _erd_urdfs() -> dict[str, Path]:
    try:
        dist = importlib.metadata.distribution("example-robot-data")
    except importlib.metadata.PackageNotFoundError:
        return {}
    out = {}
    for f in dist.files or ():
        s = str(f)
        if s.endswith(".urdf") and "/robots/" in s:
            out[s.split("/robots/", 1)[1]] = Path(dist.locate_file(f))
    return out


def example_robot_urdfs() -> dict[str, Path]:
    """All URDF files of the installed ``example-robot-data``, keyed like
    ``"panda_description/urdf/panda.urdf"``; empty when it is not installed."""
    return dict(_erd_urdfs())


def example_robot_urdf(relpath: str) -> Path:
    """Path of one example-robot-data URDF; skips the calling test when it is missing."""
    import pytest

    path = _erd_urdfs().get(relpath)
    if path is None or not path.is_file():
        pytest.skip(f"example-robot-data URDF {relpath} not installed")
    return path


def lock_joints(xml: str, names) -> str:
    """Rewrite a URDF so the named joints become ``fixed`` (at their zero position).

    The joint keeps its ``<origin>``; ``<axis>``, ``<limit>``, ``<dynamics>``, ``<mimic>``,
    ``<safety_controller>`` and ``<calibration>`` go. This is the URDF of Pinocchio's
    ``buildReducedModel`` with the reference configuration at zero.
    """
    import xml.etree.ElementTree as ET

    names = set(names)
    root = ET.fromstring(xml.encode() if isinstance(xml, str) else xml)
    found = set()
    for joint in root.findall("joint"):
        if joint.get("name") in names:
            found.add(joint.get("name"))
            joint.set("type", "fixed")
            for tag in ("axis", "limit", "dynamics", "mimic", "safety_controller", "calibration"):
                for el in joint.findall(tag):
                    joint.remove(el)
    missing = names - found
    if missing:
        raise KeyError(f"no joints named {sorted(missing)}")
    return ET.tostring(root, encoding="unicode")
