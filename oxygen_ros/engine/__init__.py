"""The oxygen engine: model, unified KV cache, scheduler, runner. Never imports rclpy."""
