"""One error tree for the whole library.

Every error carries the HTTP status and the message of the specification's JSON error
body, so the HTTP layer turns any of them into a response in one place::

    TreasuryError                      500  base class; `.status`, `.message`, `.details`
    ├── ValidationError                400  invalid input; `.details` lists each field
    ├── AuthenticationError            401  API key required / Unauthorized / API key expired
    ├── NotFound                       404  unknown resource, or another organization's
    ├── MethodNotAllowed               405
    ├── Conflict                       409  duplicate resource (recipient, tracked wallet)
    │   └── IdempotencyInFlight        409  same Idempotency-Key still being processed
    ├── PayloadTooLarge                413
    ├── UnsupportedMediaType           415
    ├── IdempotencyKeyReused           422  same Idempotency-Key, different request
    ├── RateLimited                    429  `.retry_after` seconds
    └── UpstreamError                  502  fiat provider or chain failure
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AuthenticationError",
    "Conflict",
    "IdempotencyInFlight",
    "IdempotencyKeyReused",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "RateLimited",
    "TreasuryError",
    "UnsupportedMediaType",
    "UpstreamError",
    "ValidationError",
]


class TreasuryError(Exception):
    """Base of every error the library raises on purpose."""

    status: ClassVar[int] = 500
    default_message: ClassVar[str] = "Internal server error"

    def __init__(self, message: str | None = None, details: dict[str, Any] | None = None):
        self.message = message or self.default_message
        self.details = details
        self.replayed = False  # set when an idempotent replay re-raises a stored error
        super().__init__(self.message)

    def to_body(self) -> dict[str, Any]:
        """The specification's error body: ``{"error": str, "details"?: object}``."""
        body: dict[str, Any] = {"error": self.message}
        if self.details is not None:
            body["details"] = self.details
        return body

    @staticmethod
    def from_body(status: int, body: dict[str, Any]) -> TreasuryError:
        """Rebuild an error from a stored status and body (idempotent replays)."""
        cls = _BY_STATUS.get(status, TreasuryError)
        error = cls(body.get("error"), body.get("details"))
        if cls is TreasuryError:
            error.status = status  # type: ignore[misc]
        return error


class ValidationError(TreasuryError):
    status = 400
    default_message = "Invalid input"

    @classmethod
    def field(cls, location: str, field: str, message: str) -> ValidationError:
        """A 400 about one field, in the same shape as request-model failures."""
        return cls(details={"fields": [{"location": location, "field": field, "message": message}]})


class AuthenticationError(TreasuryError):
    status = 401
    default_message = "Unauthorized"


class NotFound(TreasuryError):
    status = 404
    default_message = "Not found"


class MethodNotAllowed(TreasuryError):
    status = 405
    default_message = "Method not allowed"


class Conflict(TreasuryError):
    status = 409
    default_message = "Conflict"


class IdempotencyInFlight(Conflict):
    default_message = "A request with this Idempotency-Key is still in flight; wait and retry"


class PayloadTooLarge(TreasuryError):
    status = 413
    default_message = "Request body too large"


class UnsupportedMediaType(TreasuryError):
    status = 415
    default_message = "Content-Type must be application/json"


class IdempotencyKeyReused(TreasuryError):
    status = 422
    default_message = "Idempotency-Key was already used with a different request"


class RateLimited(TreasuryError):
    status = 429
    default_message = "Rate limit exceeded"

    def __init__(self, retry_after: int, message: str | None = None):
        super().__init__(message, {"retryAfter": retry_after})
        self.retry_after = retry_after


class UpstreamError(TreasuryError):
    status = 502
    default_message = "Upstream failure"


_BY_STATUS: dict[int, type[TreasuryError]] = {
    cls.status: cls
    for cls in (
        ValidationError,
        AuthenticationError,
        NotFound,
        MethodNotAllowed,
        Conflict,
        PayloadTooLarge,
        UnsupportedMediaType,
        IdempotencyKeyReused,
        UpstreamError,
    )
}
