"""Request checks every RPC shares: text that PostgreSQL cannot store never reaches it.

PostgreSQL's `text` holds no NUL character (a query with one fails with DataError, which would surface as
UNAVAILABLE), and a lone UTF-16 surrogate is not encodable as UTF-8. Every string field of a request, nested
messages, repeated fields and maps included, is checked before the servicer uses it.
"""

from __future__ import annotations

import re

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from ragmesh_common.errors import InvalidArgument

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def check_text(name: str, value: str) -> None:
    """INVALID_ARGUMENT naming the field when `value` holds a NUL character or a lone surrogate."""
    found = _UNSTORABLE.search(value)
    if found is not None:
        what = "a NUL character" if found.group() == "\x00" else "a lone surrogate"
        raise InvalidArgument(f"{name} contains {what} at position {found.start()}")


def check_strings(message: Message, prefix: str = "") -> None:
    """`check_text` on every string set in `message`, recursively; field paths like `chunks[3].title`."""
    for field, value in message.ListFields():
        name = prefix + field.name
        if (
            field.type == FieldDescriptor.TYPE_MESSAGE
            and field.message_type is not None
            and field.message_type.GetOptions().map_entry
        ):
            key_field, value_field = (
                field.message_type.fields_by_name["key"],
                field.message_type.fields_by_name["value"],
            )
            for key, item in value.items():
                if key_field.type == FieldDescriptor.TYPE_STRING:
                    check_text(f"{name} key", key)
                if value_field.type == FieldDescriptor.TYPE_STRING:
                    check_text(f"{name}[{key!r}]", item)
                elif value_field.type == FieldDescriptor.TYPE_MESSAGE:
                    check_strings(item, f"{name}[{key!r}].")
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            if field.is_repeated:
                for i, item in enumerate(value):
                    check_strings(item, f"{name}[{i}].")
            else:
                check_strings(value, f"{name}.")
        elif field.type == FieldDescriptor.TYPE_STRING:
            if field.is_repeated:
                for i, item in enumerate(value):
                    check_text(f"{name}[{i}]", item)
            else:
                check_text(name, value)
