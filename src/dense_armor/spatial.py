"""Scalarised 3-D and spatial algebra.

Every quantity here is a nested Python tuple of scalars: a 3-vector is ``(x, y, z)``, a 3x3
matrix is a tuple of three rows. The scalars may be NumPy floats (the URDF parser uses these
functions on the host) or 0-d JAX arrays (the dynamics trace them). Written this way, a whole
tree pass compiles to a handful of fused elementwise XLA kernels instead of hundreds of tiny
3x3 products, and ``vmap`` turns every scalar into a batch lane for free.

Conventions, stated once for the library:

* A placement ``(R, p)`` of frame B in frame A maps B coordinates to A: ``x_A = R x_B + p``.
* A spatial motion vector is the pair ``(w, v)``: angular velocity and the linear velocity of
  the point at the frame origin, both in that frame. A spatial force is ``(n, f)``: the moment
  about the frame origin and the force. (Public Jacobians use Pinocchio's row order
  ``(linear; angular)``.)
* A rigid body's spatial inertia about its frame origin is the 3-block form ``(A, B, C)``
  mapping motion to force: ``n = A w + B v``, ``f = B^T w + C v``; for a rigid body
  ``A = I_O`` (rotational inertia about the origin), ``B = [h]`` with ``h = m c`` and
  ``C = m 1``. Articulated inertias use the same blocks with a general symmetric ``C``.
* Inertial parameters are the 10-vector ``(m, h_x, h_y, h_z, I_xx, I_xy, I_yy, I_xz, I_yz,
  I_zz)`` with ``I`` about the frame origin (Pinocchio's dynamic-parameter order).
"""

from __future__ import annotations

import math

import numpy as np

# ---------------------------------------------------------------- 3-vectors and 3x3 matrices


class Zero:
    """A zero known at trace time (:data:`ZERO`): a product with it is ``ZERO`` and a sum skips
    it, so the functions below trace no operation on a structural zero (a joint axis along z,
    the base at rest). XLA cannot drop ``x * 0`` itself, as ``inf * 0`` is NaN."""

    __slots__ = ()
    __array_ufunc__ = None  # NumPy scalars defer to the methods below

    def __mul__(self, other):
        return self

    __rmul__ = __mul__

    def __add__(self, other):
        return other

    __radd__ = __add__

    def __neg__(self):
        return self

    def __sub__(self, other):
        return -other

    def __rsub__(self, other):
        return other

    def __repr__(self) -> str:
        return "ZERO"


ZERO = Zero()


def add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def sub(a, b):
    return tuple(x - y for x, y in zip(a, b))


def scale(s, a):
    return tuple(s * x for x in a)


def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a, b):
    return (
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    )


def matvec(m, v):
    return tuple(dot(row, v) for row in m)


def matTvec(m, v):
    return tuple(m[0][i] * v[0] + m[1][i] * v[1] + m[2][i] * v[2] for i in range(3))


def transpose(m):
    return tuple(tuple(m[r][c] for r in range(3)) for c in range(3))


def matmul(a, b):
    bt = transpose(b)
    return tuple(tuple(dot(row, col) for col in bt) for row in a)


def madd(a, b):
    return tuple(add(ra, rb) for ra, rb in zip(a, b))


def msub(a, b):
    return tuple(sub(ra, rb) for ra, rb in zip(a, b))


def skew(v):
    """``[v]``, the matrix of ``v x .``."""
    zero = 0.0 * v[0]
    return ((zero, -v[2], v[1]), (v[2], zero, -v[0]), (-v[1], v[0], zero))


def skew_mul(v, m):
    """``[v] m`` without forming ``[v]``."""
    return transpose(tuple(cross(v, col) for col in transpose(m)))


def mul_skew(m, v):
    """``m [v]`` without forming ``[v]`` (row r of the result is ``m_r x v``)."""
    return tuple(cross(row, v) for row in m)


def rotate_sym(R, S):
    """``R S R^T``."""
    return matmul(matmul(R, S), transpose(R))


def rodrigues(axis, c, s):
    """Rotation about the unit ``axis`` by the angle whose cosine is ``c`` and sine ``s``."""
    t = 1.0 - c
    x, y, z = axis
    return (
        (c + x * x * t, x * y * t - z * s, x * z * t + y * s),
        (y * x * t + z * s, c + y * y * t, y * z * t - x * s),
        (z * x * t - y * s, z * y * t + x * s, c + z * z * t),
    )


# ---------------------------------------------------------------- placements


def compose(a, b):
    """Placement of C in A from ``a`` (B in A) and ``b`` (C in B)."""
    Ra, pa = a
    Rb, pb = b
    return matmul(Ra, Rb), add(matvec(Ra, pb), pa)


# ---------------------------------------------------------------- spatial motion and force


def motion_to_child(R, p, motion):
    """Express a parent-frame motion ``(w, v)`` in a child frame placed at ``(R, p)``."""
    w, v = motion
    return matTvec(R, w), matTvec(R, add(v, cross(w, p)))


def force_to_parent(R, p, force):
    """Express a child-frame force ``(n, f)`` in the parent frame (child placed at ``(R, p)``)."""
    n, f = force
    f_p = matvec(R, f)
    return add(matvec(R, n), cross(p, f_p)), f_p


def sadd(a, b):
    """Sum of two spatial vectors (motion or force pairs)."""
    return add(a[0], b[0]), add(a[1], b[1])


def cross_motion(v, m):
    """Spatial motion cross product ``v x m``."""
    w, lin = v
    mw, mv = m
    return cross(w, mw), add(cross(w, mv), cross(lin, mw))


def cross_force(v, f):
    """Spatial force cross product ``v x* f``."""
    w, lin = v
    n, fl = f
    return add(cross(w, n), cross(lin, fl)), cross(w, fl)


# ---------------------------------------------------------------- inertia


def inertia_blocks(params):
    """The ``(A, B, C)`` blocks of a rigid body from its 10 inertial parameters."""
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = params
    zero = 0.0 * m
    A = ((ixx, ixy, ixz), (ixy, iyy, iyz), (ixz, iyz, izz))
    C = ((m, zero, zero), (zero, m, zero), (zero, zero, m))
    return A, skew((hx, hy, hz)), C


def inertia_apply(blocks, motion):
    """Spatial inertia times a motion vector: the momentum ``(n, f)``."""
    A, B, C = blocks
    w, v = motion
    return add(matvec(A, w), matvec(B, v)), add(matTvec(B, w), matvec(C, v))


def rigid_momentum(params, motion):
    """A rigid body's spatial inertia (its 10 parameters) times a motion: ``(I w + h x v, m v - h x w)``.

    The same as ``inertia_apply(inertia_blocks(params), motion)`` without the products by the
    blocks' structural zeros.
    """
    m, hx, hy, hz, ixx, ixy, iyy, ixz, iyz, izz = params
    w, v = motion
    h = (hx, hy, hz)
    Iw = (ixx * w[0] + ixy * w[1] + ixz * w[2], ixy * w[0] + iyy * w[1] + iyz * w[2], ixz * w[0] + iyz * w[1] + izz * w[2])
    return add(Iw, cross(h, v)), sub(scale(m, v), cross(h, w))


def inertia_to_parent(blocks, R, p):
    """Re-express spatial inertia blocks about a child frame placed at ``(R, p)`` in the parent.

    ``A' = R A R^T`` etc., then the shift of origin by ``p``::

        A_p = A' - B'[p] + [p]B'^T - [p]C'[p],  B_p = B' + [p]C',  C_p = C'
    """
    A, B, C = blocks
    Ar, Br, Cr = rotate_sym(R, A), rotate_sym(R, B), rotate_sym(R, C)
    pC = skew_mul(p, Cr)
    A_p = msub(madd(msub(Ar, mul_skew(Br, p)), skew_mul(p, transpose(Br))), mul_skew(pC, p))
    return A_p, madd(Br, pC), Cr


def rigid_params_to_parent(params, R, p):
    """Inertial parameters (10,) of a body expressed in a frame where the body frame sits at ``(R, p)``."""
    A, B, C = inertia_to_parent(inertia_blocks(params), R, p)
    m = C[0][0]
    h = (B[2][1], B[0][2], B[1][0])
    return (m, *h, A[0][0], A[0][1], A[1][1], A[0][2], A[1][2], A[2][2])


def rpy_to_matrix(rpy):
    """URDF roll-pitch-yaw (fixed axes X, Y, Z) to a rotation matrix, ``Rz(y) Ry(p) Rx(r)``."""
    r, p, y = (float(a) for a in rpy)
    cr, sr, cp, sp, cy, sy = math.cos(r), math.sin(r), math.cos(p), math.sin(p), math.cos(y), math.sin(y)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def as_tuple(a):
    """A NumPy/JAX vector or matrix as nested tuples of scalars."""
    if a.ndim == 1:
        return tuple(a[i] for i in range(a.shape[0]))
    return tuple(as_tuple(a[i]) for i in range(a.shape[0]))
