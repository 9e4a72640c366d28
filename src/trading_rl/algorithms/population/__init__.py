"""N SB3 SAC(+ICM) agents updated as one batched population."""
