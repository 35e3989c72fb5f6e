"""Turning input into models, and pydantic's failures into one 400 shape."""

from __future__ import annotations

from typing import Any, TypeVar

import pydantic
from pydantic import TypeAdapter

from .errors import ValidationError

M = TypeVar("M", bound=pydantic.BaseModel)


def field_errors(error: pydantic.ValidationError, location: str) -> list[dict[str, str]]:
    """Each failing field with its location and a readable message."""
    fields = []
    for item in error.errors(include_url=False):
        message = item["msg"].removeprefix("Value error, ")
        path = ".".join(str(part) for part in item["loc"])
        fields.append({"location": location, "field": path, "message": message})
    return fields


def parse_value(annotation: Any, value: Any, location: str, field: str) -> Any:
    """Validate one value (a path or query parameter) against a type, or raise a 400."""
    try:
        return TypeAdapter(annotation).validate_python(value)
    except pydantic.ValidationError as error:
        fields = field_errors(error, location)
        for item in fields:
            item["field"] = ".".join(filter(None, [field, item["field"]]))
        raise ValidationError(details={"fields": fields}) from None


def parse(model: type[M], data: Any, location: str = "body") -> M:
    """Validate `data` into `model`, or raise a 400 listing every failing field."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as error:
        raise ValidationError(details={"fields": field_errors(error, location)}) from None
