"""A thin Pinocchio adapter: the reference for every dynamics quantity, in our conventions.

``PinOracle`` builds a Pinocchio model from the same URDF text (or file) the library parses
and returns every quantity in the library's conventions:

- coordinates in the library's joint order (``joint_names``), one angle per continuous joint
  (Pinocchio stores ``(cos, sin)``: nq = 2, nv = 1);
- the mass matrix full and symmetric (Pinocchio's ``crba`` fills the upper triangle only);
- the regressor with 10 columns per joint body, in the library's joint order;
- frame placements and Jacobians looked up by link name (Pinocchio's BODY frames);
- Jacobians at the frame origin in world-aligned axes (``LOCAL_WORLD_ALIGNED``), rows
  (linear; angular).

Two things about Pinocchio (4.1, urdfdom) the adapter has to absorb:

- urdfdom refuses ``<limit>`` without ``effort`` or ``velocity``, and revolute/prismatic
  joints without ``<limit>``; the library accepts those (SPEC section 3). ``pin_compatible``
  fills in zeros before Pinocchio sees the text (limits do not enter the dynamics).
- urdfdom keeps joints in a ``std::map`` keyed by name, so Pinocchio orders the children of a
  link by joint name, not by their order in the file. When the two differ, ``joint_names``
  (Pinocchio's order) differs from the library's; the adapter maps by name, and
  ``same_order_as`` tells whether a permutation was needed.

``mimic`` tags: ``buildModelFromXML(..., mimic=False)`` (the default) keeps a mimic joint as an
independent coordinate, which is the library's default too.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pinocchio as pin


def pin_compatible(xml: str) -> str:
    """Fill in the limit attributes urdfdom insists on (zeros), leave everything else."""
    root = ET.fromstring(xml.encode())
    for joint in root.findall("joint"):
        kind = joint.get("type")
        limit = joint.find("limit")
        if limit is None and kind in ("revolute", "prismatic"):
            limit = ET.SubElement(joint, "limit", {"lower": "0", "upper": "0"})
        if limit is not None:
            limit.attrib.setdefault("effort", "0")
            limit.attrib.setdefault("velocity", "0")
    return ET.tostring(root, encoding="unicode")


class PinOracle:
    """Pinocchio reference for one URDF.

    Args:
        source: URDF text, or a path to a URDF file.
        joint_names: the library's joint order; quantities come back in this order. Default:
            Pinocchio's own order.
        locked: names of joints to lock at zero (``pin.buildReducedModel``).
    """

    def __init__(self, source: str | Path, joint_names=None, locked=()):
        if isinstance(source, Path) or (isinstance(source, str) and not source.lstrip().startswith("<")):
            xml = Path(source).read_text()
        else:
            xml = source
        model = pin.buildModelFromXML(pin_compatible(xml))
        if locked:
            ids = [model.getJointId(name) for name in locked]
            assert all(i < model.njoints for i in ids), f"unknown joints in {locked}"
            model = pin.buildReducedModel(model, ids, pin.neutral(model))
        self.model = model
        self.data = model.createData()
        for j in range(1, model.njoints):
            assert model.joints[j].nv == 1, f"joint {model.names[j]} is not a 1-dof joint"
        self.pin_joint_names = tuple(model.names[1:])
        names = self.pin_joint_names if joint_names is None else tuple(joint_names)
        assert sorted(names) == sorted(self.pin_joint_names), (names, self.pin_joint_names)
        self.joint_names = names
        self.n = len(names)
        ids = [model.getJointId(name) for name in names]
        self._ids = [int(i) for i in ids]
        self._iv = np.array([model.joints[j].idx_v for j in ids])
        self._iq = np.array([model.joints[j].idx_q for j in ids])
        self._nq = np.array([model.joints[j].nq for j in ids])
        # regressor columns: 10 per joint, Pinocchio's joint order
        self._cols = np.concatenate([np.arange(10 * (j - 1), 10 * j) for j in ids]) if ids else []

    @property
    def same_order_as(self) -> bool:
        return self.joint_names == self.pin_joint_names

    @property
    def continuous(self) -> np.ndarray:
        return self._nq == 2

    # --- conversions --------------------------------------------------------------------

    def q_pin(self, q) -> np.ndarray:
        q = np.asarray(q, dtype=np.float64)
        out = pin.neutral(self.model)
        for i in range(self.n):
            if self._nq[i] == 2:
                out[self._iq[i]] = np.cos(q[i])
                out[self._iq[i] + 1] = np.sin(q[i])
            else:
                out[self._iq[i]] = q[i]
        return out

    def v_pin(self, v) -> np.ndarray:
        out = np.zeros(self.model.nv)
        out[self._iv] = np.asarray(v, dtype=np.float64)
        return out

    def _v_ours(self, v_pin) -> np.ndarray:
        return np.asarray(v_pin)[self._iv]

    # --- model data ---------------------------------------------------------------------

    def inertia(self) -> np.ndarray:
        """(n, 10) dynamic parameters of each joint body (fixed children merged in)."""
        return np.stack([self.model.inertias[j].toDynamicParameters() for j in self._ids]).reshape(
            self.n, 10
        )

    def limits(self) -> dict[str, np.ndarray]:
        m = self.model
        return {
            "lower": np.array([m.lowerPositionLimit[i] for i in self._iq]),
            "upper": np.array([m.upperPositionLimit[i] for i in self._iq]),
            "velocity": m.velocityLimit[self._iv],
            "effort": m.effortLimit[self._iv],
        }

    def gravity(self) -> np.ndarray:
        return np.array(self.model.gravity.linear)

    def frame_id(self, link: str) -> int:
        fid = self.model.getFrameId(link, pin.FrameType.BODY)
        assert fid < self.model.nframes, f"no BODY frame {link}"
        return fid

    # --- dynamics -----------------------------------------------------------------------

    def rnea(self, q, qd, qdd) -> np.ndarray:
        tau = pin.rnea(self.model, self.data, self.q_pin(q), self.v_pin(qd), self.v_pin(qdd))
        return self._v_ours(tau)

    def crba(self, q) -> np.ndarray:
        m = pin.crba(self.model, self.data, self.q_pin(q)).copy()
        m = np.triu(m) + np.triu(m, 1).T
        return m[np.ix_(self._iv, self._iv)]

    def nonlinear_effects(self, q, qd) -> np.ndarray:
        return self._v_ours(pin.nonLinearEffects(self.model, self.data, self.q_pin(q), self.v_pin(qd)))

    def generalized_gravity(self, q) -> np.ndarray:
        return self._v_ours(pin.computeGeneralizedGravity(self.model, self.data, self.q_pin(q)))

    def aba(self, q, qd, tau) -> np.ndarray:
        return self._v_ours(pin.aba(self.model, self.data, self.q_pin(q), self.v_pin(qd), self.v_pin(tau)))

    def joint_torque_regressor(self, q, qd, qdd) -> np.ndarray:
        y = pin.computeJointTorqueRegressor(
            self.model, self.data, self.q_pin(q), self.v_pin(qd), self.v_pin(qdd)
        )
        return np.asarray(y)[np.ix_(self._iv, self._cols)]

    def frame_placements(self, q, links) -> tuple[np.ndarray, np.ndarray]:
        """World rotations (F, 3, 3) and positions (F, 3) of the named links."""
        pin.framesForwardKinematics(self.model, self.data, self.q_pin(q))
        ids = [self.frame_id(name) for name in links]
        rot = np.stack([self.data.oMf[i].rotation for i in ids])
        pos = np.stack([self.data.oMf[i].translation for i in ids])
        return rot, pos

    def frame_jacobians(self, q, links) -> np.ndarray:
        """(F, 6, n) Jacobians at each link origin, world-aligned, rows (linear; angular)."""
        qp = self.q_pin(q)
        out = []
        for name in links:
            jac = pin.computeFrameJacobian(
                self.model, self.data, qp, self.frame_id(name), pin.LOCAL_WORLD_ALIGNED
            )
            out.append(np.asarray(jac)[:, self._iv])
        return np.stack(out)
