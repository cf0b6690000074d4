"""Bags: evaluate a recorded run (oxygen-eval), replay recorded inputs offline (oxygen-replay),
record without `ros2 bag` (node/recorder.py uses `typestore`).

Everything here reads and writes rosbag2 (MCAP, sqlite3) and bare .mcap files with `rosbags`;
nothing imports rclpy.
"""
