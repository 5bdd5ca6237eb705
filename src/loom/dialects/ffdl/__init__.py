"""FfDL as its users have it: its REST API v1 (`routes`, under `/ffdl`), recognised on FfDL's
bare paths too (`recognise`), its error shape (`errors`), its credentials (`auth`). FfDL's
manifests are Loom's own manifest (`loom.domain.manifest`, `loom.domain.framework_versions`):
they need no translation here. FfDL's CLI verbs are `loom`'s (`loom.cli.ffdl`)."""

from __future__ import annotations

from loom.dialects.ffdl.recognise import RecogniseFfdlClients
from loom.dialects.ffdl.routes import PREFIX, router

__all__ = ["PREFIX", "RecogniseFfdlClients", "router"]
