"""The trial ledger and the one spending of the test split (final evaluation)."""
