"""Logged trajectories as robots log them: CSV, NPZ and ROS bags, on their own clocks.

A log holds, per sample, a time stamp, the joint positions ``q``, often velocities ``qd``,
rarely accelerations ``qdd``, and the measured torques ``tau`` (or motor currents, scaled to
torques per joint). :func:`open_log` reads one as a stream of chunks matched to a robot's
joints, checks its clock, and estimates the missing derivatives on the stamps
(:mod:`dense_armor.derivatives`); :func:`load_log` returns the whole log at once.

Formats:

* **CSV** with one header line (comma separated; ``#`` lines are comments; a UTF-8 byte-order
  mark, quoted names and a comma ending every line are allowed; other columns are ignored;
  read a chunk of rows at a time; a last line cut off by a logger stopped while writing is
  dropped and noted) and
  **NPZ** (the same names as 1-D arrays, or (T, n) arrays ``q``, ``qd``, ``qdd``, ``tau`` in the
  model's joint order; other arrays, the joints' names or a rate, are ignored). Columns are
  ``q_<joint>``, ``qd_<joint>``, ``qdd_<joint>``, ``tau_<joint>`` by joint name, or ``q0 ..
  q{n-1}`` etc. by index in the model's joint order, and an optional time column ``t`` (s, or
  the unit given: ``time_unit``, :data:`TIME_UNITS`).
* **ROS bags** (``.mcap`` and ``.db3`` ROS 2 bags, their folders, and ROS 1 ``.bag``), read
  with the ``rosbags`` library: ``sensor_msgs/msg/JointState`` messages on one topic
  (``/joint_states`` by default), joints matched by name, ``position``, ``velocity`` (when
  the first message has it; a later message without is a row without) and ``effort`` (a
  message without is a row without), stamped by their header (a zero header among stamped
  ones, sent before the clock ran, is dropped and counted), or by the bag's receive times
  when the headers of the first chunk are all zero. Read message by message: a long bag never
  needs to fit in memory.

Clock. Stamps must increase strictly: a decreasing stamp is an error naming the sample, and so
is a repeated one, unless ``drop_repeated`` drops the samples that repeat the stamp before them
(a message published twice) or ``drop_unordered`` those not after every stamp before them (two
messages swapped, a clock stepped back); they are counted and reported. Steps jitter (0.7-1.6 times the median step
is normal on a host clock); a step over :data:`GAP` times the median is a gap (dropped
packets, a recording paused); the period is the mean of the other steps of the first chunk.
Gaps up to ``max_gap`` seconds (default :data:`BRIDGE` median periods, or :data:`BRIDGE_CUTOFF`
periods of the differentiator's cut-off if longer) are bridged: the derivatives run across
them; a longer gap splits the log into segments: the derivatives restart, the learner keeps its
state. A segment too short for the derivatives' filter to settle in
(:data:`dense_armor.derivatives.SHORTEST` periods of its cut-off) is dropped and counted, unless
it is the whole log. Every gap is reported by sample index and time. Without a ``t`` column the
sampling period must be given. A period over :data:`MAX_PERIOD` is an error: stamps in another
unit than seconds; so are stamps of arrivals in bursts (frequent gaps holding nearly all the
time).

Angles (``angles``: revolute and continuous joints) are unwrapped: a driver may log a joint that
turns without limit in (-pi, pi], and a step of more than pi between two samples of a segment
is that wrap, not motion. Rows with a NaN or inf in a joint's value are skipped and counted (the
clock goes on).
"""

from __future__ import annotations

import io
import itertools
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from dense_armor import derivatives

QUANTITIES = ("q", "qd", "qdd", "tau")
GAP = 2.0  # a step over GAP median periods is a gap
# by default, gaps up to BRIDGE median periods, or BRIDGE_CUTOFF periods of the differentiator's
# cut-off if longer, are bridged: a spline through a gap half the period of the fastest motion
# kept follows it
BRIDGE = 10.0
BRIDGE_CUTOFF = 0.5
# stamps of arrivals in bursts, not of samples: at least BURST_GAPS of the steps are gaps, and
# the other steps hold under BURSTS of the time
BURST_GAPS = 0.002
BURSTS = 0.25
#: The units a CSV or NPZ log's ``t`` may be in, and their seconds.
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
#: s: a log sampled more slowly than this has stamps in another unit (ms, ns: a robot logs at
#: tens of Hz or more), or too few samples to estimate accelerations from.
MAX_PERIOD = 0.5
BAG_SUFFIXES = (".mcap", ".db3", ".bag")
DEFAULT_TOPIC = "/joint_states"
_NAMED = re.compile(r"^(qdd|qd|q|tau)_(.+)$")
_INDEXED = re.compile(r"^(qdd|qd|q|tau)(\d+)$")


class LogError(ValueError):
    """A log that cannot be read for this robot; the message names the file and the column,
    sample or message."""


@dataclass
class Gap:
    """A step of the clock over :data:`GAP` median periods.

    Attributes:
        index: the sample after the gap (its index in the log, skipped rows included).
        t: its stamp, s.
        step: the step, s.
        bridged: the derivatives ran across it (else it split the log).
    """

    index: int
    t: float
    step: float
    bridged: bool


@dataclass
class LogInfo:
    """What reading a log found (filled in as the stream is read).

    Attributes:
        source: the file.
        joints: the model's joints, in its order.
        logged: the quantities the log has (``"t"`` included when it has stamps).
        estimated: the derivatives estimated (``"qd"``, ``"qdd"``).
        period: the sampling period, s: the mean step without gaps (``None`` for a log without stamps or period:
            its ``t`` is then the sample index).
        derivative: ``"zero-phase"``, ``"causal"`` or ``None`` (nothing estimated).
        cutoff: the differentiator's cut-off, Hz.
        resample: the resampling rate, Hz, or ``None``.
        samples: rows read; skipped: rows with a NaN or inf, not used; other: a bag's
            messages with none of the robot's joints (another publisher's, a gripper's).
        repeated: rows dropped for repeating the stamp before them (or, with ``drop_unordered``,
            for a stamp not after every one before); first_repeated: the first one's ``(row, t)``,
            or ``None``.
        gaps: every gap (:class:`Gap`); segments: pieces the log was split into.
        expected: the number of rows, when known before reading (else ``None``).
        ignored: a CSV's or NPZ's columns naming no joint of the robot (``q_des_joint1``).
        locked_range: the positions ``(lowest, highest)`` the log has for joints locked in the
            model (``locked``), where it logs them.
        clock: a bag's stamps: ``"header"`` (the messages' own) or ``"receive"`` (the bag's,
            when the headers of its first chunk are all zero); ``None`` for other logs.
        unstamped: a bag's messages with a zero header stamp among stamped ones, dropped.
        unestimated: logged derivatives (``"qd"``, ``"qdd"``) not a number for some joint in
            every row of the first chunk (a driver's NaN for a missing interface), estimated.
        fragments: rows of segments too short to estimate derivatives on
            (:data:`dense_armor.derivatives.SHORTEST` cut-off periods), dropped.
        wrapped: for each joint of ``angles`` whose logged position wrapped, how often: a step
            of more than pi between two samples, unwrapped (a driver's angle in (-pi, pi]).
        cut_line: a CSV's last line, cut off (no line end and too few fields: the logger
            stopped while writing), dropped; ``None`` if none.
    """

    source: str
    joints: tuple
    logged: set
    estimated: tuple = ()
    period: float | None = None
    derivative: str | None = None
    cutoff: float | None = None
    resample: float | None = None
    samples: int = 0
    skipped: int = 0
    other: int = 0
    repeated: int = 0
    first_repeated: tuple | None = None
    gaps: list = field(default_factory=list)
    segments: int = 1
    expected: int | None = None
    ignored: tuple = ()
    locked_range: dict = field(default_factory=dict)
    clock: str | None = None
    unstamped: int = 0
    unestimated: tuple = ()
    fragments: int = 0
    wrapped: dict = field(default_factory=dict)
    cut_line: int | None = None


@dataclass
class Log:
    """A whole log matched to a robot (:func:`load_log`).

    Attributes:
        t: (T,) stamps, s. q, qd, qdd, tau: (T, n) float64 in the model's joint order.
        info: what reading it found (:class:`LogInfo`).
    """

    t: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    qdd: np.ndarray
    tau: np.ndarray
    info: LogInfo

    def __len__(self) -> int:
        return len(self.t)


# ----------------------------------------------------------------------------- tables


def _read_csv(path: Path, rows: int, info: LogInfo) -> tuple[list[str], Iterator[dict]]:
    """A CSV log's column names and its rows, read ``rows`` lines at a time (dicts of (m,)
    columns by name): a long log never needs to fit in memory. A last line cut off (no line
    end, fewer fields: a logger stopped while writing) is dropped and noted in ``info``."""
    with open(path, encoding="utf-8-sig") as f:
        try:
            start = next(((k, line) for k, line in enumerate(f, 1) if line.strip() and not line.lstrip().startswith("#")), None)
        except UnicodeDecodeError as err:
            raise LogError(f"{path}: not a text CSV file ({err.reason})") from None
    if start is None:
        raise LogError(f"{path}: empty log (no header line)")
    # names as spreadsheets write them too: quoted ("q_joint1")
    header = [h.strip().removeprefix('"').removesuffix('"').strip() for h in start[1].split(",")]
    trailing = len(header) > 1 and header[-1] == ""  # every line ends with a comma, as some exporters write
    if trailing:
        header = header[:-1]
    if all(re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|[-+]?(nan|inf)", h, re.I) for h in header):
        raise LogError(f"{path}: the first line is numbers, not column names (a header written as a comment? "
                       "np.savetxt comments it out unless given comments='')")
    if len(set(header)) != len(header):
        dup = sorted({h for h in header if header.count(h) > 1})
        raise LogError(f"{path}: duplicate columns {', '.join(dup)}")
    with open(path, "rb") as raw:  # the rows to expect, for progress: the lines after the header
        ends, last = 0, b"\n"
        for block in iter(lambda: raw.read(1 << 20), b""):
            ends, last = ends + block.count(b"\n"), block[-1:]
    info.expected = ends + (last != b"\n") - start[0]
    return header, _csv_rows(path, start[0], header, trailing, rows, info)


def _csv_rows(path: Path, after: int, header: list, trailing: bool, rows: int, info: LogInfo) -> Iterator[dict]:
    """The rows after the header (line ``after``), in blocks of ``rows``."""
    with open(path, encoding="utf-8-sig") as f:
        lines = itertools.islice(enumerate(f, 1), after, None)
        numbers, body = [], []
        try:
            for k, line in lines:
                if line.strip() and not line.lstrip().startswith("#"):
                    if len(body) == rows:  # a block, not the file's last line: it is read first
                        yield _csv_block(path, body, numbers, header)
                        numbers, body = [], []
                    numbers.append(k)
                    body.append(line.rstrip().removesuffix(",") if trailing else line.rstrip("\r\n"))
        except UnicodeDecodeError as err:
            raise LogError(f"{path}: not a text CSV file ({err.reason} after line {numbers[-1] if numbers else 1})") from None
        if body and numbers[-1] == k and not line.endswith("\n") and body[-1].count(",") < len(header) - 1:
            info.cut_line = numbers.pop()
            body.pop()
        if body:
            yield _csv_block(path, body, numbers, header)


def _csv_block(path: Path, body: list, numbers: list, header: list) -> dict:
    """Lines of numbers (their line numbers ``numbers``) as columns by name."""
    table = "\n".join(body)
    # an empty field (how pandas writes a NaN) is a NaN: its row is skipped and counted
    if any(mark in table for mark in (",,", ", ,", "\n,", ",\n")) or table.startswith(",") or table.endswith(","):
        table = re.sub(r"(?m)(^|,)[ \t]*(?=,|$)", r"\1nan", table)  # only then: it costs what parsing does
    if "#" in table:  # old Microsoft C runtimes' NaN and infinity: -1.#IND, 1.#QNAN, 1.#INF
        table = re.sub(r"([-+]?)1\.#INF\w*", r"\1inf", re.sub(r"[-+]?1\.#(IND|QNAN|SNAN)\w*", "nan", table))
    try:
        data = np.loadtxt(io.StringIO(table), delimiter=",", ndmin=2, dtype=np.float64, comments=None)
    except ValueError as err:
        raise LogError(f"{path}: not a numeric CSV table: {_csv_error(str(err).splitlines()[0], numbers, header)}") from None
    if data.shape[1] != len(header):
        raise LogError(f"{path}: the header has {len(header)} columns, the rows have {data.shape[1]}")
    return {name: data[:, k] for k, name in enumerate(header)}


def _csv_error(message: str, numbers: list, header: list) -> str:
    """NumPy's reading error with the file's line (``numbers``: the rows' lines, 1-based) and the
    column's name in place of its row among the rows (0-based for a value, 1-based for a row's
    length)."""
    value = re.match(r"could not convert string (.*) to float64 at row (\d+), column (\d+)", message)
    if value and int(value.group(2)) < len(numbers) and int(value.group(3)) <= len(header):
        name = header[int(value.group(3)) - 1]
        return f"{value.group(1)} is not a number (line {numbers[int(value.group(2))]}, column {name!r})"
    fields = re.match(r"the number of columns changed from (\d+) to (\d+) at row (\d+)", message)
    if fields and 0 < int(fields.group(3)) <= len(numbers):
        return f"line {numbers[int(fields.group(3)) - 1]} has {fields.group(2)} fields, the lines before {fields.group(1)}"
    return message


def _read_npz(path: Path, n: int) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {k: np.asarray(data[k]) for k in data.files}
    except (OSError, ValueError, EOFError) as err:
        raise LogError(f"{path}: not a readable NPZ file: {err}") from None
    columns = {}
    for key, a in arrays.items():
        if key not in QUANTITIES and key != "t" and not (_NAMED.match(key) or _INDEXED.match(key)):
            continue  # not a column of the log (the joints' names, a rate, gains), as a CSV's other columns
        if not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
            raise LogError(f"{path}: array {key!r} is not real numbers ({a.dtype})")
        if key in QUANTITIES:
            if a.ndim != 2 or a.shape[1] != n:
                raise LogError(f"{path}: array {key!r} has shape {a.shape}, expected (T, {n}) for the robot's {n} joints")
            for j in range(n):
                name = f"{key}{j}"
                if name in arrays:
                    raise LogError(f"{path}: joint {j}'s {key} is logged twice (arrays {key!r} and {name!r})")
                columns[name] = a[:, j]
        elif a.ndim == 1:
            columns[key] = a
        else:
            raise LogError(f"{path}: array {key!r} has shape {a.shape}; expected a column (T,) or one of q, qd, qdd, tau (T, n)")
    if not arrays:
        raise LogError(f"{path}: the NPZ file holds no arrays")
    return columns


def _match(path, columns, joint_names, locked, info: LogInfo) -> dict[str, list[str] | None]:
    """The names of each quantity's columns (``columns``: the log's) in the model's joint order
    (``None`` when absent); named columns of no joint of the robot (``q_des_joint1``, a
    gripper's) are ignored, and listed in ``info.ignored``."""
    n = len(joint_names)
    index = {name: j for j, name in enumerate(joint_names)}
    ignored = []
    for key in columns:
        named, indexed = _NAMED.match(key), _INDEXED.match(key)
        if named and named.group(2) not in index and named.group(2) not in locked and not indexed:
            ignored.append(key)
        if indexed and not named and int(indexed.group(2)) >= n:
            raise LogError(f"{path}: column {key!r} is beyond the robot's {n} joints (indices 0..{n - 1})")
    info.ignored = tuple(ignored)
    hint = f" (columns naming no joint of the robot, ignored: {', '.join(ignored[:4])}{'...' if len(ignored) > 4 else ''})" \
        if ignored else ""
    found = {}
    for qty in QUANTITIES:
        cols, missing = [], []
        for j, name in enumerate(joint_names):
            keys = [key for key in (f"{qty}_{name}", f"{qty}{j}") if key in columns]
            if len(keys) > 1:
                raise LogError(f"{path}: joint {name!r}'s {qty} is logged twice (columns {' and '.join(keys)})")
            if keys:
                cols.append(keys[0])
            else:
                missing.append(name)
        if cols and missing:
            raise LogError(
                f"{path}: {qty} is logged for some joints but not for {', '.join(missing)} (expected columns "
                f"{qty}_<joint> or {qty}0..{qty}{n - 1}); to replay without a joint, lock it: --lock {missing[0]}=VALUE"
                + hint)
        found[qty] = cols or None
    for qty in ("q", "tau"):
        if found[qty] is None:
            raise LogError(
                f"{path}: no {qty} columns for the robot's joints; expected {qty}_{joint_names[0]} ... "
                f"or {qty}0..{qty}{n - 1} (joints: {', '.join(joint_names)})" + hint)
    return found


def _table_chunks(blocks, found: dict, locked, unit: float, info: LogInfo) -> Iterator[dict]:
    """A table's blocks of columns as chunks of (m, n) quantities in the model's joint order and
    stamps in s; the locked joints' logged positions noted in ``info``."""
    for block in blocks:
        for name in locked:
            if f"q_{name}" in block:
                _held(info, name, block[f"q_{name}"])
        chunk = {qty: np.stack([block[k] for k in keys], axis=1) for qty, keys in found.items() if keys}
        if "t" in block:
            chunk["t"] = np.asarray(block["t"], np.float64) * unit
        yield chunk


def _held(info: LogInfo, joint: str, positions) -> None:
    """Widen the range of positions the log has for a locked joint by these (m,)."""
    at = np.asarray(positions, np.float64)
    at = at[np.isfinite(at)]
    if len(at):
        low, high = info.locked_range.get(joint, (math.inf, -math.inf))
        info.locked_range[joint] = (min(low, float(at.min())), max(high, float(at.max())))


# ----------------------------------------------------------------------------- ROS bags


JOINT_STATE = "sensor_msgs/msg/JointState"


@dataclass(frozen=True)
class _JointStateLayout:
    """Where a CDR-encoded (little-endian) JointState keeps its fields, read from one message and
    valid for every message with the same length and the same bytes but for the stamp and the
    values: a robot's publisher sends the same names, in the same order, every time. Decoding
    by these offsets is a few NumPy views, much cheaper than a general decoder; any other
    message is left to the general decoder (:meth:`decode` gives ``None``)."""

    size: int
    fixed: bytes  # from the frame id to the positions' values: frame id, names, position count
    counts: tuple  # (offset, bytes) of the velocity and effort counts
    arrays: tuple  # (offset, count) of the position, velocity and effort values
    names: tuple

    @classmethod
    def of(cls, raw: bytes, fields) -> _JointStateLayout | None:
        """The layout of ``raw``, if decoding it by its offsets gives ``fields`` exactly."""
        if raw[:2] != b"\x00\x01" or len(raw) < 16:  # CDR, little-endian
            return None
        u32 = lambda at: int.from_bytes(raw[at : at + 4], "little")  # noqa: E731
        align = lambda at, a: 4 + -(-(at - 4) // a) * a  # noqa: E731  (from the payload's start)
        try:
            at = 16 + u32(12)  # after the stamp and the frame id
            at = align(at, 4)
            names, at = [None] * u32(at), at + 4
            for i in range(len(names)):
                at = align(at, 4)
                length = u32(at)
                names[i] = raw[at + 4 : at + 3 + length].decode()
                at += 4 + length
            counts, arrays = [], []
            for _ in range(3):
                at = align(at, 4)
                count = u32(at)
                counts.append((at, raw[at : at + 4]))
                at = align(at + 4, 8) if count else at + 4
                arrays.append((at, count))
                at += 8 * count
        except (UnicodeDecodeError, ValueError):
            return None
        if at > len(raw) or len(raw) - at >= 8:
            return None
        layout = cls(len(raw), raw[12 : arrays[0][0]], tuple(counts[1:]), tuple(arrays), tuple(names))
        same = layout.decode([raw])
        if same is None or same[0] != tuple(fields[0]) or same[1][0] != fields[1] or not all(
                np.array_equal(a[0], b) for a, b in zip(same[2:], fields[2:])):
            return None
        return layout

    def decode(self, raws) -> tuple | None:
        """``(names, stamps s (m,), positions (m, k), velocities, efforts)`` of ``m`` messages of
        this layout (``raws``, each ``size`` bytes), decoded together, else ``None``."""
        if any(len(raw) != self.size for raw in raws):
            return None
        data = np.frombuffer(b"".join(raws), np.uint8).reshape(len(raws), self.size)
        if not np.all(data[:, 12 : 12 + len(self.fixed)] == np.frombuffer(self.fixed, np.uint8)) or not all(
                np.all(data[:, at : at + 4] == np.frombuffer(count, np.uint8)) for at, count in self.counts):
            return None
        sec, nanosec = data[:, 4:8].copy().view("<i4")[:, 0], data[:, 8:12].copy().view("<u4")[:, 0]
        values = (data[:, at : at + 8 * count].copy().view("<f8") for at, count in self.arrays)
        return (self.names, sec + 1e-9 * nanosec, *values)


def _nonempty(chunk: dict) -> Iterator[dict]:
    if len(chunk["t"]):
        yield chunk


def _bag_chunks(path: Path, joint_names, topic: str, locked, size: int, info: LogInfo) -> Iterator[dict]:
    """JointState messages of a bag as chunks of rows (``t``, ``q``, ``qd``, ``tau``)."""
    try:
        from rosbags.highlevel import AnyReader
    except ImportError:  # pragma: no cover - rosbags is a dependency
        raise LogError("reading ROS bags needs the rosbags package (pip install rosbags)") from None
    n = len(joint_names)
    try:
        reader = AnyReader([path])
        reader.open()
    except Exception as err:  # rosbags raises its own error types for damaged bags
        raise LogError(f"{path}: not a readable ROS bag: {err}") from None
    try:
        connections = [c for c in reader.connections if c.topic == topic]
        if not connections:
            topics = sorted({f"{c.topic} ({c.msgtype})" for c in reader.connections})
            raise LogError(f"{path}: no topic {topic!r} (topics: {', '.join(topics) or 'none'}); choose one with --topic")
        kinds = {c.msgtype for c in connections}
        if kinds != {JOINT_STATE}:
            raise LogError(f"{path}: topic {topic!r} carries {', '.join(sorted(kinds))}, not {JOINT_STATE}")
        info.expected = sum(c.msgcount for c in connections)
        buffers = {"t": np.empty(size), "received": np.empty(size), "q": np.empty((size, n)), "qd": np.empty((size, n)),
                   "tau": np.empty((size, n))}
        velocity, fill, order_cache = None, 0, {}

        def rows(count: int) -> dict:
            """The buffered rows, on the bag's one clock: the headers', chosen on the first
            chunk if any of its headers is set, else the bag's receive times. On the headers'
            clock a zero stamp is a message sent before the clock ran (simulated time before
            its first tick, repeated), dropped, but for a single one a period or so before the
            first stamp (the clock's time 0)."""
            keep = slice(count)
            if info.clock is None:
                info.clock = "header" if np.any(buffers["t"][:count] > 0) else "receive"
                if info.clock == "header":
                    keep = buffers["t"][:count] > 0
                    keep[0] |= (np.argmax(keep) == 1) & (buffers["t"][1] <= MAX_PERIOD)
            elif info.clock == "header":
                keep = buffers["t"][:count] > 0
            if info.clock == "header":
                info.unstamped += int(count - keep.sum())
            out = {key: value[:count][keep].copy() for key, value in buffers.items()
                   if key not in ("t", "received") and (key != "qd" or velocity)}
            return {"t": (buffers["t"] if info.clock == "header" else buffers["received"])[:count][keep].copy(), **out}

        def order_of(k: int, names: tuple):
            """Where the model's joints are among ``names`` (empty: another publisher's message),
            and the locked joints'; ``k`` the message's index, for errors."""
            if names in order_cache:
                return order_cache[names]
            where = {name: i for i, name in enumerate(names)}
            held = [(name, where[name]) for name in locked if name in where]
            if len(where) < len(names):
                twice = sorted({name for name in names if names.count(name) > 1})
                raise LogError(f"{path}: message {k} on {topic} names {', '.join(twice)} more than once")
            missing = [j for j in joint_names if j not in where]
            if len(missing) == n:
                order = ()
            elif missing:
                # the robot's joints split over publishers (an arm's and a gripper's): lock the fewer
                present = [j for j in joint_names if j in where]
                lock = present if len(present) < len(missing) else missing
                raise LogError(f"{path}: message {k} on {topic} has {', '.join(present)} but no {', '.join(missing)}; "
                               f"to replay without a joint, lock it: " + " ".join(f"--lock {j}=VALUE" for j in lock))
            else:
                order = np.array([where[j] for j in joint_names])
            order_cache[names] = order, held
            return order, held

        def put(k: int, received, fields) -> Iterator[dict]:
            """Messages ``k, k + 1, ...`` with the same names, decoded (``fields``: names, then
            arrays with a leading axis of messages), into the buffers; full chunks out."""
            nonlocal fill, velocity
            names, header, position, speed, effort = fields
            order, held = order_of(k, names)
            for name, i in held:  # where the locked joints were (any publisher's message)
                if i < position.shape[1]:
                    _held(info, name, position[:, i])
            if len(order) == 0:  # another publisher's joints (a gripper)
                info.other += len(header)
                return
            if position.shape[1] != len(names) or effort.shape[1] not in (0, len(names)):
                raise LogError(f"{path}: message {k} on {topic} has {len(names)} names but {position.shape[1]} positions "
                               f"and {effort.shape[1]} efforts")
            has = speed.shape[1] == len(names)
            if velocity is None:
                velocity = has
            done = 0
            while done < len(header):
                take = min(len(header) - done, size - fill)
                rows_in, rows_out = slice(done, done + take), slice(fill, fill + take)
                buffers["t"][rows_out], buffers["received"][rows_out] = header[rows_in], 1e-9 * received[rows_in]
                buffers["q"][rows_out] = position[rows_in][:, order]
                # a message without efforts (or, when the first had them, velocities) is a row
                # without them: skipped and counted as a row with a NaN
                buffers["tau"][rows_out] = effort[rows_in][:, order] if effort.shape[1] else np.nan
                if velocity:
                    buffers["qd"][rows_out] = speed[rows_in][:, order] if has else np.nan
                done, fill = done + take, fill + take
                if fill == size:
                    yield from _nonempty(rows(fill))
                    fill = 0

        def decoded(k: int, connection, raw) -> tuple:
            """One message by rosbags' general decoder, as a batch of one; its layout kept."""
            try:
                msg = reader.deserialize(raw, connection.msgtype)
            except Exception as err:
                raise LogError(f"{path}: message {k} on {topic} cannot be decoded: {err}") from None
            fields = (tuple(msg.name), msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec,
                      *(np.asarray(getattr(msg, key), np.float64) for key in ("position", "velocity", "effort")))
            layout = _JointStateLayout.of(bytes(raw), fields) if reader.is2 else None  # ROS 2: CDR
            if layout is not None:
                layouts[layout.size] = layout
            return fields[0], np.array([fields[1]]), *(x[None] for x in fields[2:])

        def flush() -> Iterator[dict]:
            """The pending messages, decoded together by their layout (one by one if some differ)."""
            if not pending:
                return
            messages = list(pending)
            pending.clear()
            layout = layouts[len(messages[0][3])]
            fields = layout.decode([raw for _, _, _, raw in messages])
            if fields is not None:
                yield from put(messages[0][0], np.array([stamp for _, _, stamp, _ in messages]), fields)
                return
            for k, connection, stamp, raw in messages:
                one = layouts[len(raw)].decode([raw])
                yield from put(k, np.array([stamp]), decoded(k, connection, raw) if one is None else one)

        # messages are decoded in batches of one byte layout (a publisher sends the same names,
        # in the same order, every time): the first of each size by rosbags, the rest by its layout
        layouts, pending = {}, []  # the layouts by message size; consecutive messages of one size
        for k, (connection, stamp, raw) in enumerate(reader.messages(connections=connections)):
            if pending and len(raw) != len(pending[0][3]):
                yield from flush()
            if len(raw) in layouts:
                pending.append((k, connection, stamp, raw))
                if len(pending) == size:
                    yield from flush()
            else:
                yield from put(k, np.array([stamp]), decoded(k, connection, raw))
        yield from flush()
        if fill:
            yield from _nonempty(rows(fill))
    finally:
        reader.close()


# ----------------------------------------------------------------------------- the stream


def _torque_scale(scale, n: int, source) -> np.ndarray | None:
    if scale is None:
        return None
    scale = np.asarray(scale, np.float64).reshape(-1)
    if scale.size == 1:
        scale = np.full(n, scale[0])
    if scale.shape != (n,) or not np.all(np.isfinite(scale)) or np.any(scale == 0):
        raise LogError(f"{source}: the torque scale needs one finite, non-zero gain per joint ({n}), got {scale.tolist()}")
    return scale


class LogStream:
    """A log read as a stream of chunks (:func:`open_log`): iterate over it for dicts of
    ``t`` (m,) and ``q``, ``qd``, ``qdd``, ``tau`` (m, n); :attr:`info` fills in as it goes."""

    def __init__(self, chunks: Iterator[dict], info: LogInfo, *, dt, causal, cutoff, resample, torque_scale, max_gap,
                 chunk, drop_repeated=False, drop_unordered=False, angles=None):
        self.info = info
        self._raw, self._dt, self._scale, self._drop_repeated = chunks, dt, torque_scale, drop_repeated
        self._drop_unordered = drop_unordered
        self._causal, self._cutoff, self._resample, self._max_gap, self._chunk = causal, cutoff, resample, max_gap, chunk
        self._angles = np.zeros(len(info.joints), bool) if angles is None else np.asarray(angles, bool)
        self._turns = None  # (the last logged angles, or None at a segment's start; their unwrapping offsets)

    def __iter__(self) -> Iterator[dict]:
        empty = True
        for chunk in self._chunks():
            empty = False
            yield chunk
        if empty and self.info.fragments:
            raise LogError(f"{self.info.source}: every segment of the log is shorter than {derivatives.SHORTEST:g} periods of the "
                           f"differentiator's cut-off ({derivatives.SHORTEST / self.info.cutoff:.3g} s), too short to estimate "
                           f"accelerations on; the gaps between them are over {self._max_gap:.3g} s: bridge them with a longer "
                           "--max-gap (max_gap=)")

    def _chunks(self) -> Iterator[dict]:
        info = self.info
        last_t, row, diff, started = None, 0, None, False
        untimed = "t" not in info.logged and self._dt is None  # stamps are sample indices
        for raw in self._raw:
            if not started:
                self._unlogged(raw)
            raw = {k: v for k, v in raw.items() if k not in info.unestimated}
            count = len(raw["q"])
            t = raw.get("t")
            if t is None:
                t = (row + np.arange(count)) * (1.0 if untimed else self._dt)
            t = np.asarray(t, np.float64)
            read, index = count, row + np.arange(count)  # the rows' numbers in the log, for the reports
            bad_t = np.nonzero(~np.isfinite(t))[0]
            if len(bad_t):
                raise LogError(f"{info.source}: time stamp {t[bad_t[0]]} at sample {index[bad_t[0]]} is not a number")
            if self._drop_unordered:  # each stamp after every one before it: a clock stepped back waits
                keep = t > np.maximum.accumulate(np.concatenate([[-np.inf if last_t is None else last_t], t]))[:-1]
            elif self._drop_repeated:
                keep = t != np.concatenate([[np.nan if last_t is None else last_t], t[:-1]])
            if self._drop_repeated or self._drop_unordered:
                if not keep.all():
                    if info.first_repeated is None:
                        k = np.argmin(keep)
                        info.first_repeated = (int(index[k]), float(t[k]))
                    info.repeated += int(count - keep.sum())
                    raw = {k: v[keep] for k, v in raw.items()}
                    t, index, count = t[keep], index[keep], int(keep.sum())
                    if count == 0:
                        row = info.samples = row + read
                        continue
            prev = t[:-1] if last_t is None else np.concatenate([[last_t], t[:-1]])
            steps = (t[1:] if last_t is None else t) - prev
            first = 1 if last_t is None else 0  # the chunk's sample that steps[0] leads to
            back = np.nonzero(steps <= 0)[0]
            if len(back):
                k = back[0]
                what, hint = ("goes back to", " (--drop-unordered, or drop_unordered=True, drops the samples until it "
                                             "passes its last stamp)") if steps[k] < 0 else (
                    "repeats", " (--drop-repeated, or drop_repeated=True, drops the samples that repeat a stamp)")
                raise LogError(f"{info.source}: the clock {what} {t[k + first]:.6f} s at sample {index[k + first]} "
                               f"(the sample before: {prev[k]:.6f} s); stamps must increase{hint}")
            if not started:
                started = True
                if not untimed:
                    self._start(steps, t)
                    diff = self._differentiator()
                    if self._max_gap is None:  # by default, a gap short against the cut-off's period too
                        self._max_gap = max(BRIDGE * info.period, BRIDGE_CUTOFF / info.cutoff if diff else 0.0)
            rows = {"t": t, **{k: raw[k] for k in QUANTITIES if k in raw}}
            if self._scale is not None:
                rows["tau"] = rows["tau"] * self._scale
            finite = np.all(np.isfinite(np.concatenate([rows[k].reshape(count, -1) for k in QUANTITIES if k in rows], 1)), 1)
            info.skipped += int(count - finite.sum())
            # gaps, on the stamps of every row (a skipped row leaves a gap of its own)
            cuts = []
            for k in np.nonzero(steps > GAP * info.period)[0] if not untimed else ():
                bridged = steps[k] <= self._max_gap
                info.gaps.append(Gap(int(index[k + first]), float(t[k + first]), float(steps[k]), bool(bridged)))
                if not bridged:
                    cuts.append(k + first)
            last_t, row = t[-1], row + read
            info.samples = row
            start = 0
            for cut in [*cuts, count]:
                piece = {k: v[start:cut][finite[start:cut]] for k, v in rows.items()}
                if len(piece["t"]):
                    piece["q"] = self._unwrap(piece["q"])
                    yield from (c for c in (diff.push(piece) if diff else [piece]))
                if cut < count:
                    info.segments += 1
                    if self._turns:  # no unwrapping across a split
                        self._turns = (None, self._turns[1])
                    if diff:
                        yield from diff.flush()
                        info.fragments = diff.dropped
                start = cut
        if not started:
            raise LogError(f"{info.source}: the log has no samples")
        if diff:
            yield from diff.flush(keep_short=info.segments == 1)  # a short log is all there is
            info.fragments = diff.dropped

    def _unwrap(self, q):
        """The positions (m, n) of consecutive rows of a segment, each angle's steps of more
        than pi taken as a wrap of the logged angle, not as motion (counted in ``info``)."""
        if not self._angles.any():
            return q
        x = q[:, self._angles]
        last, offset = (None, np.zeros(x.shape[1])) if self._turns is None else self._turns
        steps = np.diff(np.concatenate([x[:1] if last is None else last[None], x]), axis=0)
        turns = np.round(steps / (2 * np.pi))  # non-zero only for a step over pi
        offsets = offset - 2 * np.pi * np.cumsum(turns, axis=0)
        self._turns = (x[-1], offsets[-1])
        for joint, count in zip(np.array(self.info.joints)[self._angles], np.count_nonzero(turns, axis=0)):
            if count:
                self.info.wrapped[joint] = self.info.wrapped.get(joint, 0) + int(count)
        q = q.copy()
        q[:, self._angles] = x + offsets
        return q

    def _unlogged(self, raw: dict) -> None:
        """Check the first chunk: a logged derivative that is not a number for a joint in every
        row (ros2_control's NaN for an interface the joint lacks) is estimated instead; a
        position or torque never a number is an error naming the joint."""
        info = self.info
        for key in ("q", "qd", "qdd", "tau"):
            if key not in raw or not len(raw[key]):
                continue
            never = ~np.any(np.isfinite(np.asarray(raw[key], np.float64)), axis=0)
            if not never.any():
                continue
            joints = [j for j, bad in zip(info.joints, never) if bad]
            if key in ("qd", "qdd"):
                if "t" not in info.logged and self._dt is None:
                    raise LogError(f"{info.source}: the {key} of {', '.join(joints)} are not numbers; estimating them "
                                   "needs the sampling period: give it (--dt)")
                info.unestimated += (key,)
                info.logged.discard(key)
                continue
            what = "positions" if key == "q" else "torques"
            raise LogError(f"{info.source}: the {what} of {', '.join(joints)} are not numbers in any of the first "
                           f"{len(raw[key])} samples: a joint that does not move can be locked, --lock {joints[0]}=VALUE")

    def _start(self, steps, t):
        """The period, from the first chunk's steps (or ``dt``)."""
        info = self.info
        if self._dt is not None:
            period = self._dt
            if "t" in info.logged and len(steps) and abs(np.median(steps) - period) > 0.05 * period:
                raise LogError(f"{info.source}: the given sampling period {period:g} s disagrees with the log's "
                               f"'t' column (median step {np.median(steps):.6g} s)")
        elif len(steps):
            median = float(np.median(steps))
            # arrivals in bursts: steps over GAP medians are frequent and hold nearly all the time
            # (a recording paused once or twice is a few long steps, however long)
            gaps = steps > GAP * median
            if np.mean(gaps) >= BURST_GAPS and np.sum(steps[~gaps]) < BURSTS * np.sum(steps):
                raise LogError(f"{info.source}: the stamps come in bursts (median step {median:.3g} s, mean "
                               f"{float(np.mean(steps)):.3g} s): they are not the samples' times"
                               + (" (the bag's receive times: its messages' headers are zero)" if info.clock == "receive" else ""))
            # the mean step without the gaps: the median of a jittered clock's steps is off by
            # a percent or so, the mean is not
            period = float(np.mean(steps[~gaps]))
            if period > MAX_PERIOD:
                raise LogError(f"{info.source}: the stamps step by {period:.6g} s ({1 / period:.3g} Hz), too slow for a "
                               f"robot's log: are they in seconds? Stamps in ms, us or ns: --time-unit (time_unit=)")
        else:
            raise LogError(f"{info.source}: one sample: no sampling period to estimate derivatives with")
        info.period = period
        if self._max_gap is not None and not (self._max_gap > 0):
            raise LogError(f"{info.source}: max_gap must be a positive number of seconds, got {self._max_gap}")

    def _differentiator(self):
        info = self.info
        missing = [k for k in ("qd", "qdd") if k not in info.logged]
        if not missing and not self._resample:
            return None
        rate = 1.0 / info.period
        info.estimated = tuple(missing)
        info.cutoff = self._cutoff or derivatives.default_cutoff(rate)
        info.derivative = "causal" if self._causal else "zero-phase"
        info.resample = self._resample
        if not (info.cutoff > 0 and math.isfinite(info.cutoff)):
            raise LogError(f"the differentiator's cut-off must be a positive number of Hz, got {info.cutoff}")
        try:
            return derivatives.Differentiator(info.cutoff, rate, causal=self._causal, resample=self._resample, chunk=self._chunk)
        except ValueError as err:
            raise LogError(str(err)) from None


def open_log(path: str | os.PathLike, joint_names, *, locked=(), topic: str | None = None, dt: float | None = None,
             causal: bool = False, cutoff: float | None = None, resample: float | None = None, torque_scale=None,
             max_gap: float | None = None, drop_repeated: bool = False, drop_unordered: bool = False, time_unit: str = "s",
             chunk: int = 20000, angles=()) -> LogStream:
    """Open a log for a robot with joints ``joint_names``: a stream of matched chunks.

    Args:
        path: a ``.csv``, ``.npz``, or a ROS bag (``.mcap``, ``.db3``, a bag folder, ``.bag``).
        joint_names: the model's joints, in its order.
        locked: joints of the URDF locked in the model: their columns are ignored.
        topic: the bag's JointState topic (default ``/joint_states``).
        dt: the sampling period, s, for a log without a ``t`` column.
        causal: estimate derivatives causally (what a controller can run live) instead of
            zero-phase.
        cutoff: the differentiator's low-pass cut-off, Hz (default from the rate,
            :func:`dense_armor.derivatives.default_cutoff`).
        resample: resample the log on a uniform grid at this rate, Hz.
        torque_scale: a gain per joint (or one for all) multiplying the logged effort: for a
            log of motor currents, the torque constants (sign included).
        max_gap: the longest gap bridged, s (default :data:`BRIDGE` median periods, or
            :data:`BRIDGE_CUTOFF` periods of the cut-off if longer, when derivatives are
            estimated).
        drop_repeated: drop a sample whose stamp repeats the one before (else an error).
        drop_unordered: drop a sample whose stamp is not after every one before it (a repeat,
            two messages swapped, a clock stepped back; else an error), counted as repeated.
        time_unit: the unit of a CSV or NPZ log's ``t`` column (:data:`TIME_UNITS`: ``"s"``,
            ``"ms"``, ``"us"``, ``"ns"``); a bag's stamps are seconds.
        chunk: rows per chunk.
        angles: the joints whose positions are angles (revolute and continuous joints): a
            step of more than pi between two samples is the logged angle wrapping (a driver's
            (-pi, pi] or [0, 2 pi)), unwrapped before the derivatives and counted
            (``info.wrapped``).

    Raises:
        FileNotFoundError: no such file.
        LogError: the log does not match the robot, is not numeric, or its clock is broken.
    """
    path = Path(path)
    joint_names = tuple(joint_names)
    n = len(joint_names)
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such log file")
    for name, value in (("dt", dt), ("cutoff", cutoff), ("resample", resample)):
        if value is not None and not (value > 0 and math.isfinite(value)):
            raise LogError(f"{name} must be a positive number, got {value}")
    if time_unit not in TIME_UNITS:
        raise LogError(f"time unit {time_unit!r}: choose one of {', '.join(TIME_UNITS)}")
    scale = _torque_scale(torque_scale, n, path)
    unknown = sorted(set(angles) - set(joint_names))
    if unknown:
        raise LogError(f"angles: {', '.join(unknown)} not among the joints ({', '.join(joint_names)})")
    info = LogInfo(source=str(path), joints=joint_names, logged=set())
    bag = path.is_dir() or path.suffix.lower() in BAG_SUFFIXES
    if bag and time_unit != "s":
        raise LogError(f"{path}: a ROS bag's stamps are seconds; --time-unit is for CSV and NPZ logs")
    if bag:
        chunks = _bag_chunks(path, joint_names, topic or DEFAULT_TOPIC, locked, chunk, info)
        first = next(chunks, None)
        if first is None:
            raise LogError(f"{path}: no JointState message with the robot's joints on {topic or DEFAULT_TOPIC}")
        info.logged = set(first) | {"t"}
        chunks = itertools.chain([first], chunks)
    else:
        if topic is not None:
            raise LogError(f"{path}: --topic is for ROS bags; this log is a {path.suffix or 'file'}")
        if path.suffix.lower() == ".npz":
            columns = _read_npz(path, n)
            found = _match(path, columns, joint_names, set(locked), info)
            used = [k for keys in found.values() for k in keys or ()] + [k for k in ("t", *(f"q_{j}" for j in locked)) if k in columns]
            lengths = {len(columns[k]) for k in used}
            if len(lengths) > 1:
                raise LogError(f"{path}: columns have different lengths: {sorted(lengths)}")
            info.expected = lengths.pop()
            names, blocks = list(columns), ({k: columns[k][s : s + chunk] for k in used} for s in range(0, info.expected, chunk))
        else:
            names, blocks = _read_csv(path, chunk, info)
            found = _match(path, names, joint_names, set(locked), info)
            first = next(blocks, None)
            if first is None:
                raise LogError(f"{path}: the log has a header but no samples")
            blocks = itertools.chain([first], blocks)
        if "t" not in names and dt is None and (not found["qd"] or not found["qdd"] or resample):
            raise LogError(f"{path}: the log has no 't' column; give the sampling period (--dt) to estimate "
                           f"{' and '.join(k for k in ('qd', 'qdd') if not found[k]) or 'the grid'}")
        info.logged = {k for k, keys in found.items() if keys} | ({"t"} & set(names))
        chunks = _table_chunks(blocks, found, locked, TIME_UNITS[time_unit], info)
    return LogStream(chunks, info, dt=dt, causal=causal, cutoff=cutoff, resample=resample, torque_scale=scale,
                     max_gap=max_gap, chunk=chunk, drop_repeated=drop_repeated, drop_unordered=drop_unordered,
                     angles=np.isin(joint_names, list(angles)))


def load_log(path: str | os.PathLike, joint_names, **options) -> Log:
    """The whole log at once: :func:`open_log` (same arguments), its chunks concatenated."""
    stream = open_log(path, joint_names, **options)
    chunks = list(stream)
    if not chunks:
        raise LogError(f"{path}: no sample with finite values")
    whole = {k: np.concatenate([c[k] for c in chunks]) for k in ("t", *QUANTITIES)}
    return Log(whole["t"], whole["q"], whole["qd"], whole["qdd"], whole["tau"], stream.info)


def write_table(path, columns: dict[str, np.ndarray], suffix: str | None = None) -> None:
    """Write named 1-D columns to ``path`` (a name, or an open binary file with the ``suffix``
    it stands for): NPZ if it ends in ``.npz`` (any case), else CSV."""
    suffix = (suffix or Path(path).suffix).lower()
    if suffix == ".npz":
        if hasattr(path, "write"):
            np.savez(path, **columns)
            return
        with open(path, "wb") as f:  # np.savez would add ".npz" to another case
            np.savez(f, **columns)
        return
    names = list(columns)
    data = np.column_stack([np.asarray(columns[k], dtype=np.float64) for k in names])
    # stamps in full (epoch seconds need 16 digits for microseconds), the rest to 9 digits
    np.savetxt(path, data, delimiter=",", header=",".join(names), comments="", fmt=["%.17g" if k == "t" else "%.9g" for k in names])


def write_bag(path: str | os.PathLike, t, joint_names, q, qd, effort, *, storage: str = "mcap",
              topic: str = DEFAULT_TOPIC) -> None:
    """Write a ROS 2 bag (a folder) of ``sensor_msgs/msg/JointState`` messages, as a robot's
    driver would record them (with ``rosbags``): one message per sample, stamped ``t`` (s).

    Args:
        path: the bag folder to create (must not exist).
        t: (T,) stamps, s. q, effort: (T, n); qd: (T, n) or ``None`` (no velocities).
        joint_names: the n names, in the columns' order.
        storage: ``"mcap"`` or ``"sqlite3"`` (``.db3``).
    """
    from rosbags.rosbag2 import StoragePlugin, Writer
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS2_HUMBLE)
    JointState = store.types["sensor_msgs/msg/JointState"]
    Header, Time = store.types["std_msgs/msg/Header"], store.types["builtin_interfaces/msg/Time"]
    plugins = {"mcap": StoragePlugin.MCAP, "sqlite3": StoragePlugin.SQLITE3}
    if storage not in plugins:
        raise ValueError(f"storage must be 'mcap' or 'sqlite3', got {storage!r}")
    rows = lambda a: np.ascontiguousarray(a, np.float64)  # noqa: E731
    q, effort = rows(q), rows(effort)
    qd = None if qd is None else rows(qd)
    with Writer(path, version=8, storage_plugin=plugins[storage]) as writer:
        connection = writer.add_connection(topic, JointState.__msgtype__, typestore=store)
        for k, stamp in enumerate(np.asarray(t, np.float64)):
            sec = int(np.floor(stamp))
            header = Header(stamp=Time(sec=sec, nanosec=min(int(round((stamp - sec) * 1e9)), 999_999_999)), frame_id="")
            msg = JointState(header=header, name=list(joint_names), position=q[k],
                             velocity=np.zeros(0) if qd is None else qd[k], effort=effort[k])
            writer.write(connection, int(round(stamp * 1e9)), store.serialize_cdr(msg, JointState.__msgtype__))
