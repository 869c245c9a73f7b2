"""Fixtures: a store made by the previous version, and the script that writes one."""
