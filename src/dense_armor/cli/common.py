"""What the commands share: user errors, argument types, tables, outputs that lose nothing."""

from __future__ import annotations

import argparse
import math
import os
import re
import secrets
from pathlib import Path

import numpy as np

PROG = "dense-armor"
#: --mimic: a <mimic> joint follows the joint it mimics instead of being a coordinate of its own.
MIMIC_HELP = "couple each <mimic> joint to the joint it mimics (default: an independent joint, as Pinocchio)"


class UserError(Exception):
    """A problem with what the user asked for: reported in one line, exit status 2."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line on stderr and exit status 2, and a value that
    starts as a negative number is a value (``--torque-scale -1,1``), as from Python 3.13."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d")

    def error(self, message):
        self.exit(2, f"{PROG}: error: {message} (see '{self.prog} --help')\n")


# ----------------------------------------------------------------------------- argument types


def _number(kind, test, what):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if not (math.isfinite(value) and test(value)):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return parse


positive = _number(float, lambda v: v > 0, "a positive number")
nonnegative = _number(float, lambda v: v >= 0, "a number >= 0")
forgetting_factor = _number(float, lambda v: 0 < v <= 1, "a forgetting factor in (0, 1]")
count = _number(int, lambda v: v >= 1, "a whole number >= 1")
natural = _number(int, lambda v: v >= 0, "a whole number >= 0")
#: samples per ``lax.scan`` block: every block is padded to it, so a huge one is memory for nothing
block_size = _number(int, lambda v: 1 <= v <= 100_000, "a whole number of samples from 1 to 100000")


def alarm_text(alarm_times, limit=3) -> str:
    """A few alarm times, and how many there are."""
    if len(alarm_times) == 0:
        return "-"
    shown = ", ".join(f"{t:g}" for t in alarm_times[:limit])
    return shown if len(alarm_times) <= limit else f"{len(alarm_times)}: {shown}, ..."


# ----------------------------------------------------------------------------- shared helpers


def require_matplotlib():
    """pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def table(headers, rows, align=None) -> str:
    """Plain text table: columns padded to their widest cell; numbers right-aligned."""
    cells = [list(map(str, headers))] + [list(map(str, r)) for r in rows]
    widths = [max(len(r[k]) for r in cells) for k in range(len(headers))]
    align = align or ["<"] + [">"] * (len(headers) - 1)
    return "\n".join(
        "  ".join(f"{c:{a}{w}}" for c, a, w in zip(r, align, widths)).rstrip() for r in cells
    )


def fmt(x, digits=3) -> str:
    return "-" if x is None or not np.isfinite(x) else f"{x:.{digits}f}"




def _partial(folder: Path, name: str) -> tuple[int, Path]:
    """A new file in ``folder`` beside ``name``, open for writing, with a new file's mode (0666
    less the umask, which the system applies; ``tempfile``'s files are private, 0600)."""
    while True:
        temp = folder / f".{name}.{secrets.token_hex(4)}.partial"
        try:
            return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666), temp
        except FileExistsError:
            continue


class Output:
    """A file a command writes, checked before any work and written whole or not at all.

    The path must not be one of the command's inputs (nor another output), its folder must
    exist and take a new file, and an existing file there must be a regular file. The content
    goes to a temporary file in that folder, which :meth:`commit` renames over the path: an
    interrupted or failed command leaves the path as it was.
    """

    def __init__(self, path: str | None, option: str, inputs=(), suffixes: tuple | None = None):
        self.path, self.option = (None if path is None else Path(path)), option
        self.handle = None
        if self.path is None:
            return
        for other in inputs:
            if other is not None and _same(self.path, Path(other)):
                raise UserError(f"{option} {path}: that is an input of this command; choose another file")
        folder = self.path.parent
        if not folder.is_dir():
            raise UserError(f"{option} {path}: the folder {folder} does not exist")
        if self.path.exists() and not self.path.is_file():
            raise UserError(f"{option} {path}: not a regular file")
        if suffixes is not None and self.path.suffix.lower() not in suffixes:
            raise UserError(f"{option} {path}: expected a file ending in {' or '.join(suffixes)}")
        try:
            fd, self.temp = _partial(folder, self.path.name)
        except OSError as err:
            raise UserError(f"{option} {path}: cannot write in {folder}: {err.strerror}") from None
        self.handle = os.fdopen(fd, "wb")

    def __bool__(self) -> bool:
        return self.path is not None

    def commit(self) -> None:
        """Replace the path with what was written."""
        if self.handle is None:
            return
        try:
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self.handle.close()
            os.replace(self.temp, self.path)
        except OSError as err:
            self.discard()
            raise UserError(f"{self.option} {self.path}: cannot be written: {err.strerror}") from None
        self.handle = None

    def discard(self) -> None:
        """Drop what was written; the path is left as it was."""
        if self.handle is not None:
            self.handle.close()
            self.handle = None
        if getattr(self, "temp", None) is not None and self.temp.exists():
            self.temp.unlink()


def distinct(*outputs: Output) -> None:
    """Two outputs must not be the same file."""
    paths = [o for o in outputs if o]
    for i, a in enumerate(paths):
        for b in paths[i + 1 :]:
            if _same(a.path, b.path):
                raise UserError(f"{a.option} and {b.option} name the same file {a.path}")


def _same(a: Path, b: Path) -> bool:
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and os.path.samefile(a, b))
    except OSError:
        return False
