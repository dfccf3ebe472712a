"""Submit and poll provider batches through litellm's batch functions (docs/batch.md).

litellm has ``acreate_file``, ``acreate_batch``, ``aretrieve_batch``, ``acancel_batch``,
``alist_batches`` and ``afile_content`` (openai, azure, vertex_ai, bedrock, hosted_vllm …)
but no polling loop; this module is the thin edge around them. Each call is retried for
transport errors by the one :class:`~rubric_engine.judge.retry.RetryPolicy` (litellm's and the
OpenAI client's own retries are off), so a provider sees each step once unless it failed.

litellm is imported on first use only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, BinaryIO, TypeVar

from rubric_engine.batch.lines import ENDPOINT
from rubric_engine.engine.pipeline import AUTH_REFUSED, BatchStepFailed, CredentialsRefused
from rubric_engine.judge.backends import LiveSettings, describe_error, import_litellm
from rubric_engine.judge.retry import RetryPolicy, status_of
from rubric_engine.judge.secrets import redact

T = TypeVar("T")


@dataclass(frozen=True)
class BatchStatus:
    """What a poll tells: the provider's status, its counts and its result files."""

    batch_id: str
    status: str
    input_file_id: str | None
    output_file_id: str | None
    error_file_id: str | None
    counts: dict[str, int]
    errors: str | None

    @classmethod
    def of(cls, batch: Any) -> BatchStatus:
        counts = getattr(batch, "request_counts", None)
        errors = getattr(batch, "errors", None)
        data = getattr(errors, "data", None) or []
        return cls(
            batch_id=str(batch.id),
            status=str(batch.status),
            input_file_id=getattr(batch, "input_file_id", None),
            output_file_id=getattr(batch, "output_file_id", None),
            error_file_id=getattr(batch, "error_file_id", None),
            counts={
                "total": int(getattr(counts, "total", 0) or 0),
                "completed": int(getattr(counts, "completed", 0) or 0),
                "failed": int(getattr(counts, "failed", 0) or 0),
            },
            errors="; ".join(f"{e.code}: {e.message}" for e in data) or None,
        )


class BatchClient:
    """One provider's files and batches API.

    Args:
        provider: litellm's ``custom_llm_provider`` (``openai``, ``azure``, ``hosted_vllm`` …),
            the prefix of the judge's model name.
        settings: API base, key variable and timeout, as for live calls.
    """

    def __init__(self, provider: str, settings: LiveSettings) -> None:
        self.provider = provider
        self.settings = settings
        self.retry: RetryPolicy = settings.retry
        self._litellm: Any = None
        #: HTTP-level calls made (each retry counts), for progress and benchmarks
        self.calls = 0

    def _kwargs(self) -> dict[str, Any]:
        # the provider prefix decides whether a self-hosted --api-base gets the key
        out = self.settings.transport_kwargs(f"{self.provider}/")
        out.pop("num_retries", None)
        out["custom_llm_provider"] = self.provider
        return out

    async def _call(self, fn: Callable[..., Awaitable[T]], **kwargs: Any) -> T:
        """``fn`` under the retry policy. A failure that outlasts it is raised as
        :class:`BatchStepFailed` with the provider's error redacted, never as the library's
        exception (whose text and traceback quote the provider's body)."""
        try:
            async for attempt in self.retry.retrying():
                with attempt:
                    self.calls += 1
                    try:
                        return await fn(**kwargs, **self._kwargs())
                    except Exception as exc:  # 401/403: no later step can do better
                        status = status_of(exc)
                        if status in AUTH_REFUSED:
                            raise CredentialsRefused(status, self._describe(exc)) from None
                        raise
        except CredentialsRefused:
            raise
        except Exception as exc:
            step = getattr(fn, "__name__", "call").removeprefix("a")
            raise BatchStepFailed(step, self._describe(exc)) from None
        raise AssertionError("unreachable: tenacity re-raises the last error")

    def _describe(self, exc: BaseException) -> str:
        """The provider's error, without any credential the run knows."""
        return redact(describe_error(exc), self._kwargs().get("api_key"))

    @property
    def litellm(self) -> Any:
        if self._litellm is None:
            self._litellm = import_litellm()
        return self._litellm

    async def upload(self, data: BinaryIO, name: str) -> str:
        """Upload a batch input file (read from its start, streamed); returns its file id."""
        start = data.tell()

        async def upload_file(**kwargs: Any) -> Any:
            data.seek(start)  # a retried upload sends the whole file again
            return await self.litellm.acreate_file(**kwargs)

        found = await self._call(
            upload_file, file=(name, data, "application/jsonl"), purpose="batch"
        )
        return str(found.id)

    async def create(self, input_file_id: str, metadata: dict[str, str]) -> BatchStatus:
        """Ask for a batch over an uploaded file (24 h window)."""
        batch = await self._call(
            self.litellm.acreate_batch,
            completion_window="24h",
            endpoint=ENDPOINT,
            input_file_id=input_file_id,
            metadata=metadata,
        )
        return BatchStatus.of(batch)

    async def retrieve(self, batch_id: str) -> BatchStatus:
        return BatchStatus.of(await self._call(self.litellm.aretrieve_batch, batch_id=batch_id))

    async def cancel(self, batch_id: str) -> BatchStatus:
        return BatchStatus.of(await self._call(self.litellm.acancel_batch, batch_id=batch_id))

    async def find(self, input_file_id: str, pages: int = 20) -> BatchStatus | None:
        """The provider's batch made from ``input_file_id``, newest first, if there is one.

        Used after a crash between asking for a batch and recording its id: a batch that
        exists is adopted, never created again.
        """
        after: str | None = None
        for _ in range(pages):
            extra = {"after": after} if after else {}
            page = await self._call(self.litellm.alist_batches, limit=100, **extra)
            data = list(getattr(page, "data", None) or [])
            for batch in data:
                if getattr(batch, "input_file_id", None) == input_file_id:
                    return BatchStatus.of(batch)
            if not data or not getattr(page, "has_more", False):
                return None
            after = str(data[-1].id)
        return None

    async def content(self, file_id: str) -> bytes:
        """The bytes of an output or error file."""
        found = await self._call(self.litellm.afile_content, file_id=file_id)
        return bytes(found.content)
