"""mqctl: controller, inspection and recovery tools for RocketMQ-style broker sets."""

__version__ = "0.1.0"
