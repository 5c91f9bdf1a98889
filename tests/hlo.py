"""Reading XLA's optimised HLO text in the ``perf`` tests: the entry computation, a loop's
body, and how many of a computation's top-level instructions are of given kinds."""

from __future__ import annotations

import re


def entry(text: str) -> str:
    """The entry computation of a compiled program's text."""
    return text[text.index("\nENTRY") :]


def loop_body(text: str) -> str:
    """The body of the program's first ``while`` loop (a ``lax.scan``)."""
    body = re.search(r" while\(.*?body=(%[\w.\-]+)", text).group(1)
    start = text.index(f"\n{body} ")
    return text[start : text.index("\n}\n", start)]


def count(computation: str, *ops: str) -> int:
    """Top-level instructions of ``computation`` whose operation is one of ``ops``."""
    return len(re.findall(rf"^\s*(?:ROOT )?%\S+ = .*? (?:{'|'.join(ops)})\(", computation, re.M))
