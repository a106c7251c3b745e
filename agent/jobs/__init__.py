"""Work beside the conversation: background processes and sub-agents (with the spawn tool)."""
