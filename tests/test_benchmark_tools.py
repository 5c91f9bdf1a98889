"""The benchmarks' side-by-side comparison with an earlier revision measures the trees it names."""

from __future__ import annotations

import subprocess

import pytest
from common import SOURCE, alternated, best, imported


def test_alternated_measures_this_checkout_and_the_revision_in_turn():
    if subprocess.run(["git", "-C", str(SOURCE.parent), "rev-parse", "HEAD"], capture_output=True).returncode:
        pytest.skip("not a git checkout")
    order = []

    def measure(env):
        order.append(imported(env))
        return {"robot": {"us": float(len(order))}}

    runs = alternated(measure, "HEAD", rounds=2)
    head, base = order[0::2], order[1::2]
    assert all(path.is_relative_to(SOURCE.resolve()) for path in head)
    assert not any(path.is_relative_to(SOURCE.resolve()) for path in base)
    assert all(path.parts[-2:] == ("dense_armor", "__init__.py") for path in base)
    assert runs == {"head": [{"robot": {"us": 1.0}}, {"robot": {"us": 3.0}}], "base": [{"robot": {"us": 2.0}}, {"robot": {"us": 4.0}}]}
    assert not base[0].exists()  # the exported tree is removed afterwards


def test_best_takes_each_figure_lowest_over_runs():
    runs = [{"Panda": {"rnea": 2.0, "crba": 5.0}}, {"Panda": {"rnea": 3.0, "crba": 4.0}}]
    assert best(runs) == {"Panda": {"rnea": 2.0, "crba": 4.0}}
