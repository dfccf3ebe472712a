"""Where a batch run sends each job's input file: the provider, or files for any runner."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol

from rubric_engine.batch.client import BatchClient

if TYPE_CHECKING:
    from rubric_engine.batch.run import BatchRun


class Sink(Protocol):
    async def flush(self, job_no: int, data: BinaryIO) -> None:
        """Send one job's input file (``data``, read from its start)."""
        ...


class ProviderSink:
    """Upload a job's file and create its batch, recording each step before and after."""

    def __init__(self, run: BatchRun, client: BatchClient) -> None:
        self.run = run
        self.client = client

    async def flush(self, job_no: int, data: BinaryIO) -> None:
        ledger, task_id = self.run.ledger, self.run.task_id
        file_id = await self.client.upload(data, f"rubric-eval-{task_id}-{job_no}.jsonl")
        ledger.update(task_id, job_no, "UPLOADED", input_file_id=file_id)
        await self.run.submit(job_no, file_id, adopt=False)


class FileSink:
    """Write each job to ``folder/requests-NNN.jsonl`` for the user's own engine."""

    def __init__(self, run: BatchRun, folder: Path) -> None:
        self.run = run
        self.folder = folder
        self.written: list[Path] = []

    async def flush(self, job_no: int, data: BinaryIO) -> None:
        path = self.folder / f"requests-{job_no:03d}.jsonl"
        with path.open("wb") as handle:
            shutil.copyfileobj(data, handle)
        self.written.append(path)
        self.run.ledger.update(self.run.task_id, job_no, "EXPORTED", input_file_id=path.name)
