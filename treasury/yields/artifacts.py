"""Public, immutable per-period merkle artifacts of yield distributions."""

from __future__ import annotations

from .._infra.models import ListOf
from .._infra.runtime import Runtime
from .models import YieldArtifact


class YieldArtifacts:
    """`GET /v1/yield/artifacts`: readable by anyone, no organization involved."""

    name = "yield_artifacts"

    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime

    def list(self) -> ListOf[YieldArtifact]:
        """Published periods, newest first (none until distributions are published)."""
        return ListOf[YieldArtifact](data=[])
