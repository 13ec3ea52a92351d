"""Baselines the learners are compared with (batch or simpler online methods)."""
