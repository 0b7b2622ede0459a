"""What a batch run waits on (SPEC 25): the provider batch that holds its model turn.

A run with ``RunConfig(batch=True)`` sends each model turn through the provider's batch API and
returns at once, stored as waiting: ``run.waiting`` is a ``BatchWait`` naming the batch and the
request, and nothing of the run stays in the process. ``agentloop.batch.poll`` (any process on
the same store) continues it when its result arrives. Kept apart from ``agentloop.batch`` so a
run record can be read without loading the batch machinery.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentloop._util.slots import record
from agentloop.errors import ConfigurationError, InvalidInput

__all__ = ["BatchWait", "Waiting", "refuse_batch"]


@record
class BatchWait:
    """A run's model turn waiting in a provider batch.

    ``provider`` is the client's provider name, ``batch_id`` the provider's batch, ``request_id``
    the request's ``custom_id`` (``<run id>_<turn>_<attempt>``), ``submitted_at`` epoch seconds.
    """

    provider: str
    batch_id: str
    request_id: str
    submitted_at: float

    def to_dict(self) -> dict[str, Any]:
        """Plain data (the run record keeps it)."""
        return {
            "provider": self.provider,
            "batch_id": self.batch_id,
            "request_id": self.request_id,
            "submitted_at": self.submitted_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BatchWait:
        """Rebuild from ``to_dict`` output; ``InvalidInput`` names a malformed record."""
        try:
            return cls(
                str(data["provider"]),
                str(data["batch_id"]),
                str(data["request_id"]),
                float(data["submitted_at"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInput(f"a stored batch wait is malformed: {exc!r}") from exc


class Waiting(Exception):
    """A batch run's model call went to a provider batch: the run waits on ``wait``."""

    def __init__(self, wait: BatchWait) -> None:
        """Carry ``wait`` to the engine."""
        super().__init__(wait.request_id)
        self.wait = wait


def refuse_batch(agent: Any, face: str) -> None:
    """``ConfigurationError`` when a face that answers live (``face``) is given a batch agent."""
    if getattr(getattr(agent, "config", None), "batch", False):
        raise ConfigurationError(
            f"{face} answers while the client waits, and an agent with RunConfig(batch=True) "
            f"waits on provider batches: give {face} an agent without batch=True"
        )
