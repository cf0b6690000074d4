"""Property: a cut or damaged bag never makes the reader raise; what it returns of an MCAP cut
is a prefix of each topic's messages (nothing invented, nothing reordered)."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oxygen_ros.bags.metrics import TYPES
from oxygen_ros.bags.reader import read_bag

from bagsynth import write_run

SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def full(tmp_path_factory):
    d = tmp_path_factory.mktemp("full")
    write_run(d / "mcap", "mcap", seconds=3.0, image_size=160)  # 2.3 MB: three MCAP chunks
    write_run(d / "sqlite", "sqlite3", seconds=1.0)
    write_run(d / "small", "mcap", seconds=1.0)
    return d, read_bag(d / "mcap", types=TYPES)  # images are scanned past, not decoded


def _key(msg) -> tuple:
    h = getattr(msg, "header", None)
    return (h.stamp.sec, h.stamp.nanosec) if h is not None else ()


@SETTINGS
@given(frac=st.floats(0.0, 1.0))
def test_mcap_cut_anywhere_gives_a_prefix(full, tmp_path, frac):
    full, ref = full
    f = next((full / "mcap").glob("*.mcap"))
    cut = tmp_path / f"cut{frac}"
    cut.mkdir()
    data = f.read_bytes()
    (cut / f.name).write_bytes(data[: int(len(data) * frac)])
    got = read_bag(cut, types=TYPES)
    assert frac == 1.0 or got.errors
    for topic, msgs in got.messages.items():
        want = [(ts, _key(m)) for ts, m in ref.messages[topic][: len(msgs)]]
        assert [(ts, _key(m)) for ts, m in msgs] == want


@settings(SETTINGS, max_examples=10)  # each read opens two bags (~0.3 s each with rosbags)
@given(where=st.floats(0.0, 1.0), junk=st.binary(min_size=1, max_size=64))
def test_damaged_bytes_never_raise(full, tmp_path, where, junk):
    full, _ = full
    for name in ("small", "sqlite"):
        # a fresh folder per example: hypothesis may run one example twice (replay, shrinking)
        dst = Path(tempfile.mkdtemp(prefix=name, dir=tmp_path)) / "bag"
        shutil.copytree(full / name, dst)
        f = next(p for p in dst.iterdir() if p.suffix in (".mcap", ".db3"))
        data = bytearray(f.read_bytes())
        at = int((len(data) - len(junk)) * where)
        data[at: at + len(junk)] = junk
        f.write_bytes(bytes(data))
        read_bag(dst, types=TYPES)  # any outcome but an exception
