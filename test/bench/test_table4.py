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


def test_starvla_presets_beside_their_paper_rows_and_the_heads_compared():
    """Each StarVLA preset is quoted beside its own paper model (E = 2: 478.0 ms isolated,
    6.64x at k=1; E = 3: 6.05x; E = 4: 3.69x at k=5); the comparison gives each preset's median
    action stage over its grid runs and what the added head costs over the one before."""
    from oxygen_ros.bench.table4 import heads_comparison, report

    rows = []
    for preset, stage in (("starvla-tiny", [10.0, 12.0, 50.0]), ("starvla-tiny-e3", [20.0, 21.0, 22.0]),
                          ("starvla-tiny-e4", [26.0, 25.0, 90.0])):
        for i, (mode, k) in enumerate((("isolated", None), ("oxygen", 1), ("oxygen", 5))):
            rows.append(dict(preset=preset, group="grid", mode=mode, k=k, N=30, S=4,
                             frame_ms_mean=100.0, speedup=1.0 if mode == "isolated" else 2.0 + i,
                             stage_ms={"denoise": stage[i]}, hidden_bytes=590_000))
    rows.append(dict(rows[1], group="pattern:x", stage_ms={"denoise": 1000.0}))  # not a grid row
    results = {"rows": rows, "env": {"device": "cpu"}}
    text = report(results)
    e2, e3, e4 = text.split("Table 4 layout")[1:]
    assert "Qwen3VL-PI (E = 2)" in e2 and "100.0 (478.0)" in e2 and "3.00x (6.64x)" in e2
    assert "+ GR00T (E = 3)" in e3 and "3.00x (6.05x)" in e3 and "100.0 (-)" in e3
    assert "4.00x (3.69x)" in e4 and "(1.05-1.16x)" in e4
    cmp = {line.split(" | ")[0]: line.split(" | ") for line in
           heads_comparison(results, ["starvla-tiny-e4", "starvla-tiny", "starvla-tiny-e3"]).splitlines()
           if line.startswith("| starvla")}
    assert list(cmp) == ["| starvla-tiny", "| starvla-tiny-e3", "| starvla-tiny-e4"]
    assert cmp["| starvla-tiny"][2:5] == ["12.0", "-", "0.59"]  # median of 10, 12, 50
    assert cmp["| starvla-tiny-e3"][2:4] == ["21.0", "+9.0"]
    assert cmp["| starvla-tiny-e4"][2:4] == ["26.0", "+5.0"]
    assert "What each extra head costs" not in report(results, ["starvla-tiny"])
