"""The evolution-strategy baseline."""
