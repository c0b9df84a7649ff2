from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

class RerankRequest(_message.Message):
    __slots__ = ("query", "passages", "normalize")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    PASSAGES_FIELD_NUMBER: _ClassVar[int]
    NORMALIZE_FIELD_NUMBER: _ClassVar[int]
    query: str
    passages: _containers.RepeatedScalarFieldContainer[str]
    normalize: bool
    def __init__(self, query: _Optional[str] = ..., passages: _Optional[_Iterable[str]] = ..., normalize: bool = ...) -> None: ...

class RerankResponse(_message.Message):
    __slots__ = ("scores", "model", "configured", "unconfigured_reason")
    SCORES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    CONFIGURED_FIELD_NUMBER: _ClassVar[int]
    UNCONFIGURED_REASON_FIELD_NUMBER: _ClassVar[int]
    scores: _containers.RepeatedScalarFieldContainer[float]
    model: str
    configured: bool
    unconfigured_reason: str
    def __init__(self, scores: _Optional[_Iterable[float]] = ..., model: _Optional[str] = ..., configured: bool = ..., unconfigured_reason: _Optional[str] = ...) -> None: ...

class GetModelInfoRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("configured", "model", "device", "state")
    CONFIGURED_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    configured: bool
    model: str
    device: str
    state: str
    def __init__(self, configured: bool = ..., model: _Optional[str] = ..., device: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...
