"""One way to run tools (issue 28): every benchmark is a module of the package registered behind
`oxygen-bench <name>`; their common flags come from the engine's knob table; `oxygen-bench`
without a name is still the mode sweep."""
import importlib
import pathlib

import pytest

from oxygen_ros.bench import registry
from oxygen_ros.cli import bench as cli
from oxygen_ros.engine.config import KNOBS

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_no_benchmark_script_is_left_outside_the_package():
    assert not sorted(p.name for p in (ROOT / "benchmarks").glob("*.py"))
    suite = {p.stem for p in (ROOT / "oxygen_ros" / "bench" / "suite").glob("*.py")} - {
        "__init__", "node_process"}  # node_process: the node benchmarks' helper
    registered = {b.module.rsplit(".", 1)[1] for b in registry.BENCHMARKS.values()}
    assert suite <= registered


@pytest.mark.parametrize("name", sorted(registry.BENCHMARKS))
def test_every_registered_benchmark_has_a_main(name):
    module = importlib.import_module(registry.BENCHMARKS[name].module)
    assert callable(module.main)


def test_a_benchmark_runs_by_name_with_flags_from_the_knob_table(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["engine-soak", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: oxygen-bench engine-soak")
    assert KNOBS["denoise_steps"].description.split(";")[0] in " ".join(out.split())
    assert "(default: 2)" in " ".join(out.split())  # the benchmark's own default for --S


def test_without_a_name_oxygen_bench_is_the_sweep(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--grid-presets" in out and "engine-soak" in out  # the sweep's flags, then the list
    with pytest.raises(SystemExit):
        cli.main(["no-such-bench"])  # not registered: a sweep argument, refused by argparse
