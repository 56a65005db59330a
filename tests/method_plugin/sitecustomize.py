"""Loads the test's added method into every `mqctl serve` started with this directory on PYTHONPATH."""

import set_config_value  # noqa: F401
