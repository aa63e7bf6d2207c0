"""Persistent storage of conversations."""
