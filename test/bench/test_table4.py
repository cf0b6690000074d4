"""The Table 4 layout picks each (mode, k, N) row of the grid and quotes the paper beside it."""
import pytest

from oxygen_ros.bench.table4 import table


def _row(mode, k, n, ms, speedup):
    return dict(preset="xr0-tiny", group="grid", mode=mode, k=k, N=n, S=5, frame_ms_mean=ms,
                speedup=speedup)


def test_rows_by_n_with_paper_numbers():
    rows = [_row("isolated", None, n, 100.0 * n, 1.0) for n in (10, 20, 30)]
    rows += [_row("shared", None, 30, 2000.0, 1.5), _row("oxygen", 1, 30, 700.0, 4.29),
             _row("oxygen", 5, 20, 900.0, 2.22), _row("oxygen", 1, 30, 1.0, 99.0) | {"group": "pattern:x"}]
    text = table({"rows": rows, "env": {"device": "cpu"}}, "xr0-tiny")
    lines = {line.split(" | ")[0]: line for line in text.splitlines() if line.startswith("| ")}
    assert "3000.0 (562.8)" in lines["| 30"] and "1.50x (1.07-1.16x)" in lines["| 30"]
    assert "4.29x (5.83x)" in lines["| 30"] and "99" not in lines["| 30"]
    assert "2.22x (-)" in lines["| 20"] and "- (4.47x)" in lines["| 20"]
    with pytest.raises(ValueError, match="no rows"):
        table({"rows": rows}, "tiny")
