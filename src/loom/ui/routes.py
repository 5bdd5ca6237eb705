"""`/ui/`: the built page and its assets, with headers that keep the page to its own origin
(no inline script, no framing, nothing fetched from elsewhere). `/` sends a browser there."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse, Response

router = APIRouter(include_in_schema=False)

# ECharts sizes its canvases with inline styles; nothing else is inline.
POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; connect-src 'self'; font-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
ASSETS = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
NOT_BUILT = """<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Loom</title>
</head><body><main><h1>Loom's web UI was not built</h1><p>This installation has no built UI.
From a source checkout run <code>make ui</code> (it needs Node.js and npm); the API works
without it.</p></main></body></html>"""


def static_dir() -> Path:
    return Path(str(files("loom.ui"))) / "static"


@router.get("/")
def root(request: Request) -> Response:
    """A browser goes to the UI; anything else learns where the API is."""
    if "text/html" in request.headers.get("accept", ""):
        return RedirectResponse("/ui/", status_code=307)
    return Response(
        '{"name": "Loom", "ui": "/ui/", "api": "/v1", "docs": "/docs"}',
        media_type="application/json",
    )


@router.get("/ui")
def ui_without_slash() -> Response:
    return RedirectResponse("/ui/", status_code=307)


@router.get("/ui/")
def page() -> Response:
    index = static_dir() / "index.html"
    if not index.is_file():
        return HTMLResponse(NOT_BUILT, status_code=503, headers=HEADERS)
    return FileResponse(
        index, media_type="text/html", headers={**HEADERS, "Cache-Control": "no-cache"}
    )


@router.get("/ui/{name}")
def asset(name: str) -> Response:
    """A built asset: a plain file name of the static folder (no folders, nothing hidden)."""
    path = static_dir() / name
    kind = ASSETS.get(path.suffix)
    if kind is None or "/" in name or name.startswith(".") or not path.is_file():
        return Response('{"error": "no such file"}', 404, media_type="application/json")
    return FileResponse(path, media_type=kind, headers={**HEADERS, "Cache-Control": "no-cache"})
