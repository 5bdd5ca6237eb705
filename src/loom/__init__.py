"""Loom: a deep-learning training and serving platform."""

__version__ = "0.1.0"
