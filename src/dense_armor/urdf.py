"""URDF to :class:`~dense_armor.model.Model`.

Parsing is plain host code in float64 NumPy: XML to a few checked records, then a depth-first
walk of the tree that merges links behind fixed joints into the body they hang from.
"""

from __future__ import annotations

import codecs
import math
import os
import re
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from dense_armor import inertial, spatial
from dense_armor.model import JOINT_KINDS, Model, lock_joints

DEFAULT_GRAVITY = (0.0, 0.0, -9.81)


class URDFError(ValueError):
    """A URDF that cannot be turned into a model; the message names the file and the element."""


class URDFWarning(UserWarning):
    """A URDF that loads but describes something no rigid body is (a link's inertia)."""


def _moments(values) -> str:
    return "(" + ", ".join(f"{v:.4g}" for v in values) + ")"


@dataclass(frozen=True)
class _Joint:
    name: str
    kind: str
    parent: str
    child: str
    placement: tuple  # (R, p) of the joint frame in the parent link frame, NumPy
    axis: np.ndarray
    lower: float
    upper: float
    effort: float
    velocity: float
    damping: float = 0.0
    friction: float = 0.0
    mimic: tuple | None = None  # (joint, multiplier, offset) of a <mimic> tag


def parse_urdf(source: str | os.PathLike, gravity=DEFAULT_GRAVITY, *, strict: bool = False, mimic: bool = False) -> Model:
    """Parse a URDF file or XML string into a :class:`Model`.

    A joint with a ``<mimic joint="j" multiplier="k" offset="o"/>`` tag is, by default, an
    independent coordinate, as in Pinocchio, with a :class:`URDFWarning`; with ``mimic`` it is
    coupled, ``q = k q_j + o`` (a chain of mimics resolved to the joint at its end), and has no
    coordinate of its own: every function then takes and returns the other joints' values.

    A link whose rotational inertia no rigid body has (not positive semi-definite, or principal
    moments that break the triangle inequality; vendors ship such URDFs, and Pinocchio loads
    them) is loaded as given with a :class:`URDFWarning` naming the link, or refused when
    ``strict``. A robot none of whose moving links has a mass (a kinematic description, no
    ``<inertial>``) is loaded with a :class:`URDFWarning`.

    Args:
        source: a path, or the XML text itself (a string starting with ``<``).
        gravity: (3,) gravity in the base frame, m/s^2.
        strict: refuse a non-physical link inertia with a :class:`URDFError`.
        mimic: couple the mimic joints to the joints they mimic.

    Returns:
        The model, its leaves float64 NumPy arrays (JAX casts them to the dtype of ``q``).

    Raises:
        URDFError: malformed XML, an unknown, floating or planar joint, a missing link, two
            roots, a cycle, a negative mass or a non-finite number (or, when ``strict``, a
            non-physical inertia; with ``mimic``, a mimic of no movable joint or a cycle of
            mimics); the message names the file and the element.
        FileNotFoundError: ``source`` is a path that does not exist.
        ValueError: ``gravity`` is not three finite numbers.
    """
    try:
        gravity = np.asarray(gravity, float)
    except (TypeError, ValueError):
        gravity = None
    if gravity is None or gravity.shape != (3,) or not np.all(np.isfinite(gravity)):
        raise ValueError("gravity: expected three finite numbers, m/s^2 in the base frame")
    text, where = _read(source)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as err:
        raise URDFError(f"{where}: malformed XML: {err}") from None
    if root.tag != "robot":
        raise URDFError(f"{where}: the root element is <{root.tag}>, expected <robot>")
    ctx = _Context(where, strict, mimic)
    links = {}
    for el in root.findall("link"):
        name = ctx.attr(el, "name", "link")
        if name in links:
            raise URDFError(f"{where}: link {name!r} is defined twice")
        links[name] = ctx.link_inertia(el, name)
    joints = [ctx.joint(el, links) for el in root.findall("joint")]
    names = [j.name for j in joints]
    seen: set = set()
    for name in names:  # linear in the joints
        if name in seen:
            raise URDFError(f"{where}: joint {name!r} is defined twice")
        seen.add(name)
    if not links:
        raise URDFError(f"{where}: the robot has no <link>")
    return _build(root.get("name", ""), links, joints, gravity, where)


def _read(source) -> tuple[str, str]:
    if isinstance(source, str) and source.lstrip().startswith("<"):
        return source, "<URDF string>"
    if isinstance(source, str) and not source.strip():
        raise URDFError("an empty URDF: neither a path nor XML text")
    path = Path(source)
    if path.is_dir():
        raise URDFError(f"{path}: a folder, not a URDF file")
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such URDF file")
    raw = path.read_bytes()
    # a byte-order mark, else the XML declaration's encoding, else UTF-8
    marks = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"),
             (codecs.BOM_UTF16_BE, "utf-16"), (codecs.BOM_UTF8, "utf-8-sig"))
    declared = re.match(rb"^\s*<\?xml[^>]*encoding=[\"']([A-Za-z0-9._-]+)[\"']", raw)
    encoding = next((name for mark, name in marks if raw.startswith(mark)), declared.group(1).decode() if declared else "utf-8")
    try:
        return raw.decode(encoding).lstrip("\ufeff"), str(path)
    except (UnicodeDecodeError, LookupError) as err:
        raise URDFError(f"{path}: not a {encoding} text file ({err})") from None


class _Context:
    """Checked reads of attributes, naming the file and element on failure."""

    def __init__(self, where: str, strict: bool = False, mimic: bool = False):
        self.where = where
        self.strict = strict
        self.mimic = mimic

    def fail(self, what: str, msg: str):
        raise URDFError(f"{self.where}: {what}: {msg}")

    def attr(self, el, key, what):
        value = el.get(key)
        if value is None or not value.strip():
            self.fail(f"<{el.tag}>" if what == el.tag else what, f"missing attribute {key!r}")
        return value.strip()

    def floats(self, el, key, count, default, what):
        if el is None or el.get(key) is None:
            return np.array(default, float)
        raw = el.get(key).split()
        expected = "a number" if count == 1 else f"{count} numbers"
        macro = " (a xacro macro: expand the file with xacro first)" if "$" in el.get(key) else ""
        try:
            values = np.array([float(v) for v in raw])
        except ValueError:
            self.fail(what, f"<{el.tag} {key}={el.get(key)!r}> is not {expected}{macro}")
        if values.shape != (count,):
            self.fail(what, f"<{el.tag} {key}={el.get(key)!r}> is not {expected}")
        if not np.all(np.isfinite(values)):
            self.fail(what, f"<{el.tag} {key}={el.get(key)!r}> is not finite")
        return values

    def origin(self, el, what):
        origin = el.find("origin")
        xyz = self.floats(origin, "xyz", 3, (0.0, 0.0, 0.0), what)
        rpy = self.floats(origin, "rpy", 3, (0.0, 0.0, 0.0), what)
        return spatial.rpy_to_matrix(rpy), xyz

    def link_inertia(self, el, name):
        what = f"link {name!r}"
        element = el.find("inertial")
        if element is None:
            return np.zeros(10)
        mass_el = element.find("mass")
        mass = 0.0 if mass_el is None else float(self.floats(mass_el, "value", 1, (0.0,), what)[0])
        if mass < 0:
            self.fail(what, f"negative mass {mass}")
        inertia_el = element.find("inertia")
        keys = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
        vals = {k: float(self.floats(inertia_el, k, 1, (0.0,), what)[0]) for k in keys}
        I = np.array(
            [
                [vals["ixx"], vals["ixy"], vals["ixz"]],
                [vals["ixy"], vals["iyy"], vals["iyz"]],
                [vals["ixz"], vals["iyz"], vals["izz"]],
            ]
        )
        self.check_physical(I, what)
        R, com = self.origin(element, what)
        return inertial.from_com(np.float64(mass), com, R @ I @ R.T)

    def check_physical(self, I, what):
        """Warn (refuse, when strict) about a rotational inertia no rigid body has."""
        moments = np.linalg.eigvalsh(I)
        tol = 1e-12 * max(1.0, np.abs(I).max())
        if moments[0] < -tol:
            problem = f"the inertia matrix is not positive semi-definite (principal moments {_moments(moments)})"
        elif moments[2] > moments[0] + moments[1] + tol:
            problem = f"the principal moments {_moments(moments)} break the triangle inequality"
        else:
            return
        if self.strict:
            self.fail(what, f"{problem} (strict mode)")
        warnings.warn(f"{self.where}: {what}: {problem}; used as given", URDFWarning, stacklevel=5)

    def joint(self, el, links) -> _Joint:
        name = self.attr(el, "name", "joint")
        what = f"joint {name!r}"
        kind = self.attr(el, "type", what)
        if kind in ("floating", "planar"):
            self.fail(what, f"{kind} joints are not supported (fixed-base trees of revolute, "
                            "continuous, prismatic and fixed joints only)")
        if kind not in JOINT_KINDS + ("fixed",):
            self.fail(what, f"unknown joint type {kind!r}")
        ends = {}
        for end in ("parent", "child"):
            end_el = el.find(end)
            if end_el is None:
                self.fail(what, f"missing <{end}>")
            link = self.attr(end_el, "link", f"{what} <{end}>")
            if link not in links:
                self.fail(what, f"{end} link {link!r} is not defined")
            ends[end] = link
        axis = self.floats(el.find("axis"), "xyz", 3, (1.0, 0.0, 0.0), what)
        norm = float(np.linalg.norm(axis))
        if kind != "fixed" and norm < 1e-12:
            self.fail(what, "the axis is zero")
        mimic = el.find("mimic")
        if mimic is not None and kind != "fixed":
            follows = self.attr(mimic, "joint", f"{what} <mimic>")
            multiplier, offset = (float(self.floats(mimic, key, 1, (default,), what)[0]) for key, default in (("multiplier", 1.0), ("offset", 0.0)))
            mimic = follows, multiplier, offset
            if not self.mimic:
                warnings.warn(f"{self.where}: {what} mimics {follows!r}: kept as an independent coordinate (as Pinocchio "
                              "does by default); parse with mimic=True (--mimic) to couple it", URDFWarning, stacklevel=4)
        else:
            mimic = None
        limit = el.find("limit")
        bounds = {"lower": -math.inf, "upper": math.inf, "effort": math.inf, "velocity": math.inf}
        if limit is not None and kind != "continuous":
            for key in bounds:
                if limit.get(key) is not None:
                    bounds[key] = float(self.floats(limit, key, 1, (0.0,), what)[0])
        elif limit is not None:
            for key in ("effort", "velocity"):
                if limit.get(key) is not None:
                    bounds[key] = float(self.floats(limit, key, 1, (0.0,), what)[0])
        if bounds["lower"] > bounds["upper"]:
            warnings.warn(f"{self.where}: {what} has lower limit {bounds['lower']:g} above its upper limit "
                          f"{bounds['upper']:g}", URDFWarning, stacklevel=4)
        dynamics = el.find("dynamics")
        damping, friction = (float(self.floats(dynamics, key, 1, (0.0,), what)[0]) for key in ("damping", "friction"))
        return _Joint(
            name, kind, ends["parent"], ends["child"], self.origin(el, what),
            axis / norm if norm > 0 else axis, **bounds, damping=damping, friction=friction, mimic=mimic if self.mimic else None,
        )


def _build(name, links, joints, gravity, where) -> Model:
    parent_of = {}
    for joint in joints:
        if joint.child in parent_of:
            raise URDFError(
                f"{where}: link {joint.child!r} is the child of two joints "
                f"({parent_of[joint.child].name!r} and {joint.name!r})"
            )
        parent_of[joint.child] = joint
    roots = [link for link in links if link not in parent_of]
    if len(roots) > 1:
        raise URDFError(f"{where}: the tree has {len(roots)} roots ({', '.join(map(repr, roots))}); expected one")
    if not roots:
        raise URDFError(f"{where}: the joints form a cycle (every link has a parent joint)")
    children = {link: [] for link in links}
    for joint in joints:
        children[joint.parent].append(joint)

    order = []  # joints depth-first, siblings in file order (Pinocchio sorts siblings by name)
    stack = list(reversed(children[roots[0]]))
    while stack:
        joint = stack.pop()
        order.append(joint)
        stack.extend(reversed(children[joint.child]))
    reached = {roots[0]} | {j.child for j in order}
    unreached = [link for link in links if link not in reached]
    if unreached:
        raise URDFError(
            f"{where}: links {', '.join(map(repr, unreached))} are not reachable from the root "
            f"{roots[0]!r}: the joints form a cycle"
        )
    moving = [j for j in order if j.kind != "fixed"]
    index = {j.name: i for i, j in enumerate(moving)}
    identity = (np.eye(3), np.zeros(3))
    attach = {roots[0]: (-1, identity)}  # link -> (body, placement of the link in the body)
    parents, placements = [], []
    for joint in order:
        body, (R, p) = attach[joint.parent]
        Rj, pj = joint.placement
        origin = (R @ Rj, R @ pj + p)
        if joint.kind == "fixed":
            attach[joint.child] = (body, origin)
        else:
            attach[joint.child] = (index[joint.name], identity)
            parents.append(body)
            placements.append(origin)

    n = len(moving)
    if n == 0:
        raise URDFError(f"{where}: the robot has no movable joint")
    inertia = np.zeros((n, 10))
    for link, (body, (R, p)) in attach.items():
        if body >= 0:
            inertia[body] += np.array(spatial.rigid_params_to_parent(tuple(links[link]), spatial.as_tuple(R), tuple(p)))
    if not inertia[:, 0].any():  # a kinematic description (no <inertial>): no torque, no forward dynamics
        warnings.warn(f"{where}: no link that moves has a mass (no <inertial>): the dynamics are zero and the mass "
                      "matrix singular", URDFWarning, stacklevel=3)
    frame_names = (roots[0],) + tuple(j.child for j in order)
    mimics = _mimics(moving, where)
    own = [j for j in moving if j.name not in mimics]
    coordinate = {j.name: c for c, j in enumerate(own)}
    return Model(
        name=name,
        joint_names=tuple(j.name for j in own),
        joint_kinds=tuple(j.kind for j in moving),
        parents=tuple(parents),
        body_names=tuple(j.child for j in moving),
        frame_names=frame_names,
        frame_bodies=tuple(attach[f][0] for f in frame_names),
        joint_rotation=np.stack([R for R, _ in placements]),
        joint_translation=np.stack([p for _, p in placements]),
        axis=np.stack([j.axis for j in moving]),
        inertia=inertia,
        frame_rotation=np.stack([attach[f][1][0] for f in frame_names]),
        frame_translation=np.stack([attach[f][1][1] for f in frame_names]),
        lower=np.array([j.lower for j in own]),
        upper=np.array([j.upper for j in own]),
        velocity_limit=np.array([j.velocity for j in own]),
        effort_limit=np.array([j.effort for j in own]),
        damping=np.array([j.damping for j in own]),
        friction=np.array([j.friction for j in own]),
        gravity=gravity,
        mimics=[(joint, index[joint], coordinate[follows]) for joint, (follows, _, _) in mimics.items()],
        mimic_multiplier=np.array([k for _, k, _ in mimics.values()]),
        mimic_offset=np.array([o for _, _, o in mimics.values()]),
    )


def _mimics(moving, where) -> dict:
    """The coupled mimic joints, ``{joint: (followed joint, multiplier, offset)}`` in tree order,
    each chain of mimics resolved to the joint with a coordinate at its end."""
    tags = {j.name: j.mimic for j in moving if j.mimic is not None}
    movable = {j.name for j in moving}
    out = {}
    for joint in (j.name for j in moving if j.name in tags):
        k, o, at, seen = 1.0, 0.0, joint, [joint]
        while at in tags:
            follows, multiplier, offset = tags[at]
            if follows not in movable:
                raise URDFError(f"{where}: joint {at!r} mimics {follows!r}, which is not a movable joint")
            k, o, at = k * multiplier, k * offset + o, follows
            if at in seen:
                raise URDFError(f"{where}: the mimic joints {' -> '.join(map(repr, seen + [at]))} form a cycle")
            seen.append(at)
        out[joint] = at, k, o
    return out



def _numbers(values) -> str:
    # 15 digits: within a float's rounding of the value, without its last digit's noise (0.039252, not 0.03925200000000001)
    return " ".join(f"{float(v):.15g}" for v in np.reshape(values, -1))


#: The smallest principal moment :func:`with_inertials` writes, as a fraction of the largest:
#: a body a log cannot tell from a rod is written as a thin one (MuJoCo refuses a zero moment).
MIN_MOMENT = 1e-6


def _indent(container, element) -> str:
    """The indentation of ``element``, a child of ``container``: the whitespace before it, after
    its last line break."""
    children = list(container)
    i = children.index(element)
    return ((container.text if i == 0 else children[i - 1].tail) or "").rpartition("\n")[2]


def _remove(parent, child) -> None:
    """Remove ``child``, the file's layout kept: the last child's tail is ``parent``'s closing."""
    children = list(parent)
    i = children.index(child)
    if i == len(children) - 1:
        if i:
            children[i - 1].tail = child.tail
        else:
            parent.text = child.tail
    parent.remove(child)


def _add(parent, child, at: str, index: int | None = None) -> None:
    """Add ``child`` (whose children have no layout) to ``parent`` (indented by ``at``), at
    ``index`` (``None``: last), indented as ``parent``'s other children (or two spaces in) and
    its own one step more."""
    children = list(parent)
    first = _indent(parent, children[0]) if children else ""
    step = first[len(at):] if first.startswith(at) and len(first) > len(at) else "  "
    inner = "\n" + at + step
    for k, grandchild in enumerate(child):
        grandchild.tail = inner + step if k < len(child) - 1 else inner
    if len(child):
        child.text = inner + step
    if not children:
        parent.text, child.tail = inner, "\n" + at
        parent.append(child)
    elif index is None or index >= len(children):
        children[-1].tail, child.tail = inner, children[-1].tail
        parent.append(child)
    else:  # before the child at index, with the whitespace that preceded it
        child.tail = parent.text if index == 0 else children[index - 1].tail
        parent.insert(index, child)


def with_inertials(source: str | os.PathLike, model: Model, inertia, locked=None, dynamics=None) -> str:
    """The URDF ``source`` (path or XML) with new inertial parameters: ``model`` is ``source``
    parsed, ``inertia`` (B, 10) the parameters of each body of the robot learned, ``model`` with
    the ``locked`` joints ``{name: position}`` fixed (:func:`dense_armor.model.lock_joints`;
    ``model`` itself without them), and ``dynamics`` ``{joint: {"damping": N m s/rad,
    "friction": N m}}`` is set in those joints' ``<dynamics>``.

    Each body's parameters go to the link its joint moves (as mass, centre of mass and inertia
    about it, in the link's frame, its principal moments at least :data:`MIN_MOMENT` of the
    largest); the links fixed to it lose their ``<inertial>``. A locked joint stays as written
    and the links it moves keep theirs: the body they were merged into gets its parameters less
    theirs (at the locked position), so that the URDF with the same joints locked is the robot
    learned, and it replaces ``source`` wherever that served (``ros2_control``, a simulator).
    Where that difference is not a rigid body, the nearest one is written (with a
    :class:`URDFWarning` where it is far from one: the locked links heavier or wider in the URDF
    than the body learned with them).

    Everything else is kept as written, in the file's layout.

    Raises:
        ValueError: ``inertia`` of another shape, or locked links that weigh as much as the body
            learned with them.
    """
    text, where = _read(source)
    # comments (a licence, "generated by xacro") and namespace prefixes (xacro:) kept as written
    for prefix, uri in re.findall(r"""xmlns:([\w.-]+)\s*=\s*["']([^"']*)["']""", text):
        ET.register_namespace(prefix, uri)
    root = ET.fromstring(text, parser=ET.XMLParser(target=ET.TreeBuilder(insert_comments=True)))
    learned = lock_joints(model, locked) if locked else model
    inertia = np.asarray(inertia, np.float64)
    if inertia.shape != (learned.n_bodies, 10):
        raise ValueError(f"inertia: expected shape ({learned.n_bodies}, 10), got {inertia.shape}")
    # each learned body's parameters on the body of model it is, less what the locked links
    # merged into it brought (parameters add: the merged body's less its own)
    own = np.asarray(model.inertia, np.float64)
    index = {name: i for i, name in enumerate(model.body_names)}
    written = {}
    for params, merged, name in zip(inertia, np.asarray(learned.inertia, np.float64), learned.body_names):
        i = index[name]
        if np.any(merged != own[i]):
            scale = np.linalg.eigvalsh(inertial.pseudo_inertia(params))[-1]
            params = params - (merged - own[i])
            # a body learned on the edge of rigidity (thin in one direction) less the locked links
            # is off it by at most their own extent there: moved back silently; far off, the
            # URDF's locked links and the body learned with them disagree
            if inertial.inconsistency(params) > 1e-3 * scale:
                warnings.warn(f"{where}: link {name!r}: the parameters learned with the locked links less theirs in the "
                              "URDF are far from a rigid body (those links weigh more, or reach farther, than what was "
                              "learned with them); the nearest rigid body is written", URDFWarning, stacklevel=2)
            params = inertial.nearest_consistent(params)
            if params[0] <= 1e-9 * scale:
                raise ValueError(f"{where}: link {name!r}: the locked links fixed to it weigh, in the URDF, as much as "
                                 "or more than the body learned with them: no URDF that keeps them is the robot "
                                 "learned (lock fewer joints, or correct those links' inertials)")
        written[i] = params
    for joint in root.findall("joint"):
        name = joint.get("name")
        if dynamics and name in dynamics:
            element = joint.find("dynamics")
            if element is None:
                element = ET.Element("dynamics")
                _add(joint, element, _indent(root, joint))
            for key, value in dynamics[name].items():
                element.set(key, _numbers(value))
    links = {link.get("name"): link for link in root.findall("link")}
    for frame, body in zip(model.frame_names, model.frame_bodies):
        if body not in written:
            continue  # on the base, or moved by a locked joint: as written
        link = links[frame]
        olds = link.findall("inertial")
        if frame == model.body_names[body]:  # the body's own link (the others are fixed to it)
            mass, com, I = inertial.to_com(written[body])
            moments, axes = np.linalg.eigh(I)
            if moments[0] < MIN_MOMENT * moments[-1]:
                I = (axes * np.maximum(moments, MIN_MOMENT * moments[-1])) @ axes.T
            com, I = (np.where(np.abs(x) < 1e-14 * np.abs(x).max(), 0.0, x) for x in (com, I))  # rounding's 1e-18s
            element = ET.Element("inertial")
            ET.SubElement(element, "origin", {"xyz": _numbers(com), "rpy": "0 0 0"})
            ET.SubElement(element, "mass", {"value": _numbers(mass)})
            ET.SubElement(element, "inertia", {k: _numbers(I[r, c]) for k, (r, c) in
                                               zip(("ixx", "ixy", "ixz", "iyy", "iyz", "izz"), ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2)))})
            # in the old one's place, before it goes: indented as it was
            _add(link, element, _indent(root, link), list(link).index(olds[0]) if olds else 0)
        for el in olds:
            _remove(link, el)
    declared = re.match(r"\s*(<\?xml[^>]*\?>)", text)
    declaration = declared.group(1) + "\n" if declared else ""
    if re.search(r"encoding=[\"'](?!utf-?8[\"'])", declaration, re.I):  # the text is written in UTF-8
        declaration = '<?xml version="1.0" encoding="utf-8"?>\n'
    start = re.search(r"<robot[\s>/]", text)  # what comes before the root: its comments
    start_tag = re.match(r"<robot\b[^>]*>", text[start.start():]).group(0) if start else ""
    before = re.sub(r"^\s*<\?xml[^>]*\?>\s*", "", text[: start.start()] if start else "")
    body = ET.tostring(root, encoding="unicode")
    # the root's tag as written: ElementTree reorders its attributes and declares only the
    # namespaces its elements use (the root's attributes are not changed here)
    if start_tag:
        body = start_tag + body[re.match(r"<robot\b[^>]*>", body).end() :]
    if text.count(" />") < text.count("/>") / 2:  # ElementTree writes <a />; the file wrote <a/>
        body = body.replace(" />", "/>")  # (a '>' within an attribute is written &gt;)
    return declaration + before + body + "\n"
