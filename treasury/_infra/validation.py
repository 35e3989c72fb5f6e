"""Turning input into models, and pydantic's failures into one 400 shape."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, TypeVar

import pydantic
from pydantic import TypeAdapter

from ..errors import ValidationError

M = TypeVar("M", bound=pydantic.BaseModel)


def field_errors(error: pydantic.ValidationError, location: str) -> list[dict[str, str]]:
    """Each failing field with its location and a readable message."""
    fields = []
    for item in error.errors(include_url=False):
        message = item["msg"].removeprefix("Value error, ")
        path = ".".join(str(part) for part in item["loc"])
        fields.append({"location": location, "field": path, "message": message})
    return fields


@functools.cache
def _adapter(annotation: Any) -> TypeAdapter[Any]:
    return TypeAdapter(annotation)


def value_errors(annotation: Any, value: Any, location: str, field: str) -> list[dict[str, str]]:
    """What is wrong with one value against a type (empty when nothing is)."""
    try:
        _adapter(annotation).validate_python(value)
    except pydantic.ValidationError as error:
        fields = field_errors(error, location)
        for item in fields:
            item["field"] = ".".join(filter(None, [field, item["field"]]))
        return fields
    return []


def valid_value(annotation: Any, value: Any) -> Any:
    """`value` validated against a type, or None when it is not valid."""
    try:
        return _adapter(annotation).validate_python(value)
    except pydantic.ValidationError:
        return None


def parse_value(annotation: Any, value: Any, location: str, field: str) -> Any:
    """Validate one value (a path or query parameter) against a type, or raise a 400."""
    try:
        return _adapter(annotation).validate_python(value)
    except pydantic.ValidationError:
        raise ValidationError.fields(value_errors(annotation, value, location, field)) from None


def parse(model: type[M], data: Any, location: str = "body") -> M:
    """Validate `data` into `model`, or raise a 400 listing every failing field."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as error:
        raise ValidationError.fields(field_errors(error, location)) from None


def parse_input(
    model: type[M],
    given: M | Mapping[str, Any] | None,
    fields: Mapping[str, Any],
    location: str = "body",
) -> M:
    """The input of an operation, given as a model, a mapping, or keyword arguments."""
    return parse(model, given if given is not None else fields, location)
