"""Recovery after a restart: replayed messages, resumed tasks and crash-cut tool calls."""
