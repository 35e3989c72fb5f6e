"""One error tree for the whole library.

Every error carries what its HTTP response needs: a status, the message and details of
the specification's JSON error body, and its response headers. So the HTTP layer turns
any of them into a response in one function, and the typed client turns a response
back into the same class with `error_class`::

    TreasuryError                      500  base class; .status .message .details .headers
    ├── ValidationError                400  invalid input; .details["fields"] lists each field
    ├── AuthenticationError            401  API key required / Unauthorized / API key expired
    ├── Forbidden                      403  the key may not do this: a scope it lacks (.required_scope), four-eyes
    ├── NotFound                       404  unknown resource, or another organization's
    ├── MethodNotAllowed               405  .allow: the methods the path takes (header Allow)
    ├── Conflict                       409  duplicate resource (recipient, tracked wallet)
    │   ├── IdempotencyInFlight        409  same Idempotency-Key still being processed
    │   └── OnboardingIncomplete       409  the fiat provider has not approved the customer
    ├── PayloadTooLarge                413
    ├── UnsupportedMediaType           415
    ├── IdempotencyKeyReused           422  same Idempotency-Key, different request
    ├── RateLimited                    429  .retry_after seconds (header Retry-After)
    └── UpstreamError                  502  fiat provider or chain failure
        └── Reverted                   502  (treasury.backends.chain) a reverted call
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AuthenticationError",
    "Conflict",
    "Forbidden",
    "IdempotencyInFlight",
    "IdempotencyKeyReused",
    "MethodNotAllowed",
    "NotFound",
    "OnboardingIncomplete",
    "PayloadTooLarge",
    "RateLimited",
    "TreasuryError",
    "UnsupportedMediaType",
    "UpstreamError",
    "ValidationError",
    "error_class",
]


class TreasuryError(Exception):
    """Base of every error the library raises on purpose."""

    status: ClassVar[int] = 500
    default_message: ClassVar[str] = "Internal server error"
    #: Set on errors that share a status with their parent, and carried in
    #: ``details["code"]`` so that a client can tell them apart.
    code: ClassVar[str | None] = None
    #: An answer of the moment (it changes without the request changing): never kept
    #: under an Idempotency-Key, so the same request retried later runs afresh.
    transient: ClassVar[bool] = False

    def __init__(self, message: str | None = None, details: dict[str, Any] | None = None):
        self.message = message or self.default_message
        self.details = details
        self.replayed = False  # set when an idempotent replay re-raises a stored error
        super().__init__(self.message)

    def __str__(self) -> str:
        fields = (self.details or {}).get("fields")
        if not fields:
            return self.message
        named = "; ".join(f"{f['field'] or f['location']}: {f['message']}" for f in fields)
        return f"{self.message} ({named})"

    @property
    def headers(self) -> dict[str, str]:
        """The response headers this error brings."""
        return {"Idempotent-Replayed": "true"} if self.replayed else {}

    def to_body(self) -> dict[str, Any]:
        """The specification's error body: ``{"error": str, "details"?: object}``."""
        body: dict[str, Any] = {"error": self.message}
        details = self.details
        if self.code is not None:
            details = {**(details or {}), "code": self.code}
        if details is not None:
            body["details"] = details
        return body

    @staticmethod
    def from_body(status: int, body: dict[str, Any]) -> TreasuryError:
        """Rebuild an error from a status and its JSON body (replays, the typed client)."""
        details = body.get("details")
        code = details.get("code") if isinstance(details, dict) else None
        cls = error_class(status, code)
        if isinstance(details, dict) and code is not None and code == cls.code:
            details = {k: v for k, v in details.items() if k != "code"} or None
        error = cls.rebuild(body.get("error"), details if isinstance(details, dict) else None)
        if cls is TreasuryError and status != TreasuryError.status:
            error.status = status  # type: ignore[misc]  # an instance of a status we lack
        return error

    @classmethod
    def rebuild(cls, message: str | None, details: dict[str, Any] | None) -> TreasuryError:
        """An instance from a body's message and details (subclasses with more state
        read it back from the details)."""
        return cls(message, details)


class ValidationError(TreasuryError):
    status = 400
    default_message = "Invalid input"

    @classmethod
    def field(cls, location: str, field: str, message: str) -> ValidationError:
        """A 400 about one field, in the same shape as request-model failures."""
        return cls.fields([{"location": location, "field": field, "message": message}])

    @classmethod
    def fields(cls, fields: list[dict[str, str]], message: str | None = None) -> ValidationError:
        """A 400 listing every failing field (``location``, ``field``, ``message``)."""
        return cls(message, {"fields": fields})

    def at(self, location: str, field: str) -> ValidationError:
        """This refusal, raised below the request (an amount a wallet cannot cover, an
        address value must not reach), as the 400 naming the request's field it is about:
        the operation that read the field from its request says which."""
        return ValidationError.field(location, field, self.message)


class AuthenticationError(TreasuryError):
    status = 401
    default_message = "Unauthorized"


class Forbidden(TreasuryError):
    """The API key may not do this: it lacks the operation's scope
    (``details.required_scope``), or a rule of the policy refuses it (four-eyes)."""

    status = 403
    default_message = "Forbidden"

    def __init__(self, message: str | None = None, *, required_scope: str | None = None):
        details = None if required_scope is None else {"required_scope": required_scope}
        super().__init__(message, details)
        self.required_scope = required_scope

    @classmethod
    def rebuild(cls, message: str | None, details: dict[str, Any] | None) -> TreasuryError:
        scope = (details or {}).get("required_scope")
        return cls(message, required_scope=None if scope is None else str(scope))


class NotFound(TreasuryError):
    status = 404
    default_message = "Not found"


class MethodNotAllowed(TreasuryError):
    status = 405
    default_message = "Method not allowed"

    def __init__(self, allow: list[str], message: str | None = None):
        super().__init__(message, {"allow": allow})
        self.allow = allow

    @classmethod
    def rebuild(cls, message: str | None, details: dict[str, Any] | None) -> TreasuryError:
        return cls(list((details or {}).get("allow", [])), message)

    @property
    def headers(self) -> dict[str, str]:
        return {**super().headers, "Allow": ", ".join(self.allow)}


class Conflict(TreasuryError):
    status = 409
    default_message = "Conflict"


class IdempotencyInFlight(Conflict):
    default_message = "A request with this Idempotency-Key is still in flight; wait and retry"
    code = "idempotency_in_flight"


class OnboardingIncomplete(Conflict):
    """A fiat operation of an organization whose provider customer is not approved yet
    (DESIGN §3 "Real backends"): ``details`` carries the provider's ``status`` and the
    hosted ``url`` where the business completes its KYB (None until there is one), and
    ``next``: what to do next (start the onboarding with the contact email, or complete
    the KYB at ``url``)."""

    default_message = "fiat onboarding is not complete"
    transient = True

    def __init__(
        self,
        status: str,
        url: str | None,
        message: str | None = None,
        *,
        next_step: str | None = None,
    ):
        details: dict[str, Any] = {"status": status, "url": url}
        if next_step is not None:
            details["next"] = next_step
        super().__init__(message, details)
        self.onboarding_status, self.url, self.next_step = status, url, next_step

    @classmethod
    def rebuild(cls, message: str | None, details: dict[str, Any] | None) -> TreasuryError:
        found = details or {}
        step = found.get("next")
        return cls(
            str(found.get("status", "")),
            found.get("url"),
            message,
            next_step=None if step is None else str(step),
        )


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

    def __init__(
        self,
        retry_after: int,
        message: str | None = None,
        *,
        quota: dict[str, str] | None = None,
    ):
        super().__init__(message, {"retryAfter": retry_after})
        self.retry_after = retry_after
        self.quota = quota or {}  # the X-RateLimit-* headers of the limit that was hit

    @classmethod
    def rebuild(cls, message: str | None, details: dict[str, Any] | None) -> TreasuryError:
        return cls(int((details or {}).get("retryAfter", 1)), message)

    @property
    def headers(self) -> dict[str, str]:
        return {**super().headers, **self.quota, "Retry-After": str(self.retry_after)}


class UpstreamError(TreasuryError):
    """An upstream service failed. `ambiguous` when the request may have reached it and
    taken effect (a timeout after sending): the claim then stays in flight for a job."""

    status = 502
    default_message = "Upstream failure"

    def __init__(
        self,
        message: str | None = None,
        details: dict[str, Any] | None = None,
        *,
        ambiguous: bool = False,
    ):
        super().__init__(message, details)
        self.ambiguous = ambiguous


_CLASSES: tuple[type[TreasuryError], ...] = (
    ValidationError,
    AuthenticationError,
    Forbidden,
    NotFound,
    MethodNotAllowed,
    Conflict,
    IdempotencyInFlight,
    PayloadTooLarge,
    UnsupportedMediaType,
    IdempotencyKeyReused,
    RateLimited,
    UpstreamError,
)
_BY_STATUS = {cls.status: cls for cls in _CLASSES if cls.code is None}
_BY_CODE: dict[tuple[int, str | None], type[TreasuryError]] = {
    (cls.status, cls.code): cls for cls in _CLASSES if cls.code is not None
}


def error_class(status: int, code: str | None = None) -> type[TreasuryError]:
    """The class of an error response: by its status, and by ``details.code`` where two
    classes share a status (409: `Conflict` or `IdempotencyInFlight`)."""
    return _BY_CODE.get((status, code)) or _BY_STATUS.get(status, TreasuryError)
