"""Logged trajectories: reading CSV and NPZ logs, estimating derivatives, writing results.

A log holds, per sample, the joint positions ``q``, velocities ``qd``, accelerations ``qdd``
and measured torques ``tau`` of a robot. Columns are named per joint, matched to the URDF:

* by joint name: ``q_<joint>``, ``qd_<joint>``, ``qdd_<joint>``, ``tau_<joint>``
  (e.g. ``q_joint1``, ``tau_panda_joint7``);
* or by index in the model's joint order: ``q0 .. q{n-1}``, ``qd0``, ``qdd0``, ``tau0``;
* an optional time column ``t`` (s), which must be uniformly sampled.

A CSV log has one header line with these names (comma separated; lines starting with ``#``
are comments; other columns are ignored). An NPZ log holds the same names as 1-D arrays, or
whole (T, n) arrays named ``q``, ``qd``, ``qdd``, ``tau`` in the model's joint order.

``q`` and ``tau`` are required. Missing ``qdd`` (and ``qd``) are estimated from the log
itself with a Savitzky-Golay differentiator (:func:`savgol_derivative`), which needs the
sampling period: from the ``t`` column or given by the caller.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from dense_armor.learners import Sample

QUANTITIES = ("q", "qd", "qdd", "tau")
_NAMED = re.compile(r"^(qdd|qd|q|tau)_(.+)$")
_INDEXED = re.compile(r"^(qdd|qd|q|tau)(\d+)$")


class LogError(ValueError):
    """A log that cannot be read for this robot; the message names the file and the column."""


@dataclass
class Log:
    """A trajectory log matched to a robot.

    Attributes:
        q, qd, qdd, tau: (T, n) float64 arrays in the model's joint order (rad or m, /s, /s^2,
            N m or N).
        t: (T,) sample times (s), or ``None`` when the log has no time column.
        dt: sampling period (s), or ``None`` when unknown.
        estimated: the quantities estimated by differentiation (``"qd"``, ``"qdd"``).
        source: the file the log was read from.
    """

    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    t: np.ndarray | None = None
    dt: float | None = None
    estimated: tuple[str, ...] = field(default_factory=tuple)
    source: str = ""

    def __len__(self) -> int:
        return self.q.shape[0]


def savgol_coefficients(window: int, order: int, deriv: int, dt: float = 1.0) -> np.ndarray:
    """Savitzky-Golay weights: the ``deriv``-th derivative of the local polynomial fit.

    A polynomial of degree ``order`` is fitted by least squares to ``window`` equally spaced
    samples (spacing ``dt``); the weights give its derivative at every sample of the window.

    Returns:
        (window, window) array ``C``: ``C[k] @ y`` is the derivative at sample ``k`` of the
        window ``y`` (row ``window // 2`` is the centred filter).
    """
    if window < 3 or window % 2 == 0:
        raise ValueError(f"window must be an odd number >= 3, got {window}")
    if not deriv <= order < window:
        raise ValueError(f"order must be >= {deriv} (the derivative) and < window ({window}), got {order}")
    half = window // 2
    x = np.arange(-half, half + 1, dtype=np.float64)
    A = np.vander(x, order + 1, increasing=True)  # columns x^0 .. x^order
    fit = np.linalg.pinv(A)  # (order + 1, window): coefficients of the fitted polynomial
    # d^deriv/dx^deriv of sum_k c_k x^k at each x, as rows over the coefficients.
    powers = np.arange(order + 1)
    falling = np.array([math.perm(k, deriv) if k >= deriv else 0 for k in powers], dtype=np.float64)
    D = falling * x[:, None] ** np.maximum(powers - deriv, 0)
    return (D @ fit) / dt**deriv


def savgol_derivative(y, dt: float, window: int = 11, order: int = 3, deriv: int = 1) -> np.ndarray:
    """Smoothed derivative of uniformly sampled data (Savitzky-Golay), along axis 0.

    Each sample's derivative is that of a degree-``order`` polynomial fitted by least squares
    to the ``window`` samples centred on it (a zero-phase filter: it looks ahead, so it suits
    offline logs, not a live loop). At the first and last ``window // 2`` samples the fit of
    the first or last full window is used. A polynomial of degree <= ``order`` is
    differentiated exactly.

    Args:
        y: (T, ...) samples, ``T >= window``.
        dt: sampling period (s).
        window: odd window length in samples.
        order: polynomial degree, ``deriv <= order < window``.
        deriv: 1 for the first derivative, 2 for the second.

    Returns:
        (T, ...) the estimated derivative, in units of ``y`` per second**deriv.
    """
    y = np.asarray(y, dtype=np.float64)
    if not (dt > 0 and math.isfinite(dt)):
        raise ValueError(f"dt must be a positive number of seconds, got {dt}")
    C = savgol_coefficients(window, order, deriv, dt)
    T, half = y.shape[0], window // 2
    if T < window:
        raise ValueError(f"{T} samples are too few for a differentiator window of {window}")
    flat = y.reshape(T, -1)
    out = np.empty_like(flat)
    # Interior: the centred filter as a correlation over sliding windows.
    windows = np.lib.stride_tricks.sliding_window_view(flat, window, axis=0)  # (T - window + 1, m, window)
    out[half : T - half] = windows @ C[half]
    out[:half] = C[:half] @ flat[:window]
    out[T - half :] = C[half + 1 :] @ flat[T - window :]
    return out.reshape(y.shape)


def _read_csv(path: Path) -> dict[str, np.ndarray]:
    header, skip = None, 0
    with path.open(encoding="utf-8") as f:
        for line in f:
            skip += 1
            if line.strip() and not line.lstrip().startswith("#"):
                header = [h.strip() for h in line.strip().split(",")]
                break
    if header is None:
        raise LogError(f"{path}: empty log (no header line)")
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise LogError(f"{path}: duplicate columns {', '.join(dup)}")
    try:
        data = np.loadtxt(path, delimiter=",", skiprows=skip, comments="#", ndmin=2, dtype=np.float64)
    except ValueError as err:
        raise LogError(f"{path}: not a numeric CSV table: {str(err).splitlines()[0]}") from None
    if data.size == 0:
        raise LogError(f"{path}: the log has a header but no samples")
    if data.shape[1] != len(header):
        raise LogError(f"{path}: the header has {len(header)} columns, the rows have {data.shape[1]}")
    return {name: data[:, k] for k, name in enumerate(header)}


def _read_npz(path: Path, joint_names) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except (OSError, ValueError) as err:
        raise LogError(f"{path}: not a readable NPZ file: {err}") from None
    columns = {}
    for key, a in arrays.items():
        if not np.issubdtype(a.dtype, np.number):
            raise LogError(f"{path}: array {key!r} is not numeric ({a.dtype})")
        if key in QUANTITIES:
            n = len(joint_names)
            if a.ndim != 2 or a.shape[1] != n:
                raise LogError(f"{path}: array {key!r} has shape {a.shape}, expected (T, {n}) for the robot's {n} joints")
            for j in range(n):
                columns[f"{key}{j}"] = a[:, j]
        elif a.ndim == 1:
            columns[key] = a
        else:
            raise LogError(f"{path}: array {key!r} has shape {a.shape}; expected a column (T,) or one of q, qd, qdd, tau (T, n)")
    return columns


def read_columns(path: str | os.PathLike, joint_names) -> dict[str, np.ndarray]:
    """The columns of a CSV or NPZ log as 1-D float64 arrays of one length."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such log file")
    if path.suffix.lower() == ".npz":
        columns = _read_npz(path, joint_names)
    else:
        columns = _read_csv(path)
    lengths = {k: len(v) for k, v in columns.items()}
    if len(set(lengths.values())) > 1:
        raise LogError(f"{path}: columns have different lengths: {lengths}")
    return {k: np.asarray(v, dtype=np.float64) for k, v in columns.items()}


def _match(path, columns: dict, joint_names) -> dict[str, np.ndarray | None]:
    """Map the columns to (T, n) arrays per quantity (None where the log has none)."""
    n = len(joint_names)
    index = {name: j for j, name in enumerate(joint_names)}
    for key in columns:
        named, indexed = _NAMED.match(key), _INDEXED.match(key)
        if named and named.group(2) not in index and not indexed:
            raise LogError(
                f"{path}: column {key!r} names no joint of the robot (joints: {', '.join(joint_names)})"
            )
        if indexed and not named and int(indexed.group(2)) >= n:
            raise LogError(f"{path}: column {key!r} is beyond the robot's {n} joints (indices 0..{n - 1})")
    found = {}
    for qty in QUANTITIES:
        cols, missing = [], []
        for j, name in enumerate(joint_names):
            for key in (f"{qty}_{name}", f"{qty}{j}"):
                if key in columns:
                    cols.append(columns[key])
                    break
            else:
                missing.append(name)
        if cols and missing:
            raise LogError(
                f"{path}: {qty} is logged for some joints but not for {', '.join(missing)} "
                f"(expected columns {qty}_<joint> or {qty}0..{qty}{n - 1})"
            )
        found[qty] = np.stack(cols, axis=1) if cols else None
    for qty in ("q", "tau"):
        if found[qty] is None:
            raise LogError(
                f"{path}: no {qty} columns for the robot's joints; expected {qty}_{joint_names[0]} ... "
                f"or {qty}0..{qty}{n - 1} (joints: {', '.join(joint_names)})"
            )
    return found


def _sampling_period(path, t, dt):
    if t is None:
        return dt
    if len(t) < 2:
        return dt
    steps = np.diff(t)
    period = float(np.median(steps))
    if not period > 0:
        raise LogError(f"{path}: column 't' does not increase")
    if np.any(np.abs(steps - period) > 0.1 * period):
        k = int(np.argmax(np.abs(steps - period)))
        raise LogError(
            f"{path}: column 't' is not uniformly sampled (step {steps[k]:.6g} s at sample {k + 1}, "
            f"median {period:.6g} s); resample the log first"
        )
    if dt is not None and abs(dt - period) > 1e-6 * period:
        raise LogError(f"{path}: --dt {dt} s disagrees with the log's 't' column (period {period:.6g} s)")
    return period


def load_log(path: str | os.PathLike, joint_names, dt: float | None = None, window: int = 11, order: int = 3) -> Log:
    """Read a log and match its columns to the robot's joints.

    Args:
        path: a ``.csv`` or ``.npz`` log (see the module docstring for the column names).
        joint_names: the model's joint names, in its order.
        dt: sampling period (s), needed when velocities or accelerations are missing and the
            log has no ``t`` column.
        window, order: the Savitzky-Golay differentiator for missing derivatives.

    Raises:
        FileNotFoundError: no such file.
        LogError: the columns do not match the robot, the samples are not numeric, or a
            derivative is missing and the sampling period is unknown.
    """
    joint_names = tuple(joint_names)
    columns = read_columns(path, joint_names)
    found = _match(path, columns, joint_names)
    t = columns.get("t")
    if dt is not None and not (dt > 0 and math.isfinite(dt)):
        raise LogError(f"--dt must be a positive number of seconds, got {dt}")
    period = _sampling_period(path, t, dt)
    estimated = []
    if found["qdd"] is None or found["qd"] is None:
        missing = "qd and qdd" if found["qd"] is None else "qdd"
        if period is None:
            raise LogError(
                f"{path}: the log has no {missing} columns; give the sampling period (--dt) or a 't' column "
                "to estimate them"
            )
        T = found["q"].shape[0]
        if T < window:
            raise LogError(f"{path}: {T} samples are too few to estimate {missing} (window {window})")
        if found["qd"] is None:
            found["qd"] = savgol_derivative(found["q"], period, window, order, deriv=1)
            found["qdd"] = savgol_derivative(found["q"], period, window, order, deriv=2)
            estimated = ["qd", "qdd"]
        else:
            found["qdd"] = savgol_derivative(found["qd"], period, window, order, deriv=1)
            estimated = ["qdd"]
    return Log(
        q=found["q"], qd=found["qd"], qdd=found["qdd"], tau=found["tau"], t=t, dt=period,
        estimated=tuple(estimated), source=str(path),
    )


def write_table(path: str | os.PathLike, columns: dict[str, np.ndarray]) -> None:
    """Write named 1-D columns to ``path``: NPZ if it ends in ``.npz``, else CSV with a header."""
    path = Path(path)
    if path.suffix.lower() == ".npz":
        np.savez(path, **columns)
        return
    names = list(columns)
    data = np.column_stack([np.asarray(columns[k], dtype=np.float64) for k in names])
    np.savetxt(path, data, delimiter=",", header=",".join(names), comments="", fmt="%.9g")


def replay_chunked(learner, state, trajectory, chunk: int = 2000, progress=None):
    """Replay a long trajectory through ``learner.step`` in chunks of one ``lax.scan`` each.

    Every chunk has the same length (the last one is padded with masked samples that leave the
    state untouched), so the scan compiles once; the state is carried from chunk to chunk, and
    the result equals one scan over the whole trajectory.

    Args:
        learner: a learner with ``step(state, Sample) -> (state, StepOutput)``.
        state: its initial state.
        trajectory: a :class:`~dense_armor.learners.Sample` of (T, n) arrays.
        chunk: samples per scan.
        progress: ``None`` or a callable ``progress(done, total)`` called after each chunk.

    Returns:
        The final state and the per-sample outputs as NumPy arrays (leading axis T).
    """
    arrays = [np.asarray(a) for a in trajectory]
    T = arrays[0].shape[0]
    chunk = max(1, min(int(chunk), T))
    outputs = []
    for start in range(0, T, chunk):
        stop = min(start + chunk, T)
        pad = chunk - (stop - start)
        block = Sample(*(np.concatenate([a[start:stop], np.zeros((pad,) + a.shape[1:], a.dtype)]) for a in arrays))
        mask = np.arange(chunk) < stop - start
        state, out = _masked_replay(learner, state, block, mask)
        outputs.append(jax.tree.map(lambda x: np.asarray(x)[: stop - start], out))
        if progress is not None:
            progress(stop, T)
    return state, jax.tree.map(lambda *xs: np.concatenate(xs), *outputs)


@jax.jit
def _masked_replay(learner, state, trajectory, mask):
    """``lax.scan`` of ``learner.step``; samples with ``mask`` false leave the state as it was."""

    def body(s, xs):
        sample, keep = xs
        new, out = learner.step(s, sample)
        return jax.tree.map(lambda a, b: jnp.where(keep, a, b), new, s), out

    return jax.lax.scan(body, state, (trajectory, mask))
