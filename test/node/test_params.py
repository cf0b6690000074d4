"""Parameter table and validation, without spinning a node."""
import pytest

from oxygen_ros.node import params as P
from oxygen_ros.robot.threads import allowed_cpus

CURRENT = {s.name: s.default for s in P.PARAMETERS}


def test_names_and_defaults_are_valid():
    assert len(P.SPECS) == len(P.PARAMETERS)
    for spec in P.PARAMETERS:
        assert spec.description
        assert P.validate_value(spec, spec.default) is None, spec.name


def test_required_parameters_declared():
    need = {"decode_steps_per_frame", "max_decode_steps", "denoise_steps", "max_active_requests",
            "mode", "memory.enabled", "memory.every_n_frames", "memory.prompt", "instruction",
            "control_rate_hz", "observation_timeout_s", "camera_topics", "joint_state_topic",
            "joint_names", "joint_limits_lower", "joint_limits_upper", "stamp_tolerance_s",
            "model.preset", "model.checkpoint", "model.device", "model.dtype", "autostart"}
    assert need <= set(P.SPECS)
    assert P.SPECS["decode_steps_per_frame"].range == (1, 64)
    assert P.SPECS["max_decode_steps"].range == (1, 512)
    assert P.SPECS["denoise_steps"].range == (1, 100)
    assert P.SPECS["max_active_requests"].range == (1, 256)
    assert P.SPECS["control_rate_hz"].range == (1, 1000)
    assert P.SPECS["camera_topics"].default == ["/camera/image_raw"]
    assert P.SPECS["joint_state_topic"].default == "/joint_states"


def test_choices_match_the_engine():
    from oxygen_ros.engine.config import DTYPES, MODES, RUNNABLE_PRESETS

    assert set(P.SPECS["mode"].choices) == set(MODES)
    assert set(P.SPECS["model.preset"].choices) == set(RUNNABLE_PRESETS)
    assert "starvla-tiny-e4" in P.SPECS["model.preset"].choices  # the engine runs StarVLA heads
    assert set(P.SPECS["model.dtype"].choices) == set(DTYPES)


@pytest.mark.parametrize("changes, words", [
    ({"mode": "fast"}, ["mode must be one of", "oxygen"]),
    ({"decode_steps_per_frame": 0}, ["decode_steps_per_frame", "[1, 64]"]),
    ({"decode_steps_per_frame": 65}, ["[1, 64]"]),
    ({"max_decode_steps": 513}, ["max_decode_steps", "[1, 512]"]),
    ({"denoise_steps": 0}, ["denoise_steps"]),
    ({"max_active_requests": 1000}, ["max_active_requests"]),
    ({"decode_steps_per_frame": 2.5}, ["must be a int"]),
    ({"instruction": "  "}, ["instruction must not be empty"]),
    ({"control_rate_hz": 0.5}, ["control_rate_hz"]),
    ({"observation_timeout_s": float("nan")}, ["finite"]),
    ({"autostart": True}, ["read-only"]),
    ({"joint_limits_lower": [0.0] * 6}, ["joint_limits_upper", "both"]),
    ({"joint_limits_lower": [0.0] * 5, "joint_limits_upper": [1.0] * 5}, ["5 entries for 6"]),
    ({"joint_limits_lower": [1.0] * 6, "joint_limits_upper": [0.0] * 6}, ["joint_limits_lower >"]),
    ({"model.device": "tpu"}, ["model.device"]),
    ({"joint_names": ["a", "a"]}, ["duplicates"]),
    # the command shaper's parameters
    ({"joint_velocity_limits": [1.0] * 5}, ["joint_velocity_limits has 5 entries", "one per joint (6)"]),
    ({"joint_velocity_limits": [1.0, -1.0, 1.0, 1.0, 1.0, 1.0]}, ["joint_velocity_limits must be > 0"]),
    ({"joint_velocity_limits": [0.0]}, ["joint_velocity_limits must be > 0"]),
    ({"joint_velocity_limits": [float("nan")]}, ["finite"]),
    ({"joint_acceleration_limits": [0.0] * 6}, ["joint_acceleration_limits must be > 0"]),
    ({"joint_acceleration_limits": [2.0, 3.0]}, ["2 entries"]),
    ({"max_start_deviation": [-0.1]}, ["max_start_deviation must be >= 0"]),
    ({"max_start_deviation": [float("inf")]}, ["finite"]),
    # issue 26: a limit whose per-tick step underflows (a x dt^2 = 0) is refused, not NaN later
    ({"joint_acceleration_limits": [5e-324]}, ["joint_acceleration_limits", "per control tick",
                                               "at 50 Hz"]),
    ({"joint_velocity_limits": [1e-12]}, ["joint_velocity_limits", "per control tick"]),
    ({"control_rate_hz": 1000.0, "joint_acceleration_limits": [1e-7]}, ["at 1000 Hz"]),
    ({"max_tracking_error": [0.0]}, ["max_tracking_error must be > 0"]),
    ({"max_tracking_error": [0.1, 0.2]}, ["max_tracking_error has 2 entries"]),
    ({"deadman.timeout_s": 0.0}, ["deadman.timeout_s"]),
    ({"command_type": "trajectory"}, ["command_type must be one of", "float64_array"]),
    ({"chunk_rate_hz": -1.0}, ["chunk_rate_hz", "[0, 1000]"]),
    # thread affinities: integers, CPUs this process may run on, no duplicates
    ({"inference_cpus": [0.0]}, ["inference_cpus must be a int_array"]),
    ({"inference_cpus": [True]}, ["inference_cpus must be a int_array"]),
    ({"control_cpus": [100_000]}, ["control_cpus: CPU 100000 is not one this process may run on"]),
    ({"control_cpus": [0, 0]}, ["control_cpus has duplicates"]),
    # a joint_names change re-checks the limits' length (while unconfigured)
    ({"joint_names": ["a", "b"], "joint_velocity_limits": [1.0] * 6}, ["6 entries", "(2)"]),
])
def test_invalid_values_rejected_with_reasons(changes, words):
    reason = P.validate(changes, CURRENT, configured=False)
    assert reason is not None
    for w in words:
        assert w in reason, reason


def test_valid_live_changes_accepted_in_any_state():
    for configured in (False, True):
        assert P.validate({"decode_steps_per_frame": 2, "mode": "shared", "max_decode_steps": 24,
                           "denoise_steps": 5, "memory.enabled": False,
                           "joint_limits_lower": [-1.0] * 6, "joint_limits_upper": [1.0] * 6},
                          CURRENT, configured) is None


@pytest.mark.parametrize("name, value", [
    ("model.preset", "small"), ("model.checkpoint", "/x"), ("model.device", "cuda"),
    ("camera_topics", ["/a"]), ("joint_state_topic", "/j"), ("joint_names", ["a"]),
    ("control_rate_hz", 100.0), ("kv.num_blocks", 10), ("inference_cpus", [min(allowed_cpus())]), ("control_cpus", []),
])
def test_configure_time_parameters_rejected_while_configured(name, value):
    reason = P.validate({name: value}, CURRENT, configured=True)
    assert reason and "configure" in reason and "cleanup" in reason
    if name != "joint_names":
        assert P.validate({name: value}, CURRENT, configured=False) is None


def test_engine_changes_mapping():
    assert P.engine_changes({"decode_steps_per_frame": 2, "mode": "shared"}) == {
        "decode_steps_per_frame": 2, "mode": "shared"}
    assert P.engine_changes({"memory.enabled": False, "memory.every_n_frames": 3}) == {
        "memory_every_n_frames": 0}
    assert P.engine_changes({"memory.enabled": True, "memory.every_n_frames": 3,
                             "memory.prompt": "m"}) == {"memory_every_n_frames": 3, "memory_prompt": "m"}
    assert P.engine_changes({"target_action_hz": 12, "k_min": 2, "target_strict": True}) == {
        "target_action_hz": 12.0, "k_min": 2, "target_strict": True}
    assert {"target_action_hz", "k_min", "target_strict"} <= set(P.ENGINE_KEYS)
    assert P.SPECS["target_action_hz"].range == (0.0, 1000.0)
    assert P.validate({"target_action_hz": -1.0}, CURRENT, configured=True)
    # k_min above k under a target: EngineConfig (the engine's validate_changes) refuses it
    from oxygen_ros.engine.config import EngineConfig

    with pytest.raises(ValueError, match="k_min"):
        EngineConfig(**P.engine_changes({**CURRENT, "target_action_hz": 10.0, "k_min": 8,
                                         "decode_steps_per_frame": 4}))
    # every engine change is accepted by EngineConfig
    EngineConfig(**P.engine_changes(CURRENT))


def test_engine_fields_include_the_configure_time_knobs():
    """build() makes its EngineConfig from every engine parameter; live changes carry only the
    live ones (a running engine refuses the rest)."""
    values = {"model.device": "cpu", "model.dtype": "bfloat16", "kv.num_blocks": 7,
              "decode_steps_per_frame": 2, "joint_names": ["a"]}
    assert P.engine_fields(values) == {"device": "cpu", "dtype": "bfloat16", "num_blocks": 7,
                                       "decode_steps_per_frame": 2}
    assert P.engine_changes(values) == {"decode_steps_per_frame": 2}


def test_rtc_parameters_reach_the_engine_and_player_settings():
    from oxygen_ros.engine.config import RTC_JACOBIANS, RTC_METHODS
    from oxygen_ros.robot.command_config import BLENDS

    assert P.SPECS["chunk_blend"].choices == BLENDS and P.SPECS["chunk_blend"].default == "crossfade"
    assert P.SPECS["rtc.method"].choices == RTC_METHODS
    assert P.SPECS["rtc.jacobian"].choices == RTC_JACOBIANS
    assert P.engine_changes({"rtc.method": "inpaint", "rtc.jacobian": "vjp", "rtc.max_guidance": 5,
                             "rtc.execution_horizon": 8}) == {
        "rtc_method": "inpaint", "rtc_jacobian": "vjp", "rtc_max_guidance": 5.0,
        "rtc_execution_horizon": 8}
    assert {"rtc.method", "rtc.jacobian", "rtc.max_guidance", "rtc.execution_horizon"} <= set(P.ENGINE_KEYS)
    assert "chunk_blend" not in P.ENGINE_KEYS  # the player's, not the engine's
    assert P.validate({"chunk_blend": "smooth"}, CURRENT, configured=True)
    assert P.validate({"rtc.max_guidance": -1.0}, CURRENT, configured=True)
    assert P.validate({"chunk_blend": "rtc", "rtc.jacobian": "vjp"}, CURRENT, configured=True) is None


@pytest.mark.ros
def test_descriptors_build():
    pytest.importorskip("rcl_interfaces")
    d = P.descriptor(P.SPECS["decode_steps_per_frame"])
    assert d.integer_range[0].from_value == 1 and d.integer_range[0].to_value == 64
    d = P.descriptor(P.SPECS["control_rate_hz"])
    assert d.floating_point_range[0].to_value == 1000.0
    assert P.descriptor(P.SPECS["autostart"]).read_only
    assert "oxygen" in P.descriptor(P.SPECS["mode"]).additional_constraints


def test_shaper_parameters_live_one_value_or_one_per_joint():
    for configured in (False, True):
        assert P.validate({"joint_velocity_limits": [1.0], "joint_acceleration_limits": [2.0] * 6,
                           "max_start_deviation": [0.0, 0.5, 0.5, 0.5, 0.5, 0.5],
                           "deadman.timeout_s": 0.2}, CURRENT, configured) is None
        assert P.validate({"joint_velocity_limits": []}, CURRENT, configured) is None
        assert P.validate({"max_tracking_error": [0.1] * 6}, CURRENT, configured) is None
        assert P.validate({"max_tracking_error": []}, CURRENT, configured) is None  # off
    assert "configure" in P.validate({"deadman.topic": "/x"}, CURRENT, configured=True)
    assert "configure" in P.validate({"command_type": "float64_array"}, CURRENT, configured=True)


def test_engine_parameters_come_from_the_knob_table():
    """Name, default, meaning, live / configure and field of every engine parameter are its
    Knob's; the range is the node's (param_range) where the knob narrows it for a robot."""
    from oxygen_ros.engine.config import ENGINE_KNOBS

    knobs = [k for k in ENGINE_KNOBS if k.param]
    assert {k.param for k in knobs} == {s.name for s in P.PARAMETERS if s.field}
    for k in knobs:
        s = P.SPECS[k.param]
        assert (s.default, s.field, s.choices) == (k.default, k.field, k.choices)
        assert s.range == (k.param_range or k.range) and k.description in s.description
        assert s.kind == (P.LIVE if k.live else P.CONFIGURE)
    assert set(P.ENGINE_KEYS) == {k.param for k in knobs if k.live} | {"memory.enabled"}


@pytest.mark.ros
def test_every_live_parameter_is_applied_on_a_running_node():
    """A live parameter reaches the engine (by its field) or a LIVE_APPLIERS entry: one added to
    the table without either would be accepted and silently do nothing."""
    pytest.importorskip("rclpy")
    from oxygen_ros.node.oxygen_node import LIVE_APPLIERS

    applied = set(P.ENGINE_KEYS) | {n for names, _ in LIVE_APPLIERS for n in names}
    live = {s.name for s in P.PARAMETERS if s.kind == P.LIVE}
    assert live - applied == set()
    assert applied - live == set()  # nothing applies a parameter that is not live


def test_every_command_key_reaches_the_command_config():
    """A change of any COMMAND_KEYS parameter changes the CommandConfig built from the full
    map (none is left out of it), and the map's other values are all carried."""
    base = {**CURRENT, "joint_limits_lower": [-1.0] * 6, "joint_limits_upper": [1.0] * 6}
    ref = P.command_config(base, 0.02, 0.005)
    other = {"joint_limits_lower": [-0.5] * 6, "joint_limits_upper": [0.5] * 6, "crossfade_s": 0.3,
             "observation_timeout_s": 2.0, "max_stamp_offset_s": 5.0, "chunk_blend": "rtc",
             "joint_velocity_limits": [2.0], "joint_acceleration_limits": [20.0],
             "max_start_deviation": [0.3], "max_tracking_error": [0.05], "chunk_skip_latency": False,
             "chunk_execution": "sync", "chunk_replan_steps": 8}
    assert set(other) == set(P.COMMAND_KEYS)
    for key, value in other.items():
        changed = P.command_config({**base, key: value}, 0.02, 0.005)
        assert changed != ref, key
        # everything is what the map says (nothing reset: the limits stay whatever is changed)
        m = {**base, key: value}
        assert (changed.lower, changed.upper, changed.blend, changed.velocity_limits) == (
            tuple(m["joint_limits_lower"]), tuple(m["joint_limits_upper"]), m["chunk_blend"],
            tuple(m["joint_velocity_limits"]))


def test_chunk_step_from_the_parameter_the_checkpoint_or_the_control_rate():
    p = {**CURRENT, "control_rate_hz": 200.0}
    assert P.chunk_step_s(p, None) == 1 / 200.0
    assert P.chunk_step_s(p, 50.0) == 1 / 50.0
    assert P.chunk_step_s({**p, "chunk_rate_hz": 25.0}, 50.0) == 1 / 25.0


LIBERO = {"state_names": ["eef_x", "eef_y", "eef_z", "eef_rx", "eef_ry", "eef_rz", "finger_l",
                          "finger_r"],
          "command_names": ["eef_x", "eef_y", "eef_z", "eef_rx", "eef_ry", "eef_rz", "gripper"],
          "command_kinds": ["velocity"] * 6 + ["position"], "command_type": "float64_array"}


@pytest.mark.parametrize("changes, words", [
    ({"command_kinds": ["torque"]}, ["command_kinds ['torque'] unknown", "velocity"]),
    ({"command_kinds": ["position", "delta"]}, ["command_kinds has 2 entries for 6"]),
    ({"command_names": ["grip"], "command_kinds": ["delta"]}, ["delta commands ['grip']"]),
    ({"state_names": ["a", "a"]}, ["state_names names ['a'] more than once"]),
    ({"state_names": ["j:speed"]}, ["state name 'j:speed'"]),
    ({**LIBERO, "command_type": "joint_state"}, ["mix positions and velocities", "float64_array"]),
    # the limits follow the commands, not the joints
    ({**LIBERO, "joint_velocity_limits": [1.0] * 6}, ["6 entries", "(7)"]),
    ({**LIBERO, "joint_limits_lower": [-1.0] * 6, "joint_limits_upper": [1.0] * 6},
     ["6 entries for 7 commands"]),
])
def test_robot_interface_parameters_refused_with_reasons(changes, words):
    """Issue 38, item 2: state_names / command_names / command_kinds are checked where they
    enter, with the reason."""
    reason = P.validate(changes, CURRENT, configured=False)
    assert reason is not None
    for w in words:
        assert w in reason, reason


def test_a_libero_shaped_robot_is_accepted_and_builds_its_command_config():
    assert P.validate({**LIBERO, "joint_velocity_limits": [0.5] * 7,
                       "joint_limits_lower": [-1.0] * 7, "joint_limits_upper": [1.0] * 7},
                      CURRENT, configured=False) is None
    values = {**CURRENT, **LIBERO}
    cfg = P.command_config(values, 0.05, 0.05)
    assert cfg.num_joints == 7 and cfg.rates == (True,) * 6 + (False,)
    assert cfg.measured == (False,) * 7  # no command has a state value of its name
    # a joint robot keeps today's configuration: no kinds, every command measured
    joint = P.command_config(CURRENT, 0.02, 0.02)
    assert joint.num_joints == 6 and joint.rates == () and joint.measured == ()
