"""The one Settings object: the URL learners and the CLI use to reach the API."""

from __future__ import annotations

from loom.settings import Settings


def test_api_url_is_loopback_when_listening_everywhere() -> None:
    """A server bound to every address is reached on loopback; a public URL wins."""
    assert Settings(host="0.0.0.0", port=9000).api_url == "http://127.0.0.1:9000"
    assert Settings(host="10.1.2.3", port=9000).api_url == "http://10.1.2.3:9000"
    assert Settings(public_url="https://loom.example").api_url == "https://loom.example"
