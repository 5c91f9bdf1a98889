"""Velocities and accelerations from logged positions, on the log's own time stamps.

Real logs carry encoder positions, often velocities, almost never accelerations, on a host
clock whose steps jitter. Two estimators, both on irregular stamps, both from ``scipy.signal``:

* **zero-phase** (offline, the default for a replay): the positions (or the logged velocities)
  are interpolated onto a uniform grid at the median period (a cubic spline through the
  samples), low-pass filtered forward and backward (``sosfiltfilt``, a Butterworth of order
  :data:`ORDER`: no phase lag), and differentiated through a cubic spline of the filtered grid,
  evaluated back at the original stamps.
* **causal** (what a controller can run live): backward differences on the stamps, then a
  causal Butterworth low-pass of order :data:`CAUSAL_ORDER` (``sosfilt``) applied sample by
  sample: it lags the true derivative by about ``1 / (2 pi cutoff)`` seconds per stage.

The cut-off follows the sampling rate, :func:`default_cutoff`: ``min(20 Hz, rate / 5)``, so
logs at 100 Hz and faster are filtered at 20 Hz (an arm's joint motion is well below it; the
noise of differentiating encoder steps twice is well above it at 1 kHz). :class:`Differentiator`
applies either estimator to a long log chunk by chunk, with enough overlap that each sample's
estimate differs from the whole log's by much less than the estimate's own error, and restarts
at each segment boundary (a gap too long to bridge).
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import interpolate, signal

__all__ = ["CAUSAL_ORDER", "ORDER", "SHORTEST", "Differentiator", "causal", "default_cutoff", "zero_phase"]

ORDER = 4  # zero-phase Butterworth order (applied twice: forward and backward)
CAUSAL_ORDER = 2  # causal Butterworth order
MIN_CUTOFF = 1e-4  # of the rate: below, the motion is filtered out and the filter's design is singular
#: Cut-off periods: a segment shorter than this (between gaps too long to bridge) is too short for
#: the zero-phase estimator's filter to settle in; :meth:`Differentiator.flush` drops it.
SHORTEST = 3.0


def default_cutoff(rate: float) -> float:
    """The low-pass cut-off for a log sampled at ``rate`` Hz: ``min(20, rate / 5)`` Hz."""
    return min(20.0, rate / 5.0)


@functools.lru_cache(maxsize=64)
def _lowpass(cutoff: float, rate: float, order: int):
    """A Butterworth low-pass as second-order sections (shared: read, never written), or
    ``None`` when the cut-off is at or above Nyquist (nothing to filter). Designed once: a live
    loop asks for it every tick, and the design costs more than the filtering."""
    _check_cutoff(cutoff, rate)
    if cutoff >= 0.5 * rate:
        return None
    return signal.butter(order, cutoff, fs=rate, output="sos")


def _check_cutoff(cutoff: float, rate: float) -> None:
    """A :class:`ValueError` for a cut-off (Hz) no low-pass of a log at ``rate`` Hz can have."""
    if not cutoff >= MIN_CUTOFF * rate:
        raise ValueError(f"the differentiator's cut-off must be at least {MIN_CUTOFF * rate:g} Hz ({MIN_CUTOFF:g} of the "
                         f"sampling rate, {rate:g} Hz), got {cutoff:g}: a lower one filters the motion itself out")


def _extrapolate(x, count: int) -> np.ndarray:
    """``count`` samples after the end of ``x`` (T, ...) (unit spacing) that continue it to
    third order: the point reflection about the last sample, ``2 x[-1] - x[-1 - k]``, has its
    value, slope and third derivative; ``k^2 x''`` restores the curvature, which the reflection
    flips (``x''`` at the last sample, from a cubic fitted to the last ``count`` samples)."""
    count = min(count, len(x) - 1)
    tail = x[-(count + 1) :].reshape(count + 1, -1)
    k = np.arange(count + 1, dtype=np.float64)
    degree = min(3, count)
    if degree >= 2:
        c = np.polynomial.polynomial.polyfit(k, tail, degree)
        curvature = 2 * c[2] + (6 * c[3] * k[-1] if degree == 3 else 0.0)
    else:
        curvature = 0.0
    steps = np.arange(1, count + 1, dtype=np.float64)[:, None]
    ahead = 2 * tail[-1] - tail[-1 - steps[:, 0].astype(int)] + steps**2 * curvature
    return ahead.reshape(count, *x.shape[1:])


def zero_phase(t, x, cutoff: float, derivatives: int = 2, at=None) -> list[np.ndarray]:
    """The first ``derivatives`` time derivatives of ``x`` (T, ...) at the stamps ``t`` (T,)
    (or at the times ``at``), zero-phase (see the module docstring). ``t`` strictly
    increasing, ``T >= 2``."""
    # on times from the first stamp: at epoch seconds (1.7e9 s) a float's spacing, 2.4e-7 s,
    # wobbles a 1 kHz grid by 2e-4 of its step, which the second derivative magnifies
    t = np.asarray(t, np.float64)
    origin = t[0]
    t = t - origin
    x = np.asarray(x, np.float64)
    period = float(np.median(np.diff(t)))
    count = int(np.ceil((t[-1] - t[0]) / period - 1e-9)) + 1  # the grid covers every stamp
    grid = t[0] + period * np.arange(count)
    uniform = interpolate.CubicSpline(t, x, axis=0)(grid) if len(t) > 2 else np.interp(grid, t, x) if x.ndim == 1 else \
        np.stack([np.interp(grid, t, col) for col in x.T], -1)
    sos = _lowpass(cutoff, 1.0 / period, ORDER)
    if sos is not None and count > 3 * (2 * len(sos) + 1):
        # Padded at each end by a continuation of value, slope and curvature, long enough for
        # the filter's response to die out.
        ahead = _extrapolate(uniform, int(np.ceil(3.0 / (cutoff * period))))
        behind = _extrapolate(uniform[::-1], len(ahead))[::-1]
        padded = np.concatenate([behind, uniform, ahead])
        uniform = signal.sosfiltfilt(sos, padded, axis=0, padtype=None)[len(behind) : len(behind) + count]
    at = t if at is None else np.asarray(at, np.float64) - origin
    if count < 4:  # too short for a spline: finite differences
        d = np.gradient(x, t, axis=0)
        out = [d] if derivatives == 1 else [d, np.gradient(d, t, axis=0)]
        return [np.stack([np.interp(at, t, col) for col in v.reshape(len(t), -1).T], -1).reshape(len(at), *x.shape[1:])
                for v in out]
    spline = interpolate.CubicSpline(grid, uniform, axis=0)
    return [spline(at, nu=k) for k in range(1, derivatives + 1)]


def causal(t, x, cutoff: float, state=None, rate: float | None = None):
    """The causal filtered derivative of ``x`` (T, ...) at the stamps ``t``.

    Args:
        t, x: the samples; ``t`` strictly increasing.
        cutoff: Hz.
        state: ``None`` at the start of a segment, else what the previous call returned, to
            continue a segment across chunks (of one sample each, in a live loop).
        rate: the rate the filter is designed for, Hz (default: from the median step; a
            segment that starts with a chunk of one sample needs it).

    Returns:
        ``(derivative, state)``. A segment's first sample alone has no derivative: 0 (a first
        chunk of several takes the first difference's).
    """
    t = np.asarray(t, np.float64)
    x = np.asarray(x, np.float64)
    if state is None:
        if len(t) < 2:  # nothing to difference yet: the next chunk continues from this sample
            return np.zeros_like(x), None if rate is None or not len(t) else (rate, t[-1], x[-1], None)
        rate = rate or 1.0 / float(np.median(np.diff(t)))
        last_t, last_x, zi = t[0] - 1.0 / rate, x[0], None
    else:
        rate, last_t, last_x, zi = state
    steps = np.diff(np.concatenate([[last_t], t]))
    raw = np.diff(np.concatenate([last_x[None], x]), axis=0) / steps.reshape(-1, *([1] * (x.ndim - 1)))
    if state is None:
        raw[0] = raw[1] if len(raw) > 1 else 0.0  # no sample before the first
    sos = _lowpass(cutoff, rate, CAUSAL_ORDER)
    if sos is None:
        return raw, (rate, t[-1], x[-1], None)
    if zi is None:  # start at rest at the first value (no transient)
        zi = signal.sosfilt_zi(sos).reshape(len(sos), 2, *([1] * (x.ndim - 1))) * raw[0]
    out, zi = signal.sosfilt(sos, raw, axis=0, zi=zi)
    return out, (rate, t[-1], x[-1], zi)


class Differentiator:
    """Estimates a long log's missing derivatives, chunk by chunk, on its own stamps.

    Feed it consecutive chunks of one segment with :meth:`push` and end the segment with
    :meth:`flush`; each returns the samples it has finished, in order, as dicts of arrays with
    ``t``, ``q``, ``qd``, ``qdd`` and whatever else was pushed (``tau``). Logged velocities
    (``qd`` pushed) are kept, and the accelerations estimated from them; logged accelerations
    are kept as they are. The zero-phase estimator holds back ``margin`` samples of
    look-ahead (and keeps as many of look-behind), ten periods of the cut-off, so that no
    sample is estimated near the edge of a window. A segment shorter than :data:`SHORTEST`
    periods of the cut-off gets no estimate from it: :meth:`flush` drops its samples (counted
    in :attr:`dropped`).

    Args:
        cutoff: Hz.
        rate: the log's nominal rate, Hz (sets the margin).
        causal: the causal estimator instead of the zero-phase one.
        resample: ``None``, or a rate (Hz) at which to resample the log (zero-phase only): the
            samples come out on a uniform grid, positions from a cubic spline through the
            log, the other quantities interpolated linearly.
        chunk: samples per window of the zero-phase estimator.
    """

    def __init__(self, cutoff: float, rate: float, causal: bool = False, resample: float | None = None,
                 chunk: int = 20000):
        if causal and resample:
            raise ValueError("resampling needs samples after each grid point: not with the causal estimator")
        _check_cutoff(cutoff, max(rate, resample or 0.0))
        self.cutoff, self.rate, self.causal, self.resample = cutoff, rate, causal, resample
        self.margin = max(64, int(np.ceil(10 * max(rate, resample or 0.0) / cutoff)))
        self.chunk = max(int(chunk), 4 * self.margin)
        self.dropped = 0
        self._reset()

    def _reset(self):
        self._pending: dict | None = None  # arrays not yet finished
        self._behind: dict | None = None  # look-behind: the last finished samples
        self._next_grid = None  # the next resampled stamp
        self._state = {"qd": None, "qdd": None}  # causal filter states

    def push(self, chunk: dict) -> list[dict]:
        """Add a chunk (``t`` (m,), ``q`` (m, n), optionally ``qd``, ``qdd``, and any other
        (m, ...) arrays); returns the finished chunks. Causal: all of it, but for a segment's
        first sample pushed alone, which comes out with the next push (a live loop's first
        tick gets nothing)."""
        chunk = {k: np.asarray(v, np.float64) for k, v in chunk.items() if v is not None}
        self._pending = chunk if self._pending is None else {k: np.concatenate([self._pending[k], chunk[k]]) for k in chunk}
        size = len(self._pending["t"])
        if self.causal:
            # a segment's first sample waits for the second (its derivative is their difference's)
            starting = self._state["qd"] is None and self._state["qdd"] is None
            return [] if starting and size < 2 else [self._finish(size)]
        out = []
        while len(self._pending["t"]) >= self.chunk + self.margin:
            out.append(self._finish(self.chunk))
        return out

    def flush(self, keep_short: bool = False) -> list[dict]:
        """End the segment: finish every pending sample (none of a short zero-phase segment,
        unless ``keep_short``); the next push starts a new segment."""
        pending = self._pending
        t = () if pending is None else pending["t"]
        if len(t) and not (self.causal or keep_short) and self._behind is None and t[-1] - t[0] < SHORTEST / self.cutoff:
            self.dropped += len(t)
            t = ()
        out = [self._finish(len(t))] if len(t) else []
        self._reset()
        return [c for c in out if len(c["t"])]

    def _finish(self, count: int) -> dict:
        pending = self._pending
        done = {k: v[:count] for k, v in pending.items()}
        rest = {k: v[count:] for k, v in pending.items()}
        self._pending = rest if len(rest["t"]) else None
        if self.causal:
            return self._causal(done)
        ahead = {k: v[: self.margin] for k, v in rest.items()}
        window = {k: np.concatenate([part[k] for part in (self._behind, done, ahead) if part is not None]) for k in done}
        start = 0 if self._behind is None else len(self._behind["t"])
        self._behind = {k: v[max(0, count - self.margin) :] for k, v in done.items()}
        return self._zero_phase(window, start, count)

    def _causal(self, done: dict) -> dict:
        out = dict(done)
        t = done["t"]
        if "qd" not in done:
            out["qd"], self._state["qd"] = causal(t, done["q"], self.cutoff, self._state["qd"], self.rate)
        if "qdd" not in done:
            out["qdd"], self._state["qdd"] = causal(t, out["qd"], self.cutoff, self._state["qdd"], self.rate)
        return out

    def _zero_phase(self, window: dict, start: int, count: int) -> dict:
        """Estimate over the window; return samples ``start .. start + count`` of it (or the
        grid points in their span, when resampling)."""
        t = window["t"]
        if self.resample:
            first = t[start] if self._next_grid is None else self._next_grid
            # first + k / rate: np.arange steps by (first + step) - first, 9e-8 s off at epoch seconds
            times = first + np.arange(int(np.floor((t[start + count - 1] - first) * self.resample + 1e-6)) + 1) / self.resample
            if len(times):
                self._next_grid = times[-1] + 1.0 / self.resample
            pick = None
        else:
            times, pick = t[start : start + count], slice(start, start + count)
        out = {"t": times}
        if len(t) < 2:
            return {**out, **{k: window[k][pick] if pick else window[k][:0] for k in window if k != "t"},
                    **{k: np.zeros_like(window["q"][pick]) for k in ("qd", "qdd") if k not in window}}
        origin = t[0]  # times from the window's start, as in zero_phase
        t, at = t - origin, times - origin
        q_spline = interpolate.CubicSpline(t, window["q"], axis=0) if len(t) > 2 else None
        for key, value in window.items():
            if key in ("t",):
                continue
            if pick is not None:
                out[key] = value[pick]
            elif key == "q" and q_spline is not None:
                out[key] = q_spline(at)
            else:
                out[key] = np.stack([np.interp(at, t, col) for col in value.reshape(len(t), -1).T], -1).reshape(len(at), *value.shape[1:])
        if "qd" not in window:
            qd, qdd = zero_phase(t, window["q"], self.cutoff, 2, at=at if pick is None else None)
            out["qd"] = qd if pick is None else qd[pick]
            if "qdd" not in window:
                out["qdd"] = qdd if pick is None else qdd[pick]
        elif "qdd" not in window:
            (qdd,) = zero_phase(t, window["qd"], self.cutoff, 1, at=at if pick is None else None)
            out["qdd"] = qdd if pick is None else qdd[pick]
        return out
