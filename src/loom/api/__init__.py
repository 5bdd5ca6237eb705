"""The REST API: a FastAPI app built by `create_app(settings)`, one router per resource."""

from loom.api.app import create_app

__all__ = ["create_app"]
