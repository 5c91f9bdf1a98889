"""The ``dense-armor`` command line: every command in-process through ``main([...])``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

import dense_armor
from dense_armor import attach_payload, parse_urdf
from dense_armor.cli import main
from dense_armor.dynamics import rnea
from dense_armor.robots import minimal_urdf, write_minimal_urdf

ROOT = Path(__file__).resolve().parents[1]
PNG = b"\x89PNG\r\n\x1a\n"
T = 300  # samples in the test logs (one chunk shape for every replay: one compile)


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def arm(tmp_path_factory):
    """The two-link arm's URDF and a logged run of the same arm carrying 0.5 kg (noise-free)."""
    folder = tmp_path_factory.mktemp("logs")
    urdf = write_minimal_urdf(folder / "arm.urdf")
    model = parse_urdf(minimal_urdf())
    real = attach_payload(model, "link2", 0.5, com=(0.5, 0.0, 0.0))
    dt = 0.01
    t = np.arange(T) * dt
    w = np.array([[1.1, 1.7], [2.3, 0.9]])  # rad/s per (component, joint)
    q = 0.8 * np.sin(w[0] * t[:, None]) + 0.4 * np.cos(w[1] * t[:, None])
    qd = 0.8 * w[0] * np.cos(w[0] * t[:, None]) - 0.4 * w[1] * np.sin(w[1] * t[:, None])
    qdd = -0.8 * w[0] ** 2 * np.sin(w[0] * t[:, None]) - 0.4 * w[1] ** 2 * np.cos(w[1] * t[:, None])
    tau = np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(real, q, qd, qdd))
    return {"folder": folder, "urdf": urdf, "model": model, "t": t, "q": q, "qd": qd, "qdd": qdd, "tau": tau}


def _write_csv(path, columns):
    names = list(columns)
    np.savetxt(path, np.column_stack([columns[k] for k in names]), delimiter=",", header=",".join(names), comments="")
    return path


def _columns(arm, acc=True, named=True, time=True):
    cols = {"t": arm["t"]} if time else {}
    for j, name in enumerate(arm["model"].joint_names):
        key = (lambda qty: f"{qty}_{name}") if named else (lambda qty: f"{qty}{j}")
        cols[key("q")] = arm["q"][:, j]
        cols[key("qd")] = arm["qd"][:, j]
        if acc:
            cols[key("qdd")] = arm["qdd"][:, j]
        cols[key("tau")] = arm["tau"][:, j]
    return cols


def _rmse_rows(out):
    """The replay table's 'all' column for the nominal model and the learner."""
    nominal = float(re.search(r"^nominal URDF\s+([\d.]+)", out, re.M).group(1))
    learner = float(re.search(r"^learner \(prequential\)\s+([\d.]+)", out, re.M).group(1))
    return nominal, learner


# ----------------------------------------------------------------------------- version and help


def test_version_from_a_subprocess():
    done = subprocess.run(
        [sys.executable, "-m", "dense_armor", "--version"], capture_output=True, text=True,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": ""}, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"dense-armor {dense_armor.__version__}"


@pytest.mark.parametrize("command", [[], ["demo"], ["control"], ["replay"], ["info"]])
def test_help_on_every_command(capsys, command):
    code, out, _ = _run(capsys, *command, "--help")
    assert code == 0
    assert out.startswith(f"usage: {' '.join(['dense-armor', *command])}")


# ----------------------------------------------------------------------------- info


def test_info_lists_joints_bodies_and_merged_frames(capsys, tmp_path):
    tip = '<link name="tool"/><joint name="tool_joint" type="fixed"><parent link="link2"/><child link="tool"/>' \
          '<origin xyz="1 0 0"/></joint></robot>'
    urdf = tmp_path / "arm_tool.urdf"
    urdf.write_text(minimal_urdf(payload_mass=0.25).replace("</robot>", tip))
    code, out, _ = _run(capsys, "info", urdf)
    assert code == 0
    assert "2 movable joints, 4 links, fixed base 'base'" in out
    assert re.search(r"^0\s+joint1\s+revolute\s+base\s+link1\s+\(0, 0, 1\)", out, re.M)
    assert re.search(r"^1\s+link2\s+0\.75\s+\(0\.5, 0, 0\).*link2, tool$", out, re.M)  # the tool merged into link2
    assert re.search(r"^3\s+tool\s+link2\s+\(1, 0, 0\)\s+\(2, 0, 0\)$", out, re.M)  # 2 m out at q = 0


# ----------------------------------------------------------------------------- demo and control


def test_demo_prints_the_table_and_draws_the_plot(capsys, tmp_path):
    plot = tmp_path / "demo.png"
    code, out, _ = _run(capsys, "demo", "--rate", 50, "--plot", plot)
    assert code == 0
    assert "picks up a 0.5 kg payload" in out
    rows = {line.split("  ")[0]: line.split("  ")[1:] for line in out.splitlines()}
    cells = lambda name: [c.strip() for c in rows[name] if c.strip()]
    rmse = lambda name: [float(x) for x in cells(name)[:5]]
    nominal = rmse("nominal URDF")
    assert nominal[0] == 0.0 and min(nominal[1:]) > 0.5  # right before the payload, wrong after
    assert rmse("five-feature, lam 0.99")[-1] < nominal[-1]
    assert rmse("drift-aware five-feature, innovation")[-1] < nominal[-1]
    assert rmse("payload, lam 1")[0] < 0.01
    aware = cells("drift-aware payload, innovation")
    assert max(rmse("drift-aware payload, innovation")[2::2]) < 0.01  # exact once it has re-learned
    assert aware[5] == "10, 20"  # alarms exactly at the two changes, none elsewhere
    mass, std = (float(v) for v in aware[6].split(" +- "))
    assert abs(mass - 0.5) < 3 * std + 1e-3
    assert plot.read_bytes().startswith(PNG)


def test_control_learner_removes_the_miss(capsys, tmp_path):
    plot = tmp_path / "control.png"
    code, out, _ = _run(capsys, "control", "--rate", 250, "--laps", 1, "--plot", plot)
    assert code == 0
    urdf_only = re.search(r"^URDF only\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    learned = re.search(r"^URDF \+ payload learner \(lam 1\)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)$", out, re.M)
    assert urdf_only and learned, out
    assert float(urdf_only.group(3)) > 5.0  # the payload makes the arm miss its targets by millimetres
    assert float(learned.group(3)) < 0.01  # the learned payload removes the miss
    assert float(learned.group(1)) < 0.05 * float(urdf_only.group(1))
    mass = float(re.search(r"^learned payload: ([\d.]+) \+- ", out, re.M).group(1))
    assert mass == pytest.approx(0.5, abs=1e-3)
    assert plot.read_bytes().startswith(PNG)


# ----------------------------------------------------------------------------- replay


def test_replay_csv_with_accelerations(capsys, arm):
    log = _write_csv(arm["folder"] / "full.csv", _columns(arm))
    out_file = arm["folder"] / "pred.csv"
    code, out, _ = _run(capsys, "replay", arm["urdf"], log, "--out", out_file, "--chunk", 100)
    assert code == 0
    nominal, learner = _rmse_rows(out)
    assert learner < 0.5 * nominal
    header = out_file.read_text().splitlines()[0].split(",")
    assert header[:5] == ["t", "tau_joint1", "nominal_joint1", "pred_joint1", "err_joint1"]
    assert header[-2:] == ["alarm", "accepted"]
    table = np.loadtxt(out_file, delimiter=",", skiprows=1)
    col = {name: table[:, k] for k, name in enumerate(header)}
    assert table.shape == (T, len(header))
    np.testing.assert_allclose(col["err_joint2"], col["tau_joint2"] - col["pred_joint2"], atol=1e-7)
    nominal_tau = np.asarray(jax.vmap(rnea, in_axes=(None, 0, 0, 0))(arm["model"], arm["q"], arm["qd"], arm["qdd"]))
    np.testing.assert_allclose(col["nominal_joint1"], nominal_tau[:, 0], rtol=1e-7, atol=1e-7)
    assert np.all(col["accepted"] == 1)


def test_replay_csv_without_accelerations_estimates_them(capsys, arm):
    cols = _columns(arm, acc=False, named=False, time=False)
    log = _write_csv(arm["folder"] / "noacc.csv", cols)
    code, _, err = _run(capsys, "replay", arm["urdf"], log, "--chunk", 100)
    assert code == 2 and "--dt" in err  # no t column and no --dt: the period is unknown
    code, out, _ = _run(capsys, "replay", arm["urdf"], log, "--dt", 0.01, "--chunk", 100, "--out", arm["folder"] / "p.npz")
    assert code == 0
    assert "qdd estimated (Savitzky-Golay" in out
    nominal, learner = _rmse_rows(out)
    assert learner < 0.5 * nominal
    with np.load(arm["folder"] / "p.npz") as pred:
        np.testing.assert_allclose(pred["t"], arm["t"])  # sample times from --dt
        assert np.all(np.isfinite(pred["pred_joint1"]))


def test_replay_npz_with_arrays_and_progress_bar(capsys, arm):
    log = arm["folder"] / "log.npz"
    np.savez(log, t=arm["t"], q=arm["q"], qd=arm["qd"], qdd=arm["qdd"], tau=arm["tau"])
    code, out, err = _run(capsys, "replay", arm["urdf"], log, "--chunk", 100, "--progress")
    assert code == 0
    assert "replay [" in err and f"{T}/{T} samples" in err
    nominal, learner = _rmse_rows(out)
    assert learner < 0.5 * nominal


def test_replay_plot(capsys, arm, tmp_path):
    log = _write_csv(arm["folder"] / "plot.csv", _columns(arm))
    code, out, _ = _run(capsys, "replay", arm["urdf"], log, "--chunk", 100, "--plot", tmp_path / "r.png")
    assert code == 0
    assert (tmp_path / "r.png").read_bytes().startswith(PNG)


@pytest.mark.parametrize("learner", ["drift-aware", "payload"])
def test_replay_other_learners(capsys, arm, learner):
    log = _write_csv(arm["folder"] / "other.csv", _columns(arm))
    code, out, _ = _run(capsys, "replay", arm["urdf"], log, "--learner", learner, "--chunk", 100)
    assert code == 0, out
    if learner == "payload":
        mass = float(re.search(r"learned payload on link2: ([\d.]+) \+- ", out).group(1))
        assert mass == pytest.approx(0.5, abs=1e-3)
    else:
        assert "drift alarms" in out


# ----------------------------------------------------------------------------- user errors


def _bad_files(folder: Path, arm) -> dict[str, Path]:
    (folder / "bad.urdf").write_text("<robot><link name='a'/>")
    floating = minimal_urdf().replace('type="revolute"', 'type="floating"', 1)
    (folder / "floating.urdf").write_text(floating)
    _write_csv(folder / "wrong_joint.csv", {"q_joint1": [0.0], "q_elbow": [0.0], "tau_joint1": [0.0], "tau_joint2": [0.0]})
    _write_csv(folder / "no_tau.csv", {"q0": [0.0], "q1": [0.0], "qd0": [0.0], "qd1": [0.0]})
    _write_csv(folder / "half.csv", {"q0": [0.0], "q1": [0.0], "qd0": [0.0], "tau0": [0.0], "tau1": [0.0]})
    (folder / "text.csv").write_text("q0,q1,tau0,tau1\n0,1,2,abc\n")
    t = np.array([0.0, 0.01, 0.02, 0.5, 0.51, 0.52, 0.53, 0.54, 0.55, 0.56, 0.57, 0.58])
    _write_csv(folder / "gaps.csv", {"t": t, "q0": t, "q1": t, "tau0": t, "tau1": t})
    np.savez(folder / "wrong_shape.npz", q=np.zeros((5, 3)), tau=np.zeros((5, 3)))
    return {p.name: p for p in folder.iterdir()}


@pytest.mark.parametrize(
    "argv, message",
    [
        (["info", "{missing}"], "no such URDF file"),
        (["info", "bad.urdf"], "malformed XML"),
        (["info", "floating.urdf"], "floating joints are not supported"),
        (["replay", "{urdf}", "{missing}"], "no such log file"),
        (["replay", "{urdf}", "wrong_joint.csv"], "column 'q_elbow' names no joint"),
        (["replay", "{urdf}", "no_tau.csv"], "no tau columns"),
        (["replay", "{urdf}", "half.csv", "--dt", "0.01"], "qd is logged for some joints but not for joint2"),
        (["replay", "{urdf}", "text.csv"], "not a numeric CSV table"),
        (["replay", "{urdf}", "gaps.csv"], "not uniformly sampled"),
        (["replay", "{urdf}", "wrong_shape.npz"], "expected (T, 2)"),
        (["replay", "{urdf}", "no_tau.csv", "--lam", "1.5"], "argument --lam"),
        (["replay", "{urdf}", "no_tau.csv", "--sg-window", "4"], "argument --sg-window"),
        (["replay", "{urdf}", "no_tau.csv", "--out", "/no/such/folder/x.csv"], "does not exist"),
        (["demo", "--rate", "-5"], "argument --rate"),
        (["control", "--kp", "abc"], "argument --kp"),
        (["frobnicate"], "invalid choice"),
        ([], "required"),
    ],
)
def test_user_errors_exit_2_with_one_line(capsys, tmp_path, arm, argv, message):
    files = _bad_files(tmp_path, arm)
    names = {"missing": str(tmp_path / "missing.file"), "urdf": str(arm["urdf"])}
    argv = [a.format(**names) if "{" in a else str(files.get(a, a)) for a in argv]
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("dense-armor: error: ") and message in lines[0], lines[0]


def test_plot_without_matplotlib_is_a_clear_error(capsys, monkeypatch, arm):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    log = _write_csv(arm["folder"] / "nompl.csv", _columns(arm))
    code, _, err = _run(capsys, "replay", arm["urdf"], log, "--plot", arm["folder"] / "x.png")
    assert code == 2
    assert err.strip() == "dense-armor: error: --plot needs matplotlib, which is not installed (pip install 'dense_armor[plot]')"
