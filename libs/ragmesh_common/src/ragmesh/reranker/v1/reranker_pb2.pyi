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
    __slots__ = ("scores", "configured", "unconfigured_reason")
    SCORES_FIELD_NUMBER: _ClassVar[int]
    CONFIGURED_FIELD_NUMBER: _ClassVar[int]
    UNCONFIGURED_REASON_FIELD_NUMBER: _ClassVar[int]
    scores: _containers.RepeatedScalarFieldContainer[float]
    configured: bool
    unconfigured_reason: str
    def __init__(self, scores: _Optional[_Iterable[float]] = ..., configured: bool = ..., unconfigured_reason: _Optional[str] = ...) -> None: ...
