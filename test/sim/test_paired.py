"""The paired time-to-success comparison (oxygen_ros/sim/paired.py) on an eval log."""
from __future__ import annotations

import json

from oxygen_ros.sim.paired import main, pair, read_log

LOG = """setting isolated/crossfade: 2 tasks x 3 episodes
  [isolated/crossfade] episode   0 button-press-topdown   success  0.90 s
  [isolated/crossfade] episode   1 button-press-topdown   success  1.00 s
  [isolated/crossfade] episode   2 door-lock              timeout  3.75 s
  [isolated/crossfade] episode   3 door-lock              success  1.20 s
  [oxygen-k1/crossfade] episode   0 button-press-topdown   success  0.80 s
  [oxygen-k1/crossfade] episode   1 button-press-topdown   success  1.00 s
  [oxygen-k1/crossfade] episode   2 door-lock              success  0.70 s
  [oxygen-k1/crossfade] episode   3 door-lock              success  1.50 s
"""


def test_pairs_only_layouts_both_settings_solved():
    runs = read_log(LOG.splitlines())
    assert list(runs) == ["isolated/crossfade", "oxygen-k1/crossfade"]
    button, lock = pair(runs["isolated/crossfade"], runs["oxygen-k1/crossfade"])
    assert (button.task, button.pairs, button.b_sooner, button.b_later, button.equal) == \
        ("button-press-topdown", 2, 1, 0, 1)
    assert button.median_diff_s == -0.05 and button.median_a_s == 0.95
    # episode 2 failed in isolated: its 0.70 s is not compared (unpaired medians would be)
    assert (lock.pairs, lock.b_later, lock.median_diff_s) == (1, 1, 0.3)


def test_command_prints_json_and_refuses_a_log_without_two_settings(tmp_path, capsys):
    log = tmp_path / "eval.log"
    log.write_text(LOG)
    assert main([str(log)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["a"] == "isolated/crossfade" and len(out["tasks"]) == 2
    log.write_text(LOG.splitlines()[1] + "\n")
    assert main([str(log)]) == 2
