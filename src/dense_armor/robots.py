"""Embedded robot descriptions, so examples and the command line run with no files to fetch."""

from __future__ import annotations

import atexit
import contextlib
import os
import tempfile
from pathlib import Path


def minimal_urdf(payload_mass: float = 0.0) -> str:
    """The design document's 2-link planar arm (revolute joints about z, links of 1 m) as XML.

    Args:
        payload_mass: extra point mass (kg) at the centre of mass of ``link2``, i.e. added
            to its 0.5 kg.
    """
    m2 = 0.5 + payload_mass
    return f"""<robot name="two_link">
  <link name="base">
    <inertial>
      <origin xyz="0 0 0" rpy="0 0 0"/>
      <mass value="1.0"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.01" iyz="0" izz="0.01"/>
    </inertial>
  </link>
  <link name="link1">
    <inertial>
      <origin xyz="0.5 0 0" rpy="0 0 0"/>
      <mass value="1.0"/>
      <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.05" iyz="0" izz="0.05"/>
    </inertial>
  </link>
  <link name="link2">
    <inertial>
      <origin xyz="0.5 0 0" rpy="0 0 0"/>
      <mass value="{m2}"/>
      <inertia ixx="0.005" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.02"/>
    </inertial>
  </link>
  <joint name="joint1" type="revolute">
    <parent link="base"/>
    <child link="link1"/>
    <origin xyz="0 0 0" rpy="0 0 0"/>
    <axis xyz="0 0 1"/>
    <limit lower="-3.14" upper="3.14" velocity="10.0"/>
  </joint>
  <joint name="joint2" type="revolute">
    <parent link="link1"/>
    <child link="link2"/>
    <origin xyz="1 0 0" rpy="0 0 0"/>
    <axis xyz="0 0 1"/>
    <limit lower="-3.14" upper="3.14" velocity="10.0"/>
  </joint>
</robot>"""


#: The temporary files :func:`write_minimal_urdf` made, removed when the interpreter exits.
_TEMPORARY: list[str] = []


@atexit.register
def _remove_temporary() -> None:
    for path in _TEMPORARY:
        with contextlib.suppress(OSError):
            os.remove(path)


def write_minimal_urdf(path: str | os.PathLike | None = None, payload_mass: float = 0.0) -> str:
    """Write :func:`minimal_urdf` to ``path`` (by default a new temporary file, removed when the
    interpreter exits); return the path."""
    if path is None:
        fd, path = tempfile.mkstemp(suffix=".urdf")
        os.close(fd)
        _TEMPORARY.append(path)
    Path(path).write_text(minimal_urdf(payload_mass), encoding="utf-8")
    return str(path)
