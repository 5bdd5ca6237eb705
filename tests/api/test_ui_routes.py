"""The web UI's page and assets as the API server serves them: a browser at `/` is sent to
`/ui/`; the page and assets carry a policy that keeps them to their own origin; nothing but a
built asset's plain name is served."""

from __future__ import annotations

import httpx
import pytest

from loom.ui.routes import static_dir
from tests.conftest import Server

pytestmark = pytest.mark.integration


def test_the_page_its_assets_and_their_headers(server: Server) -> None:
    http = httpx.Client(base_url=server.url)
    browser = http.get("/", headers={"Accept": "text/html,application/xhtml+xml"})
    assert browser.status_code == 307 and browser.headers["location"] == "/ui/"
    assert http.get("/", headers={"Accept": "application/json"}).json()["ui"] == "/ui/"
    page = http.get("/ui/")
    policy = page.headers["content-security-policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-frame-options"] == "DENY"
    if (static_dir() / "index.html").is_file():  # built (`make ui`, as `make test` does)
        assert page.status_code == 200 and "/ui/app.js" in page.text
        script = http.get("/ui/app.js")
        assert script.status_code == 200
        assert script.headers["content-type"].startswith("text/javascript")
        assert "script-src 'self'" in script.headers["content-security-policy"]
    else:
        assert page.status_code == 503 and "make ui" in page.text
    for name in ("..%2Floom.db", ".env", "index.py", "nope.js", "%2Fetc%2Fpasswd"):
        assert http.get(f"/ui/{name}").status_code == 404, name
    assert http.get("/ui/../loom.db").status_code == 404
