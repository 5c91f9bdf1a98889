"""``dense-armor info``: what the parser made of a URDF."""

from __future__ import annotations

import numpy as np

from dense_armor import inertial
from dense_armor.cli.common import table
from dense_armor.urdf import parse_urdf

def _vec(v, digits=4) -> str:
    v = np.asarray(v, dtype=float)
    v = np.where(np.abs(v) < 1e-12, 0.0, v)  # no -1.9e-17 from rounding
    return "(" + ", ".join(f"{x:.{digits}g}" for x in v) + ")"


def _frames_at_zero(model) -> np.ndarray:
    """(F, 3) frame positions in the base frame at q = 0 (host NumPy: nothing to compile)."""
    world = []
    for i, parent in enumerate(model.parents):
        R, p = np.asarray(model.joint_rotation[i], float), np.asarray(model.joint_translation[i], float)
        world.append((R, p) if parent < 0 else (world[parent][0] @ R, world[parent][0] @ p + world[parent][1]))
    out = []
    for f, body in enumerate(model.frame_bodies):
        p = np.asarray(model.frame_translation[f], float)
        out.append(p if body < 0 else world[body][0] @ p + world[body][1])
    return np.array(out)


def _limit(v) -> str:
    return "-" if not np.isfinite(v) else f"{v:g}"


def cmd_info(args) -> int:
    model = parse_urdf(args.urdf, mimic=args.mimic)
    n = model.n
    root = model.frame_names[0]
    coupled = f" (and {len(model.mimics)} coupled mimic joint{'s' * (len(model.mimics) > 1)})" if model.mimics else ""
    print(f"robot {model.name!r} from {args.urdf}: {n} movable joints{coupled}, {len(model.frame_names)} links, fixed base {root!r}")
    print(f"gravity {_vec(model.gravity)} m/s^2 in the base frame")
    print("\njoints, in the order of q (depth-first, file order):")
    rows = []
    own = dict(zip(model.coordinate_bodies, range(n)))
    for i, name in enumerate(model.body_joint_names):
        parent = root if model.parents[i] < 0 else model.body_names[model.parents[i]]
        c = own.get(i)
        limits = ["-"] * 4 if c is None else [_limit(x[c]) for x in (model.lower, model.upper, model.velocity_limit, model.effort_limit)]
        rows.append(["" if c is None else c, name, model.joint_kinds[i], parent, model.body_names[i], _vec(model.axis[i]),
                     _vec(model.joint_translation[i]), *limits])
    print(table(["#", "joint", "type", "parent", "child", "axis", "origin [m]", "lower", "upper", "velocity", "effort"], rows,
                 [">", "<", "<", "<", "<", "<", "<", ">", ">", ">", ">"]))
    for (joint, _, c), k, o in zip(model.mimics, model.mimic_multiplier, model.mimic_offset):
        print(f"{joint} mimics {model.joint_names[c]}: q = {k:g} q_{model.joint_names[c]} + {o:g}")
    dynamics = [f"  {name}: damping {d:g} N m s/rad, friction {f:g} N m"
                for name, d, f in zip(model.joint_names, np.asarray(model.damping), np.asarray(model.friction)) if d or f]
    if dynamics:
        print("<dynamics> (kept in the model; rnea, crba and aba leave them out, and the robot learner learns its own friction):")
        print("\n".join(dynamics))
    print("\nbodies (links behind fixed joints merged into the body they hang from):")
    rows = []
    for b in range(model.n_bodies):
        m, com, I_c = inertial.to_com(np.asarray(model.inertia[b], dtype=float))
        merged = [f for f, body in zip(model.frame_names, model.frame_bodies) if body == b]
        rows.append([b, model.body_names[b], f"{m:.4g}", _vec(com), _vec(np.diag(I_c)), ", ".join(merged)])
    print(table(["#", "body", "mass [kg]", "com [m]", "inertia diag at com [kg m^2]", "links"], rows,
                 [">", "<", ">", "<", "<", "<"]))
    total = float(np.sum(np.asarray(model.inertia)[:, 0]))
    print(f"moving mass {total:.4g} kg (the fixed base's links carry no dynamics)")
    print("\nframes (every link; position at q = 0 in the base frame):")
    p0 = _frames_at_zero(model)
    rows = []
    for f, name in enumerate(model.frame_names):
        body = model.frame_bodies[f]
        rows.append([f, name, "base" if body < 0 else model.body_names[body], _vec(model.frame_translation[f]), _vec(np.asarray(p0[f]))])
    print(table(["#", "frame", "on body", "offset in body [m]", "position at q = 0 [m]"], rows, [">", "<", "<", "<", "<"]))
    return 0
