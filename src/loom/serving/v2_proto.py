"""The Open Inference Protocol's gRPC messages (package `inference`, service
`GRPCInferenceService`), described here field by field and built at run time with protobuf's
descriptor API, in a pool of their own: no generated code, no compiler at build time, and no
clash with a client library (tritonclient) that registers the same names in the default pool.

The field numbers are the protocol's: a client built from KServe's or Triton's definition reads
and writes these messages unchanged (tests compare them with tritonclient's).
"""

from __future__ import annotations

from functools import cache
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "inference"
SERVICE = f"{PACKAGE}.GRPCInferenceService"
F = descriptor_pb2.FieldDescriptorProto
# a field: (name, number, type, repeated, message type); a message type is relative to the package
Field = tuple[str, int, int, bool, str]

BOOL, INT32, INT64, UINT32, UINT64 = F.TYPE_BOOL, F.TYPE_INT32, F.TYPE_INT64, F.TYPE_UINT32, F.TYPE_UINT64  # noqa: E501  # fmt: skip
FLOAT, DOUBLE, STRING, BYTES, MESSAGE = F.TYPE_FLOAT, F.TYPE_DOUBLE, F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE  # noqa: E501  # fmt: skip

_TENSOR_METADATA: list[Field] = [
    ("name", 1, STRING, False, ""),
    ("datatype", 2, STRING, False, ""),
    ("shape", 3, INT64, True, ""),
]
_CONTENTS: list[Field] = [
    ("bool_contents", 1, BOOL, True, ""),
    ("int_contents", 2, INT32, True, ""),
    ("int64_contents", 3, INT64, True, ""),
    ("uint_contents", 4, UINT32, True, ""),
    ("uint64_contents", 5, UINT64, True, ""),
    ("fp32_contents", 6, FLOAT, True, ""),
    ("fp64_contents", 7, DOUBLE, True, ""),
    ("bytes_contents", 8, BYTES, True, ""),
]
_PARAMETER_CHOICES: list[Field] = [
    ("bool_param", 1, BOOL, False, ""),
    ("int64_param", 2, INT64, False, ""),
    ("string_param", 3, STRING, False, ""),
    ("double_param", 4, DOUBLE, False, ""),
    ("uint64_param", 5, UINT64, False, ""),
]


def _tensor(parameters: str) -> list[Field]:
    return [
        *_TENSOR_METADATA,
        ("parameters", 4, MESSAGE, True, parameters),
        ("contents", 5, MESSAGE, False, "InferTensorContents"),
    ]


# message → (fields, nested messages with their fields, map fields of InferParameter values)
_MESSAGES: dict[str, tuple[list[Field], dict[str, list[Field]]]] = {
    "ServerLiveRequest": ([], {}),
    "ServerLiveResponse": ([("live", 1, BOOL, False, "")], {}),
    "ServerReadyRequest": ([], {}),
    "ServerReadyResponse": ([("ready", 1, BOOL, False, "")], {}),
    "ModelReadyRequest": ([("name", 1, STRING, False, ""), ("version", 2, STRING, False, "")], {}),
    "ModelReadyResponse": ([("ready", 1, BOOL, False, "")], {}),
    "ServerMetadataRequest": ([], {}),
    "ServerMetadataResponse": (
        [
            ("name", 1, STRING, False, ""),
            ("version", 2, STRING, False, ""),
            ("extensions", 3, STRING, True, ""),
        ],
        {},
    ),
    "ModelMetadataRequest": (
        [("name", 1, STRING, False, ""), ("version", 2, STRING, False, "")],
        {},
    ),
    "ModelMetadataResponse": (
        [
            ("name", 1, STRING, False, ""),
            ("versions", 2, STRING, True, ""),
            ("platform", 3, STRING, False, ""),
            ("inputs", 4, MESSAGE, True, "ModelMetadataResponse.TensorMetadata"),
            ("outputs", 5, MESSAGE, True, "ModelMetadataResponse.TensorMetadata"),
        ],
        {"TensorMetadata": _TENSOR_METADATA},
    ),
    "ModelInferRequest": (
        [
            ("model_name", 1, STRING, False, ""),
            ("model_version", 2, STRING, False, ""),
            ("id", 3, STRING, False, ""),
            ("parameters", 4, MESSAGE, True, "ModelInferRequest.ParametersEntry"),
            ("inputs", 5, MESSAGE, True, "ModelInferRequest.InferInputTensor"),
            ("outputs", 6, MESSAGE, True, "ModelInferRequest.InferRequestedOutputTensor"),
            ("raw_input_contents", 7, BYTES, True, ""),
        ],
        {
            "InferInputTensor": _tensor("ModelInferRequest.InferInputTensor.ParametersEntry"),
            "InferRequestedOutputTensor": [
                ("name", 1, STRING, False, ""),
                (
                    "parameters",
                    2,
                    MESSAGE,
                    True,
                    "ModelInferRequest.InferRequestedOutputTensor.ParametersEntry",
                ),
            ],
        },
    ),
    "ModelInferResponse": (
        [
            ("model_name", 1, STRING, False, ""),
            ("model_version", 2, STRING, False, ""),
            ("id", 3, STRING, False, ""),
            ("parameters", 4, MESSAGE, True, "ModelInferResponse.ParametersEntry"),
            ("outputs", 5, MESSAGE, True, "ModelInferResponse.InferOutputTensor"),
            ("raw_output_contents", 6, BYTES, True, ""),
        ],
        {"InferOutputTensor": _tensor("ModelInferResponse.InferOutputTensor.ParametersEntry")},
    ),
    "InferParameter": (_PARAMETER_CHOICES, {}),
    "InferTensorContents": (_CONTENTS, {}),
}
METHODS = {
    "ServerLive": ("ServerLiveRequest", "ServerLiveResponse"),
    "ServerReady": ("ServerReadyRequest", "ServerReadyResponse"),
    "ModelReady": ("ModelReadyRequest", "ModelReadyResponse"),
    "ServerMetadata": ("ServerMetadataRequest", "ServerMetadataResponse"),
    "ModelMetadata": ("ModelMetadataRequest", "ModelMetadataResponse"),
    "ModelInfer": ("ModelInferRequest", "ModelInferResponse"),
}


def _add_fields(message: descriptor_pb2.DescriptorProto, fields: list[Field]) -> None:
    for name, number, kind, repeated, type_name in fields:
        field = message.field.add(name=name, number=number, type=kind)
        field.label = F.LABEL_REPEATED if repeated else F.LABEL_OPTIONAL
        if type_name:
            field.type_name = f".{PACKAGE}.{type_name}"
        if message.name == "InferParameter":
            field.oneof_index = 0
        if type_name.endswith("ParametersEntry"):  # map<string, InferParameter>
            entry = message.nested_type.add(name="ParametersEntry")
            entry.options.map_entry = True
            key = entry.field.add(name="key", number=1, type=STRING)
            key.label = F.LABEL_OPTIONAL
            value = entry.field.add(name="value", number=2, type=MESSAGE)
            value.label = F.LABEL_OPTIONAL
            value.type_name = f".{PACKAGE}.InferParameter"


def _file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(
        name="loom/open_inference_v2.proto", package=PACKAGE, syntax="proto3"
    )
    for name, (fields, nested) in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        if name == "InferParameter":
            message.oneof_decl.add(name="parameter_choice")
        _add_fields(message, fields)
        for inner, inner_fields in nested.items():
            _add_fields(message.nested_type.add(name=inner), inner_fields)
    service = proto.service.add(name="GRPCInferenceService")
    for method, (request, response) in METHODS.items():
        service.method.add(
            name=method, input_type=f".{PACKAGE}.{request}", output_type=f".{PACKAGE}.{response}"
        )
    return proto


@cache
def messages() -> dict[str, Any]:
    """The protocol's message classes by name (`ModelInferRequest`, …; nested ones as
    `ModelInferRequest.InferInputTensor`)."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(_file())
    found: dict[str, Any] = {}
    for name, (_fields, nested) in _MESSAGES.items():
        found[name] = message_factory.GetMessageClass(
            pool.FindMessageTypeByName(f"{PACKAGE}.{name}")
        )
        for inner in nested:
            found[f"{name}.{inner}"] = message_factory.GetMessageClass(
                pool.FindMessageTypeByName(f"{PACKAGE}.{name}.{inner}")
            )
    return found


def descriptor(name: str) -> Any:
    """The descriptor of one message, for tests and tools."""
    return messages()[name].DESCRIPTOR
