"""Fakes for offline tests: real servers on 127.0.0.1 that stand in for model providers."""
