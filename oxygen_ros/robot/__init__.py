"""What the robot is sent, without ROS: shared by the node (oxygen_ros.node) and oxygen-replay
(oxygen_ros.bags), so that a replay shows exactly what the robot would have received.

- pairing: camera / joint-state mailboxes and the Pairer (one observation per inferred frame)
- values: image decode, joint vectors, StateMapping (message fields as plain values)
- chunk_player: action chunks -> a fixed-rate command stream
- rates: rates over the last seconds (diagnostics)

Nothing here imports rclpy or message packages.
"""
