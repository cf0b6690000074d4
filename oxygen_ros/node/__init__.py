"""ROS 2 lifecycle node around the engine (thin layer), split into parts with one job each.

What the robot is sent (pairing, chunk player, value conversions) lives in the ROS-free
oxygen_ros.robot layer, shared with oxygen-replay. Pure modules here (no rclpy): questions,
build (engine types only), params (table + validation; rclpy only inside its glue functions).
ROS-aware: conversions (the only module that knows both ROS message types and engine types),
inputs, text, publishers, control_loop, diagnostics, inference_worker (engine types, no message
types), oxygen_node (the lifecycle class wiring them), main. Importing this package does not
import rclpy.
"""
