"""What the robot is sent, without ROS: shared by the node (oxygen_ros.node) and oxygen-replay
(oxygen_ros.bags), so that a replay shows exactly what the robot would have received.

- pairing: camera / joint-state mailboxes and the Pairer (one observation per inferred frame)
- images: camera messages (raw, jpeg / png) checked cheaply on arrival, decoded once per frame
- input_health: a topic's received rate, losses and stamp lag over the last seconds
- interface: the robot's state values and commands (names, kinds: position, delta, velocity)
- values: state vectors read by name, StateMapping, camera placement (message fields as plain
  values)
- command_config: the command path's one immutable configuration, and THE joint-limit clip
- chunk_player: action chunks (on their own time axis) -> a fixed-rate command stream (chunk
  blending, interpolation between steps)
- shaper: command shaping (velocity / acceleration limits per elapsed time, start from the
  measured pose, restarts from the last command, measured-pose jumps, gate)
- command_guard: the last check of a command before it is published
- deadman: the operator's heartbeat (a release wins, a second publisher holds)
- rtc_prior, seam: real-time chunking's executed steps, and the seam error between chunks
- rates: rates over the last seconds (diagnostics)

Nothing here imports rclpy or message packages.
"""
