"""A transformer in front of a deployment's predictor, as KServe places one: the caller's
request goes to the transformer's `preprocess`, what it made to the predictor, and the
predictor's answer to the transformer's `postprocess`, whose answer the caller gets.

The transformer is the owner's `kserve.Model` (`transformer.py`), run by replicas of its own
beside the predictor's, each in its sandbox and environment. The gateway carries the request
between them over their unix sockets: the transformer needs no network and no address of the
predictor, and the caller's credentials reach neither. The protocol stays the caller's (V1 or
V2) unless `preprocess` makes a V2 `InferRequest` out of a V1 body.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loom.serving.http1 import Message
from loom.serving.kserve_model import BINARY_HEADER, PROTOCOL_HEADER
from loom.serving.replicas import Generation, Replica

if TYPE_CHECKING:
    from loom.serving.gateway import Gateway

PREPROCESS = b"/loom/transformer/preprocess"
POSTPROCESS = b"/loom/transformer/postprocess"
SKIPPED = {b"content-length", b"content-type", BINARY_HEADER.encode(), PROTOCOL_HEADER.encode()}


def verb_of(target: str) -> tuple[str, str] | None:
    """(protocol, verb) of an inference request's path, or None for anything else."""
    path = target.split("?", 1)[0]
    if path.startswith("/v2/models/") and path.endswith("/infer"):
        return "v2", "infer"
    if path.startswith("/v1/models/"):
        for verb in ("predict", "explain"):
            if path.endswith(f":{verb}"):
                return "v1", verb
    return None


def transformer_generation(spec_transformer_dir: str) -> Generation:
    """What a transformer replica serves: its folder, in the role of transformer."""
    return (spec_transformer_dir, "transformer", 1, 0.0, 0)


async def transformed(
    gateway: Gateway, request: Message, started: float, verb: tuple[str, str]
) -> tuple[Message, Replica]:
    """The caller's answer through preprocess → predictor → postprocess."""
    role = transformer_generation(gateway.spec.transformer_dir)
    kept = [(k, v) for k, v in request.headers if k not in SKIPPED]
    protocol, action = verb
    binary = request.header(BINARY_HEADER.encode())
    extra = [(BINARY_HEADER.encode(), binary)] if binary is not None else []
    pre = Message([b"POST", PREPROCESS], [*kept, (PROTOCOL_HEADER.encode(), protocol.encode()),
                                         *extra], request.body)  # fmt: skip
    made, transformer = await gateway.send(pre, started, role=role)
    if made.status != 200:
        return made, transformer
    protocol = (made.header(PROTOCOL_HEADER.encode()) or b"v1").decode()
    name = gateway.spec.name
    if protocol == "v2":
        path = f"/v2/models/{name}/infer"
    else:
        path = f"/v1/models/{name}:{'explain' if action == 'explain' else 'predict'}"
    sized = made.header(BINARY_HEADER.encode())
    sent = [*kept, (b"content-type", b"application/json")]
    sent += [(BINARY_HEADER.encode(), sized)] if sized is not None else []
    answer, predictor = await gateway.send(Message([b"POST", path.encode()], sent, made.body),
                                           started)  # fmt: skip
    if answer.status != 200:
        return answer, predictor
    sized = answer.header(BINARY_HEADER.encode())
    back = [*kept, (PROTOCOL_HEADER.encode(), protocol.encode())]
    back += [(BINARY_HEADER.encode(), sized)] if sized is not None else []
    post = Message([b"POST", POSTPROCESS], back, answer.body)
    final, _ = await gateway.send(post, started, role=role)
    return final, predictor
