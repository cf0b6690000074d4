"""oxygen-eval on bags written here with known rates and latencies (both storage formats)."""
from __future__ import annotations

import json

import pytest

from oxygen_ros.cli.eval import main
from oxygen_ros.bags.metrics import Topics, evaluate
from oxygen_ros.bags.reader import read_bag

from bagsynth import write_run


@pytest.mark.parametrize("storage", ["mcap", "sqlite3"])
def test_eval_numbers_match_what_was_written(tmp_path, storage):
    exp = write_run(tmp_path / "run", storage)
    s = evaluate(read_bag(tmp_path / "run")).summary
    assert s["errors"] == []
    assert s["command_rate_hz"] == pytest.approx(exp["command_rate_hz"], rel=1e-6)
    assert s["command_period_p50_ms"] == pytest.approx(exp["command_period_ms"], abs=1e-6)
    assert s["command_period_p99_ms"] == pytest.approx(exp["command_period_ms"], abs=1e-6)
    assert s["action_chunks"] == exp["action_chunks"]
    assert s["action_rate_hz"] == pytest.approx(exp["action_rate_hz"], rel=1e-6)
    assert s["tokens_per_s"] == pytest.approx(exp["tokens_per_s"], rel=1e-6)
    assert s["obs_to_command_ms_p50"] == pytest.approx(exp["latency_ms"], abs=1e-6)
    assert s["obs_to_command_ms_p99"] == pytest.approx(exp["latency_ms"], abs=1e-6)
    assert s["memory_finished"] == exp["memories"]
    assert s["memory_frames_p50"] == exp["memory_frames"]
    assert s["memory_s_p50"] == pytest.approx(exp["memory_s"], abs=1e-9)
    assert s["hold_periods"] == 1 and s["hold_s"] == pytest.approx(exp["hold_s"])
    assert s["stale_ticks"] == 50
    assert s["stage_ms"]["vision_prefill_ms"] == pytest.approx(10.0)
    assert (s["mode"], s["k"], s["N"], s["S"]) == ("oxygen", 4, 12, 10)


def test_cli_report_plots_and_json(tmp_path, capsys):
    write_run(tmp_path / "a", "mcap", seconds=2.0)
    write_run(tmp_path / "b", "sqlite3", seconds=2.0)
    out = tmp_path / "out"
    assert main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out), "--json"]) == 0
    last = capsys.readouterr().out.strip().splitlines()[-1]
    data = json.loads(last)
    assert [b["action_chunks"] for b in data["bags"]] == [20, 20]
    for key in ("command_rate_hz", "command_period_p50_ms", "command_period_p99_ms", "action_chunks",
                "action_rate_hz", "tokens_per_s"):
        assert all(key in b for b in data["bags"])
    text = (out / "report.md").read_text()
    assert "## Side by side" in text and "memory 5" in text
    for name in ("a-commands.png", "a-frames.png", "a-batch_kv.png", "b-frames.png"):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"


def test_truncated_mcap_reports_what_is_readable(tmp_path, capsys):
    # 3 s of 96x96 images make several 1 MiB MCAP chunks; cut the file in the middle
    write_run(tmp_path / "run", "mcap", seconds=6.0, image_size=160)
    f = next((tmp_path / "run").glob("*.mcap"))
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])
    bag = read_bag(tmp_path / "run")
    assert bag.errors and "cut off" in " ".join(bag.errors)
    s = evaluate(bag).summary
    assert 0 < s["action_chunks"] < 60
    assert s["command_rate_hz"] == pytest.approx(50.0, rel=1e-6)  # what was read is still right
    out = tmp_path / "out"
    assert main([str(tmp_path / "run"), "--out", str(out), "--json"]) == 1
    cap = capsys.readouterr()
    assert "cut off" in cap.err
    assert json.loads(cap.out.strip().splitlines()[-1])["action_chunks"] == s["action_chunks"]
    assert "Problems reading this bag" in (out / "report.md").read_text()


def test_unfinished_sqlite_bag_without_metadata(tmp_path):
    write_run(tmp_path / "run", "sqlite3", seconds=1.0)
    (tmp_path / "run" / "metadata.yaml").unlink()  # what a killed recorder leaves
    bag = read_bag(tmp_path / "run")
    assert any("could not open" in e for e in bag.errors)
    assert evaluate(bag).summary["action_chunks"] == 10


def test_garbage_file_is_a_clear_error(tmp_path, capsys):
    f = tmp_path / "x.mcap"
    f.write_bytes(b"not a bag at all")
    assert main([str(f), "--out", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert "x.mcap" in err and "magic" in err


def test_hold_from_status_messages_when_there_is_no_counter():
    from types import SimpleNamespace as NS

    from oxygen_ros.bags.reader import BagData

    bag = BagData("x")
    bag.topics["/diagnostics"] = "diagnostic_msgs/msg/DiagnosticArray"
    for sec, msg in enumerate(["commanding", "stale observation: holding the last command",
                               "stale observation: holding the last command", "commanding"]):
        st = NS(name="oxygen: control", message=msg, values=[])
        bag.messages["/diagnostics"].append((sec * 10**9, NS(status=[st])))
    s = evaluate(bag).summary
    assert s["hold_periods"] == 1 and s["hold_s"] == pytest.approx(2.0) and s["stale_ticks"] is None


def test_framestats_with_new_fields(tmp_path):
    """A bag recorded with a FrameStats that has fields this version does not know (a newer node's):
    read from the bag's own definition, stages stay the five, the rest is reported."""
    from oxygen_ros.bags import messages as M
    from oxygen_ros.bags.typestore import FRAME_STATS, msg_dir, typestore
    from oxygen_ros.bags.writer import BagWriter

    d = tmp_path / "msg"
    d.mkdir()
    for f in msg_dir().glob("*.msg"):
        (d / f.name).write_text(f.read_text())
    (d / "FrameStats.msg").write_text((d / "FrameStats.msg").read_text()
                                      + "float32 future_ms\nbool future_flag\n")
    store = typestore(str(d))
    with BagWriter(tmp_path / "bag", "mcap", store=store) as w:
        for i in range(4):
            w.write("/oxygen/frame_stats", FRAME_STATS, M.frame_stats(
                store, i * 10**8, frame=i, k=1 + i, frame_ms=20.0, denoise_ms=10.0, future_ms=25.0,
                future_flag=i < 3), i * 10**8)
    s = evaluate(read_bag(tmp_path / "bag")).summary
    assert "future_ms" not in s["stage_ms"] and s["stage_ms"]["denoise_ms"] == pytest.approx(10.0)
    assert s["other_fields"]["future_ms"]["mean"] == pytest.approx(25.0)
    assert s["other_fields"]["future_flag"]["last"] == 0.0
    assert (s["k_min"], s["k_max"]) == (1, 4)
    assert main([str(tmp_path / "bag"), "--out", str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "report.md").read_text()
    assert "`future_ms`: 25" in text and "k varied between 1 and 4" in text and "k=1..4" in text


def test_command_motion_and_seam_jump(tmp_path):
    """Commands with known motion: joint a = t^2 (velocity 2t, acceleration 2, jerk 0), joint b
    still except a 0.1 rad step at every chunk switch, joint c at 0.5 rad/s."""
    import numpy as np

    from oxygen_ros.bags import messages as M
    from oxygen_ros.bags.typestore import DIAGNOSTICS, JOINT_STATE, TRAJECTORY
    from oxygen_ros.bags.writer import BagWriter

    t0, period, n = 1_700_000_000 * 10**9, 20_000_000, 100  # 2 s at 50 Hz
    names = ["a", "b", "c"]
    switch = [t0 + k * 100_000_000 + 5_000_000 for k in range(20)]  # chunks every 0.1 s
    with BagWriter(tmp_path / "run", "mcap") as w:
        msgs = []
        for i in range(n):
            ns, t = t0 + i * period, i * period * 1e-9
            seams = sum(1 for c in switch if c <= ns)  # switches up to this command
            msgs.append((ns, "/oxygen/joint_command", JOINT_STATE,
                         M.joint_state(w.store, names, [t * t, 0.1 * seams, 0.5 * t], ns)))
        for c in switch:
            msgs.append((c, "/oxygen/action_chunk", TRAJECTORY,
                         M.trajectory(w.store, np.zeros((5, 3)), names, c - 5_000_000, 0.02)))
        for sec, ticks in enumerate((0, 30, 80)):
            ns = t0 + sec * 10**9
            msgs.append((ns, "/diagnostics", DIAGNOSTICS, M.diagnostics(w.store, ns, [
                ("oxygen: control", 0, "commanding", {"limited_ticks": ticks, "gated_chunks": sec})])))
        for log, topic, typ, msg in sorted(msgs, key=lambda m: m[0]):
            w.write(topic, typ, msg, log)
    ev = evaluate(read_bag(tmp_path / "run"))
    s, m = ev.summary, ev.summary["motion"]
    assert m["a"]["velocity_max"] == pytest.approx(2 * 1.98 - 0.02, rel=1e-6)  # (t1^2 - t0^2)/dt
    assert m["a"]["acceleration_max"] == pytest.approx(2.0, rel=1e-6)
    assert m["a"]["jerk_max"] == pytest.approx(0.0, abs=1e-6)
    assert m["c"]["velocity_max"] == pytest.approx(0.5, rel=1e-6)
    assert m["c"]["acceleration_max"] == pytest.approx(0.0, abs=1e-6)
    assert s["command_seams"] == 20
    assert m["b"]["seam_step_mean"] == pytest.approx(0.1) and m["b"]["within_step_max"] == 0.0
    assert m["c"]["seam_step_mean"] == pytest.approx(m["c"]["within_step_mean"])
    assert s["limited_ticks"] == 80 and s["gated_chunks"] == 2
    from oxygen_ros.bags.plots import make_plots
    from oxygen_ros.bags.report import report

    assert "motion.png" in make_plots(ev, tmp_path)
    assert "| b |" in report([ev], ["run"], [["motion.png"]])


def test_float64_array_commands_give_the_same_command_numbers(tmp_path):
    """A run recorded with command_type float64_array (no stamp, no names) is evaluated like a
    JointState run, not silently without command metrics."""
    write_run(tmp_path / "js", "mcap", seconds=2.0)
    write_run(tmp_path / "fa", "mcap", seconds=2.0, command_type="float64_array")
    js = evaluate(read_bag(tmp_path / "js")).summary
    fa = evaluate(read_bag(tmp_path / "fa")).summary
    assert fa["topics"]["command"] == "/oxygen/joint_command"
    assert fa["command_type"] == "std_msgs/msg/Float64MultiArray" and fa["commands"] == js["commands"] > 0
    for key in ("command_rate_hz", "command_period_p50_ms", "obs_to_command_ms_p50", "seam_error",
                "command_velocity_max"):
        assert fa[key] == pytest.approx(js[key], nan_ok=True), key
    assert fa["motion"].keys() == js["motion"].keys() == {"j0", "j1", "j2"}


def test_a_command_topic_of_another_type_is_named_not_read(tmp_path):
    write_run(tmp_path / "run", "mcap", seconds=1.0)
    s = evaluate(read_bag(tmp_path / "run"), Topics(command="/oxygen/frame_stats")).summary
    assert s["commands"] == 0 and any("FrameStats" in e and "Float64MultiArray" in e for e in s["errors"])
