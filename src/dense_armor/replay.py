"""Replaying a log through a learner, prequentially, however long the log.

:func:`replay_log` feeds a :class:`~dense_armor.logs.LogStream` (or any iterable of chunks
with ``t``, ``q``, ``qd``, ``qdd``, ``tau``) through a learner in blocks of ``block`` samples,
each block one ``lax.scan`` that carries the learner's state to the next (the last block is
padded with masked samples, so the scan compiles once). The result equals one scan over the
whole log. A block is started before the previous one's outputs are read and scored, so that
reading the log and writing the outputs go on while JAX computes. What it keeps is bounded,
whatever the log's length: per-second sums of squared errors (:class:`Scores`), the alarms, the
learner's ``extra`` output at each alarm and at the end, and nothing per sample unless ``sink``
asks for it.

The score of a prediction that is not finite (a diverged learner) is the URDF's: what a
controller that gates the residual would have used; such predictions are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import numpy as np

from dense_armor import learners
from dense_armor.learners import Sample

__all__ = ["Replay", "Scores", "blocks", "replay_log", "replay_trajectory"]


def _replay_block(learner, state, arrays, block: int):
    """``learners.replay`` of up to ``block`` samples (``q, qd, qdd, tau``, each (m, n)), padded
    to ``block`` with masked samples (one compiled scan for every block)."""
    count = len(arrays[0])
    piece = Sample(*(np.concatenate([a, np.zeros((block - count,) + a.shape[1:], a.dtype)]) for a in arrays))
    return learners.replay(learner, state, piece, np.arange(block) < count)


def replay_trajectory(learner, state, trajectory: Sample, block: int = 2000, progress=None):
    """A trajectory (each field (T, n)) through ``learner.step`` in blocks of one ``lax.scan``.

    Returns:
        The final state and the per-sample outputs as NumPy arrays (leading axis T).
    """
    arrays = [np.asarray(a) for a in trajectory]
    T = arrays[0].shape[0]
    block = max(1, min(int(block), T))
    outputs = []
    for start in range(0, T, block):
        stop = min(start + block, T)
        state, out = _replay_block(learner, state, [a[start:stop] for a in arrays], block)
        outputs.append(jax.tree.map(lambda x: np.asarray(x)[: stop - start], out))
        if progress is not None:
            progress(stop - start)
    return state, jax.tree.map(lambda *xs: np.concatenate(xs), *outputs)


@dataclass
class Scores:
    """Squared prediction errors summed per window of the log (bins of one second, by default,
    from its first stamp), per joint: the URDF's (``nominal``) and the learner's (``learner``),
    and the samples in each bin (``count``), for the windows that have samples (``windows``,
    increasing: a gap of days costs nothing). Enough for any RMSE over whole windows; the
    methods take times in windows."""

    windows: list = field(default_factory=list)
    nominal: list = field(default_factory=list)
    learner: list = field(default_factory=list)
    count: list = field(default_factory=list)

    def add(self, bins, nominal_sq, learner_sq):
        """Add samples: their bins (m,) (from the last one added on) and squared errors (m, n)."""
        for b in np.unique(bins):
            b = int(b)
            if not self.windows or self.windows[-1] != b:
                self.windows.append(b)
                self.count.append(0)
                self.nominal.append(np.zeros(nominal_sq.shape[1]))
                self.learner.append(np.zeros(nominal_sq.shape[1]))
            pick = bins == b
            self.count[-1] += int(pick.sum())
            self.nominal[-1] += nominal_sq[pick].sum(0)
            self.learner[-1] += learner_sq[pick].sum(0)

    def rmse(self, start: float = 0.0, stop: float = np.inf, joint: int | None = None) -> tuple[float, float]:
        """(URDF, learner) RMSE, N m, over the windows in ``[floor(start), ceil(stop))`` (of the
        log's time from its first stamp), over every joint or one."""
        a, b = np.searchsorted(self.windows, [np.floor(start), np.ceil(stop)])
        count = sum(self.count[a:b])
        if count == 0:
            return float("nan"), float("nan")
        pick = slice(None) if joint is None else slice(joint, joint + 1)
        width = len(self.nominal[0][pick])
        nominal = sum(x[pick].sum() for x in self.nominal[a:b]) / (count * width)
        learner = sum(x[pick].sum() for x in self.learner[a:b]) / (count * width)
        return float(np.sqrt(nominal)), float(np.sqrt(learner))

    def harmful(self, margin: float = 0.1) -> list[int]:
        """The windows in which the learner's RMSE exceeds the URDF's by more than ``margin``."""
        return [w for w, n, l in zip(self.windows, self.nominal, self.learner) if np.sum(l) > (1 + margin) ** 2 * np.sum(n)]


@dataclass
class Replay:
    """What :func:`replay_log` found.

    Attributes:
        state: the learner's final state.
        scores: per-second squared errors (:class:`Scores`).
        samples, rejected, nonfinite: samples replayed, skipped by the learner (non-finite
            input), and predictions that were not finite (scored as the URDF's).
        start: the first stamp, s; duration: the last minus the first, s.
        alarms: stamps of the alarms, s.
        at_alarms: the learner's ``extra`` output (NumPy) just before each alarm (the end of
            the segment the alarm closes), and ``last``: at the end of the log.
    """

    state: object
    scores: Scores
    samples: int = 0
    rejected: int = 0
    nonfinite: int = 0
    start: float = 0.0
    duration: float = 0.0
    alarms: list = field(default_factory=list)
    at_alarms: list = field(default_factory=list)
    last: object = None


def replay_log(learner, state, chunks, *, block: int = 2000, progress=None, sink=None, window: float = 1.0) -> Replay:
    """Replay a log's chunks through ``learner`` (see the module docstring).

    Args:
        learner: a learner (``step(state, Sample) -> (state, StepOutput)``).
        state: its initial state.
        chunks: an iterable of dicts with ``t`` (m,) and ``q``, ``qd``, ``qdd``, ``tau`` (m, n).
        block: samples per ``lax.scan``.
        progress: ``None`` or a callable given the number of samples each block replayed.
        sink: ``None`` or a callable given each block's ``(t, tau, StepOutput)`` (NumPy).
        window: the width of the score bins, in the units of ``t`` (1 s; for a log without
            stamps, whose ``t`` is the sample index, a number of samples).
    """
    result = Replay(state, Scores())
    previous = [None]  # the extra output of the last sample replayed

    def dispatch(rows: dict):
        """Start a block's scan; JAX returns at once and computes while the next block is read."""
        result.state, out = _replay_block(learner, result.state, [rows[k] for k in Sample._fields], block)
        return rows, out

    def collect(rows: dict, out):
        count = len(rows["t"])
        out = jax.tree.map(lambda x: np.asarray(x)[:count], out)
        t, tau = rows["t"], rows["tau"]
        if result.samples == 0:
            result.start = float(t[0])
        result.samples += count
        result.duration = float(t[-1]) - result.start
        result.rejected += int(count - out.accepted.sum())
        good = out.accepted
        prediction = out.prediction
        bad = ~np.all(np.isfinite(prediction), axis=1) & good
        result.nonfinite += int(bad.sum())
        prediction = np.where(bad[:, None], out.nominal, prediction)
        bins = np.floor((t[good] - result.start) / window).astype(int)
        result.scores.add(bins, (tau - out.nominal)[good] ** 2, (tau - prediction)[good] ** 2)
        for k in np.nonzero(out.alarm)[0]:
            result.alarms.append(float(t[k]))
            before = previous[0] if k == 0 else (None if out.extra is None else jax.tree.map(lambda x: x[k - 1], out.extra))
            result.at_alarms.append(before)
        if out.extra is not None:
            previous[0] = jax.tree.map(lambda x: x[-1], out.extra)
            result.last = previous[0]
        if sink is not None:
            sink(t, tau, out._replace(prediction=prediction))
        if progress is not None:
            progress(count)

    running = None  # the block being computed
    for rows in blocks(chunks, block):
        started = dispatch(rows)
        if running is not None:
            collect(*running)
        running = started
    if running is not None:
        collect(*running)
    return result


def blocks(chunks, block: int):
    """The chunks' rows regrouped in blocks of ``block`` (the last one shorter)."""
    buffer: list[dict] = []
    buffered = 0
    keys = ("t", "q", "qd", "qdd", "tau")
    for chunk in chunks:
        buffer.append(chunk)
        buffered += len(chunk["t"])
        while buffered >= block:
            rows = {k: np.concatenate([c[k] for c in buffer]) for k in keys}
            yield {k: v[:block] for k, v in rows.items()}
            rest = {k: v[block:] for k, v in rows.items()}
            buffer, buffered = ([rest] if len(rest["t"]) else []), len(rest["t"])
    if buffered:
        yield {k: np.concatenate([c[k] for c in buffer]) for k in keys}
