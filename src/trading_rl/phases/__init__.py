"""Phase orchestration: turns domain objects into one phase's work."""
