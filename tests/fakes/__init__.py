"""Fake model servers for tests: real HTTP on 127.0.0.1 with switchable faults (see base.py)."""
