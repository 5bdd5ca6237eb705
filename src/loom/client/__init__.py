"""The Python SDK over HTTP. The CLI and the tests use it; it never imports the platform."""

from loom.client.http import ClientError, LoomClient

__all__ = ["ClientError", "LoomClient"]
