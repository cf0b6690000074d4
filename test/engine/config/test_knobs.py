"""The engine knob table (engine/config/engine_config.py ENGINE_KNOBS): EngineConfig, the tools' flags and the
node's parameters follow from it, and the mode / dtype / preset lists are written once."""
import ast
import dataclasses
import typing
from pathlib import Path

import pytest

from oxygen_ros.engine.config import DTYPES, ENGINE_KNOBS, KNOBS, MODES, PRESETS, EngineConfig
from oxygen_ros.engine.config.knobs import Knob, knob_table, range_text

PACKAGE = Path(__file__).resolve().parents[3] / "oxygen_ros"


def test_every_engine_config_field_is_one_knob():
    fields = dataclasses.fields(EngineConfig)
    assert sorted(f.name for f in fields) == sorted(KNOBS) and len(KNOBS) == len(ENGINE_KNOBS)
    hints = typing.get_type_hints(EngineConfig)
    default = EngineConfig()
    for f in fields:
        knob = KNOBS[f.name]
        assert hints[f.name] is knob.type, f.name
        assert getattr(default, f.name) == knob.default and f.default == knob.default
        assert knob.description and knob.reason(knob.default) is None


def _another_value(knob: Knob):
    """A value of the knob's type, in its range / choices, other than its default."""
    if knob.type is bool:
        return not knob.default
    if knob.choices:
        return next(c for c in knob.choices if c != knob.default)
    if knob.field == "device":
        return "cuda:1"  # valid, and not where this engine runs
    if knob.type is str:
        return knob.default + " now"
    lo, hi = knob.range or (None, None)
    up = knob.default + 1
    return up if hi is None or up <= hi else knob.default - 1


@pytest.fixture(scope="module")
def tiny_engine():
    from oxygen_ros.engine.core.engine import Engine
    from oxygen_ros.engine.families.loader import init_model
    from oxygen_ros.engine.model.tokenizer import build_tiny_tokenizer

    mc = PRESETS["tiny"]
    return Engine(mc, EngineConfig(), model=init_model(mc, seed=0), tokenizer=build_tiny_tokenizer(512))


@pytest.mark.parametrize("knob", ENGINE_KNOBS, ids=lambda k: k.field)
def test_a_running_engine_takes_exactly_the_live_knobs(knob, tiny_engine):
    """validate_changes (what the node's parameter callback asks) refuses a change of exactly
    the knobs declared not live, with that reason."""
    value = _another_value(knob)
    changes = {knob.field: value}
    if knob.field == "k_min":  # k_min <= k under a target: keep the change valid on its own
        changes = {"k_min": 2}
    try:
        tiny_engine.validate_changes(**changes)
        refusal = ""
    except ValueError as exc:
        refusal = str(exc)
    assert ("cannot change while the engine runs" in refusal) == (not knob.live), (changes, refusal)
    if knob.live:
        assert refusal == "", (changes, refusal)


@pytest.mark.parametrize("knob", [k for k in ENGINE_KNOBS if k.range], ids=lambda k: k.field)
def test_out_of_range_refused_with_the_range(knob):
    lo, hi = knob.range
    step = 1 if knob.type is int else 0.5
    bad = [lo - step] + ([hi + step] if hi is not None else [])
    for value in bad:
        with pytest.raises(ValueError) as exc:
            EngineConfig(**{knob.field: knob.type(value)})
        assert knob.field in str(exc.value) and range_text(knob.range) in str(exc.value)
    EngineConfig(**{knob.field: knob.type(lo)})
    if knob.type is float:
        with pytest.raises(ValueError, match=knob.field):
            EngineConfig(**{knob.field: float("nan")})


@pytest.mark.parametrize("knob", [k for k in ENGINE_KNOBS if k.choices], ids=lambda k: k.field)
def test_choices_refused_with_the_choices(knob):
    bad = "nope" if knob.type is str else 3
    with pytest.raises(ValueError, match=f"{knob.field} must be one of"):
        EngineConfig(**{knob.field: bad})


def test_types_are_checked():
    with pytest.raises(ValueError, match="decode_steps_per_frame .k. must be an integer"):
        EngineConfig(decode_steps_per_frame=2.5)
    with pytest.raises(ValueError, match="compile_denoise must be true or false"):
        EngineConfig(compile_denoise=1)
    with pytest.raises(ValueError, match="rtc_max_guidance must be a number"):
        EngineConfig(rtc_max_guidance=True)


def test_the_node_range_lies_inside_the_engine_range():
    """What the node accepts, the engine accepts: no parameter set live fails in the engine."""
    for k in ENGINE_KNOBS:
        if k.param_range:
            lo, hi = k.param_range
            assert k.reason(k.type(lo)) is None and k.reason(k.type(hi)) is None, k.field


def test_a_knob_declared_twice_is_refused():
    a = Knob("x", int, 1, "x", param="p")
    with pytest.raises(ValueError, match="declared twice"):
        knob_table((a, Knob("y", int, 1, "y", param="p")))
    with pytest.raises(ValueError, match="default refused"):
        Knob("z", int, 0, "z", (1, 4))


def _string_literals(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            values = [e.value for e in node.elts if isinstance(e, ast.Constant)
                      and isinstance(e.value, str)]
            if len(values) >= 2:
                yield node.lineno, set(values)


def test_mode_dtype_and_preset_lists_are_written_once():
    """Only the configuration modules spell the mode and dtype names out as a list, each once
    (engine/config/engine_config.py the modes, engine/config/model_config.py the dtypes); the presets are never
    listed; everything else in oxygen_ros/ takes them from there (a second list drifts when one
    is extended)."""
    owners = {"modes": PACKAGE / "engine" / "config" / "engine_config.py",
              "dtypes": PACKAGE / "engine" / "config" / "model_config.py"}
    found: dict[str, list[str]] = {"modes": [], "dtypes": [], "presets": []}
    for path in sorted(PACKAGE.rglob("*.py")):
        for line, values in _string_literals(ast.parse(path.read_text())):
            for name, names in (("modes", set(MODES)), ("dtypes", set(DTYPES)),
                                ("presets", set(PRESETS))):
                if values >= names:
                    found[name].append(f"{path.relative_to(PACKAGE)}:{line}")
    for name, owner in owners.items():
        assert len(found[name]) == 1 and found[name][0].startswith(
            str(owner.relative_to(PACKAGE)) + ":"), (name, found[name])
    assert not found["presets"], found["presets"]


# -- the tools' flags --------------------------------------------------------------------------
def test_demo_and_replay_flags_follow_the_knobs(capsys):
    from oxygen_ros.cli import demo
    from oxygen_ros.cli import replay as replay_cli
    from oxygen_ros.bench.args import dest
    from oxygen_ros.cli.engine_args import FLAG_KNOBS, engine_config

    args = demo.parse_args([])
    assert engine_config(args) == EngineConfig()  # every flag's default is its knob's
    for k in FLAG_KNOBS:
        assert getattr(args, dest(k)) == k.default
        assert getattr(replay_cli.parse_args(["bag"]), dest(k)) == k.default
    assert engine_config(demo.parse_args(["--k", "7", "--rtc-max-guidance", "2.5", "--compile"])
                         ) == EngineConfig(decode_steps_per_frame=7, rtc_max_guidance=2.5,
                                           compile_denoise=True)
    for argv, words in ((["--k", "0"], "decode_steps_per_frame (k) must be in [1, 1024]"),
                        (["--memory-every", "-1"], ">= 0"), (["--mode", "fast"], "invalid choice")):
        with pytest.raises(SystemExit):
            demo.parse_args(argv)
        assert words in capsys.readouterr().err


def test_bench_flags_follow_the_knobs():
    from oxygen_ros.cli import bench as cli

    a = cli.parse_args(["--quick"])
    assert (a.max_active, a.device, a.dtype, a.attention_backend, a.compile, a.linear_layout,
            a.seed) == tuple(KNOBS[f].default for f in (
                "max_active_requests", "device", "dtype", "attention_backend", "compile_denoise",
                "linear_layout", "seed"))
    assert tuple(a.modes) == MODES


def test_replay_node_flags_default_to_the_node_parameters():
    """oxygen-replay's node settings (bags/ does not import node/) keep the node's defaults."""
    from oxygen_ros.cli import replay as replay_cli
    from oxygen_ros.node import params as P

    args = vars(replay_cli.parse_args(["bag"]))
    for name in ("stamp_tolerance_s", "max_stamp_offset_s", "control_rate_hz", "crossfade_s",
                 "chunk_blend", "observation_timeout_s", "joint_velocity_limits",
                 "joint_acceleration_limits", "max_start_deviation", "max_tracking_error"):
        assert args[name] == P.SPECS[name].default, name
    assert P.SPECS["chunk_blend"].choices == ("crossfade", "rtc", "none")
