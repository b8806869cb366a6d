"""Property-based fuzzing of gradient parity between eager PyTorch and thunderfx under activation checkpointing."""
