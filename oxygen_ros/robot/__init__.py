"""What the robot is sent, without ROS: shared by the node (oxygen_ros.node) and oxygen-replay
(oxygen_ros.bags), so that a replay shows exactly what the robot would have received.

- pairing: camera / joint-state mailboxes and the Pairer (one observation per inferred frame)
- images: camera messages (raw, jpeg / png) checked cheaply on arrival, decoded once per frame
- input_health: a topic's received rate, losses and stamp lag over the last seconds
- values: joint vectors, StateMapping, camera placement (message fields as plain values)
- chunk_player: action chunks -> a fixed-rate command stream (chunk blending)
- shaper: command shaping (velocity / acceleration limits, start from the measured pose, gate)
- rtc_prior, seam: real-time chunking's executed steps, and the seam error between chunks
- rates: rates over the last seconds (diagnostics)

Nothing here imports rclpy or message packages.
"""
