"""The ``--batch-*`` options of ``score --mode batch`` (light: the CLI's ``--help`` reads them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

#: OpenAI's limits per batch (Anthropic allows 100,000 requests / 256 MB; the smaller pair)
MAX_REQUESTS = 50_000
MAX_BYTES = 200 * 1024 * 1024

#: litellm providers whose files + batches API the batch client drives (an OpenAI-style upload,
#: create, retrieve, list and file content); others: ``batch export`` and their own job tools
BATCH_PROVIDERS: tuple[str, ...] = ("openai", "azure", "hosted_vllm", "litellm_proxy")

Fallback = Literal["none", "live"]
FALLBACKS: tuple[str, ...] = get_args(Fallback)


@dataclass(frozen=True)
class BatchSettings:
    """The ``--batch-*`` options; kept in the task so ``--resume`` runs the same way.

    Attributes:
        max_requests / max_bytes: per batch input file (OpenAI: 50,000 requests, 200 MB).
        poll_interval_s: seconds between polls of the open batches.
        fallback: ``live`` sends a request that no batch answered (expired, failed, errored)
            as a live call at once, instead of in a follow-up batch.
        record: append every finished row to a cassette under its live key (record mode).
    """

    max_requests: int = MAX_REQUESTS
    max_bytes: int = MAX_BYTES
    poll_interval_s: float = 30.0
    fallback: Fallback = "none"
    record: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "maxRequests": self.max_requests,
            "maxBytes": self.max_bytes,
            "pollIntervalS": self.poll_interval_s,
            "fallback": self.fallback,
            "record": self.record,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BatchSettings:
        return cls(
            max_requests=int(data["maxRequests"]),
            max_bytes=int(data["maxBytes"]),
            poll_interval_s=float(data["pollIntervalS"]),
            fallback=data["fallback"],
            record=bool(data["record"]),
        )
