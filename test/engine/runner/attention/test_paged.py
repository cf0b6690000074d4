"""Building the C++ paged attention op: a lock left by a killed build does not hang the next."""
from __future__ import annotations

import os
import time

from oxygen_ros.engine.runner.attention.paged import STALE_LOCK_S, clear_stale_lock


def test_a_killed_builds_lock_is_removed_a_running_builds_kept(tmp_path, caplog):
    lock = tmp_path / "lock"
    assert not clear_stale_lock(tmp_path)  # no lock: nothing to do
    lock.touch()  # a build compiling now (30-60 s): torch waits for it
    assert not clear_stale_lock(tmp_path) and lock.exists()
    old = time.time() - STALE_LOCK_S - 60  # Ctrl-C during setup, ten minutes ago
    os.utime(lock, (old, old))
    assert clear_stale_lock(tmp_path) and not lock.exists()
    assert "stale build lock" in caplog.text
