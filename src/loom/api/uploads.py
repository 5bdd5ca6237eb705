"""Multipart uploads: a manifest-like YAML part and a zip, read with their limits."""

from __future__ import annotations

from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request

from loom.domain.errors import InvalidInput, ManifestError, PayloadTooLarge
from loom.settings import Settings


async def spec_and_code(
    request: Request, settings: Settings, part: str
) -> tuple[bytes, bytes | None]:
    """A multipart upload's YAML part `part` (required, within LOOM_MAX_MANIFEST_BYTES) and
    its `model_definition` zip, unchecked (None if missing)."""
    text, code, _ = await spec_code_and(request, settings, part, ())
    return text, code


async def spec_code_and(
    request: Request, settings: Settings, part: str, extras: tuple[str, ...]
) -> tuple[bytes, bytes | None, dict[str, bytes | None]]:
    """As `spec_and_code`, with more small parts (`extras`, each within the manifest's limit)."""
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidInput(
            f"send multipart/form-data with the parts `{part}` and `model_definition`"
        )
    limit = settings.max_upload_mb * 2**20
    async with request.form(max_part_size=limit) as form:
        text = await form_part(form, part, settings.max_manifest_bytes)
        code = await form_part(form, "model_definition")
        more = {name: await form_part(form, name, settings.max_manifest_bytes) for name in extras}
    if text is None:
        raise ManifestError(f"the request has no `{part}` part", field=part)
    check_manifest_size(text, settings.max_manifest_bytes, part)
    for name, value in more.items():
        if value is not None:
            check_manifest_size(value, settings.max_manifest_bytes, name)
    return text, code, more


async def form_part(form: Any, name: str, limit: int = -1) -> bytes | None:
    """A part's bytes; with a `limit`, no more than one byte past it are read."""
    value = form.get(name)
    if value is None:
        return None
    if isinstance(value, UploadFile):
        return await value.read(limit + 1 if limit >= 0 else -1)
    return str(value).encode()


def check_manifest_size(text: bytes, limit: int, part: str = "manifest") -> None:
    if len(text) > limit:
        raise PayloadTooLarge(
            f"{part}: larger than the limit of {limit:,} bytes (LOOM_MAX_MANIFEST_BYTES); "
            "a manifest is a few KiB of YAML, code and data go elsewhere"
        )


def multipart_body(part: str, description: str, code: str) -> dict[str, Any]:
    """The OpenAPI request body of such an upload: the YAML part and the code's zip (the body
    is read by hand, so that limits apply before parsing: its shape is declared here)."""
    return {
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "required": [part, "model_definition"],
                        "properties": {
                            part: {"type": "string", "description": description},
                            "model_definition": {
                                "type": "string",
                                "format": "binary",
                                "description": code,
                            },
                        },
                    }
                }
            },
        }
    }
