"""ROS 2 lifecycle node around the engine (thin layer).

Pure modules (no rclpy): chunk_player, pairing. ROS-aware modules: conversions (the only module
that knows both ROS message types and engine types), params, oxygen_node, main.
Importing this package does not import rclpy.
"""
