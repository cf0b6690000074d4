"""The robot's state and commands as the model sees them: which named values make the state,
which the actions command and how (their kind). Pure (numpy, no rclpy); shared by the node and
the offline tools.

- State: `state_names`, each read by name from a JointState: `name` is its position,
  `name:velocity` / `name:effort` those fields. A robot whose state is not joints (an
  end-effector pose, gripper fingers) publishes them as named values of a JointState: the one
  common stamped message with named values, so the state pairs with the cameras by stamp.
- Commands: `command_names` are the first action dims, in action order, each of a kind:
  - ``position``: an absolute target (a joint position, an end-effector pose coordinate, a
    gripper opening). Interpolated between chunk steps; limits, start gate and restarts as
    docs/command-safety.md says.
  - ``delta``: relative to the state value of the same name at the observation (openpi's delta
    actions, LeRobot's relative actions: step i is state + action i). Made absolute when the
    chunk is mapped to robot units, against the state of the chunk's own observation, and from
    then on a ``position`` command: what is sent, clipped and limited is always the absolute
    target, so a late chunk never adds its offsets to a pose that moved meanwhile.
  - ``velocity``: a rate, sent as it is (joint velocities, or per-step increments a controller
    integrates, as LIBERO's end-effector deltas). Held over each chunk step (never
    interpolated as a position), 0 after the chunk's last step; every hold (stale, deadman,
    gate, end of a run) brings it to 0; the velocity limit bounds its magnitude and the
    acceleration limit its change per second.
A command with a state value of the same name (a ``position`` or ``delta`` command) has a
measured counterpart: commands start from it, restarts and the start gate compare with it. One
without (a gripper command beside two finger states) starts from the chunk's value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

POSITION, DELTA, VELOCITY = "position", "delta", "velocity"
KINDS = (POSITION, DELTA, VELOCITY)
STATE_FIELDS = ("position", "velocity", "effort")  # JointState fields a state value reads


def state_field(name: str) -> tuple[str, str]:
    """A state name -> (the JointState name, its field): `j1` -> (j1, position),
    `j1:velocity` -> (j1, velocity). ValueError for another field."""
    base, sep, field = name.partition(":")
    if not sep:
        return name, "position"
    if field not in STATE_FIELDS or not base:
        raise ValueError(f"state name {name!r}: give a JointState name, optionally with "
                         f":{' | :'.join(STATE_FIELDS)}")
    return base, field


def _names(what: str, names: Sequence[str]) -> tuple[str, ...]:
    out = tuple(str(n) for n in names)
    if not out:
        raise ValueError(f"{what} must name at least one value")
    if any(not n.strip() for n in out):
        raise ValueError(f"{what} must not contain empty names")
    dup = sorted({n for n in out if out.count(n) > 1})
    if dup:
        raise ValueError(f"{what} names {dup} more than once")
    return out


def check_sizes(num_state: int, num_commands: int, state_dim: int | None, action_dim: int | None,
                padded: int, labels: tuple[str, str] = ("state_names", "command_names")) -> None:
    """The checkpoint's state / action sizes against the state values and commands named: they
    must fit exactly (None: a preset, which names no sizes), and neither may exceed the model's
    padded action_dim. ValueError with the reason, naming the parameters as `labels` (state,
    commands) say."""
    if state_dim is not None and num_state != state_dim:
        raise ValueError(f"{num_state} {labels[0]} but the checkpoint's state has {state_dim} "
                         "values (normalisation statistics / input features): list exactly those, "
                         "in order")
    if action_dim is not None and num_commands != action_dim:
        raise ValueError(f"{num_commands} {labels[1]} but the checkpoint's actions have "
                         f"{action_dim} values: list exactly those, in order (command_kinds: "
                         "how each is sent)")
    if num_commands > padded:
        raise ValueError(f"{num_commands} {labels[1]} but the model has action_dim {padded}")
    if num_state > padded:
        raise ValueError(f"{num_state} {labels[0]} but the model takes at most {padded} state values")


@dataclass(frozen=True)
class RobotInterface:
    state_names: tuple[str, ...]
    command_names: tuple[str, ...]
    command_kinds: tuple[str, ...] = ()  # one per command, or one for all; () = all position

    def __post_init__(self) -> None:
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 - frozen: normalise once
        set_("state_names", _names("state_names", self.state_names))
        set_("command_names", _names("command_names", self.command_names))
        for name in self.state_names:
            state_field(name)
        n, kinds = len(self.command_names), tuple(self.command_kinds) or (POSITION,)
        if len(kinds) not in (1, n):
            raise ValueError(f"command_kinds has {len(kinds)} entries for {n} command_names: "
                             "give one kind per command, or one for all")
        bad = sorted({k for k in kinds if k not in KINDS})
        if bad:
            raise ValueError(f"command_kinds {bad} unknown: each is one of {', '.join(KINDS)}")
        kinds = kinds * n if len(kinds) == 1 else kinds
        set_("command_kinds", kinds)
        orphans = [c for c, k, i in zip(self.command_names, kinds, self.state_index)
                   if k == DELTA and i < 0]
        if orphans:
            raise ValueError(f"delta commands {orphans} are relative to the state value of the "
                             f"same name, but state_names {list(self.state_names)} has none")
        # per control tick (measured_commands): the measured commands and their state values
        cols = np.flatnonzero(self.measured)
        set_("_measured_cols", cols)
        set_("_measured_state", np.array(self.state_index, dtype=np.intp)[cols])
        # every command measured by the state value at its own index: the state as it is
        set_("_measured_identity", len(self.state_names) == n and cols.size == n
             and bool((self._measured_state == np.arange(n)).all()))

    @classmethod
    def from_params(cls, joint_names: Sequence[str], state_names: Sequence[str] = (),
                    command_names: Sequence[str] = (), command_kinds: Sequence[str] = ()
                    ) -> "RobotInterface":
        """The node's parameters: empty state_names / command_names = joint_names (a joint
        robot: the state and the commands are its joints' positions)."""
        return cls(tuple(state_names or joint_names), tuple(command_names or joint_names),
                   tuple(command_kinds))

    # -- derived --------------------------------------------------------------------------------
    @property
    def state_index(self) -> tuple[int, ...]:
        """Per command: the index of the state value of the same name (-1: none)."""
        index = {n: i for i, n in enumerate(self.state_names)}
        return tuple(index.get(c, -1) for c in self.command_names)

    @property
    def num_state(self) -> int:
        return len(self.state_names)

    @property
    def num_commands(self) -> int:
        return len(self.command_names)

    @property
    def rates(self) -> tuple[bool, ...]:
        """Per command: a rate (velocity kind): held per step, 0 when holding."""
        return tuple(k == VELOCITY for k in self.command_kinds)

    @property
    def measured(self) -> tuple[bool, ...]:
        """Per command: has a measured counterpart (a state value of the same name, not a rate)."""
        return tuple(i >= 0 and k != VELOCITY for i, k in zip(self.state_index, self.command_kinds))

    @property
    def joint_shaped(self) -> bool:
        """State and commands are the same joints' absolute positions (the joint robot): the
        joint limits may then also serve as the normalisation range of both."""
        return self.state_names == self.command_names and set(self.command_kinds) == {POSITION}

    @property
    def command_field(self) -> str:
        """The JointState field the commands go in: velocity when every command is one, else
        position (a mix of both is refused for JointState commands: `message_problem`)."""
        return "velocity" if all(self.rates) else "position"

    def message_problem(self, command_type: str) -> str | None:
        """Why commands of these kinds cannot go out as `command_type`, or None."""
        if command_type == "joint_state" and any(self.rates) and not all(self.rates):
            return ("command_type joint_state carries one JointState field (position or "
                    f"velocity) but command_kinds {list(self.command_kinds)} mix positions and "
                    "velocities: use command_type float64_array (the values in command order)")
        return None

    def check_model(self, state_dim: int | None, action_dim: int | None, padded: int,
                    labels: tuple[str, str] = ("state_names", "command_names")) -> None:
        """check_sizes of these names (ValueError with the reason)."""
        check_sizes(self.num_state, self.num_commands, state_dim, action_dim, padded, labels)

    # -- values ---------------------------------------------------------------------------------
    def measured_commands(self, state: np.ndarray | None) -> np.ndarray | None:
        """[state] robot units -> [commands]: each measured command's state value, NaN for the
        others (None stays None)."""
        if state is None:
            return None
        if self._measured_identity:
            return np.array(state, dtype=np.float64)
        out = np.full(self.num_commands, np.nan)
        out[self._measured_cols] = np.asarray(state, dtype=np.float64)[self._measured_state]
        return out

    def _offsets(self, state: Any) -> np.ndarray | None:
        """[commands] the state value each delta command is relative to (0 for the others);
        None without delta commands."""
        if DELTA not in self.command_kinds:
            return None
        if state is None:
            raise ValueError("delta commands need the observation's state")
        s = np.asarray(state, dtype=np.float64)
        return np.array([s[i] if k == DELTA else 0.0
                         for i, k in zip(self.state_index, self.command_kinds)])

    def absolute(self, chunk: np.ndarray, state: Any) -> np.ndarray:
        """[steps, commands] robot units: delta commands made absolute against the state of the
        chunk's observation (the others as they are)."""
        off = self._offsets(state)
        a = np.asarray(chunk)
        return a if off is None else (a + off).astype(a.dtype, copy=False)

    def relative(self, chunk: np.ndarray, state: Any) -> np.ndarray:
        """The inverse of `absolute` against `state` (real-time chunking hands executed steps
        back to the model relative to the new observation's state)."""
        off = self._offsets(state)
        a = np.asarray(chunk)
        return a if off is None else (a - off).astype(a.dtype, copy=False)
