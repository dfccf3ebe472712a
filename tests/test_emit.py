"""Results written back where the traces live: ``gen_ai.evaluation.result`` events to an OTLP
receiver (decoded with opentelemetry-proto) and span annotations in a real ``phoenix serve``,
each linked to the span of the OTLP demo input it judges; ids read as hex or base64."""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rubric_engine.dialogue.otlp import hex_id
from rubric_engine.dialogue.readers import DialogueSource
from rubric_engine.testing.otlp_receiver import OtlpReceiver
from tests.conftest import CASSETTES, ROOT, RUBRICS

DEMO = ROOT / "examples" / "data" / "health_otlp.json"
CLI = [sys.executable, "-m", "rubric_engine.cli"]


def demo_spans() -> dict[str, dict[str, Any]]:
    """The demo's LLM-call spans by span id (the rows' ids)."""
    doc = json.loads(DEMO.read_text("utf-8"))
    spans = doc["resourceSpans"][0]["scopeSpans"][0]["spans"]
    return {s["spanId"]: s for s in spans if s["name"].startswith("chat")}


def as_base64(doc: dict[str, Any]) -> dict[str, Any]:
    """The export as protobuf's JSON mapping writes it: ids base64, not hex."""
    for resource in doc["resourceSpans"]:
        for scope in resource["scopeSpans"]:
            for span in scope["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64encode(bytes.fromhex(span[key])).decode()
    return doc


def cli(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=180)  # fmt: skip


def test_ids_are_read_as_hex_or_base64_and_stored_as_hex(tmp_path: Path) -> None:
    assert hex_id("944CFD0538013DBE", 8) == "944cfd0538013dbe"
    assert hex_id(base64.b64encode(bytes.fromhex("944cfd0538013dbe")).decode(), 8) == (
        "944cfd0538013dbe"
    )
    assert hex_id("not-an-id", 8) == "not-an-id" and hex_id("", 16) == ""
    # a 16-byte value is not a span id: left as the file said
    assert hex_id(base64.b64encode(bytes(16)).decode(), 8) == base64.b64encode(bytes(16)).decode()
    encoded = tmp_path / "health_otlp_b64.json"
    encoded.write_text(json.dumps(as_base64(json.loads(DEMO.read_text("utf-8")))), "utf-8")
    hex_rows = [r.row_id for r in DialogueSource(DEMO).read()]
    b64_rows = DialogueSource(encoded).read()
    assert [r.row_id for r in b64_rows] == hex_rows == list(demo_spans())
    first = demo_spans()[hex_rows[0]]
    assert b64_rows[0].metadata["traceId"] == first["traceId"]


def test_score_emits_one_linked_event_per_row_to_an_otlp_receiver(tmp_path: Path) -> None:
    spans = demo_spans()
    with OtlpReceiver() as receiver:
        done = cli("score", DEMO, "-r", RUBRICS / "health_cs.yaml", "--draft", "--cassettes",
                   CASSETTES, "--store", tmp_path / "s.sqlite", "--out", tmp_path / "out",
                   "--emit-otlp", receiver.endpoint, "--json", cwd=tmp_path)  # fmt: skip
        assert done.returncode == 0, done.stderr
        summary = json.loads(done.stdout)
        task = summary["taskId"]
        rows = [json.loads(x) for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()]
        assert len(receiver.records) == summary["rows"]["scored"] == len(spans) == 4
        for record, row in zip(receiver.records, rows, strict=True):
            span = spans[row["rowId"]]
            assert record.event_name == "gen_ai.evaluation.result"
            assert (record.trace_id, record.span_id) == (span["traceId"], span["spanId"])
            attrs = record.attributes
            assert attrs["gen_ai.evaluation.name"] == "health_cs"
            assert attrs["gen_ai.evaluation.score.value"] == row["finalScore"]
            assert attrs["gen_ai.evaluation.score.label"] in ("PASS", "FAIL", "RED_FLAG")
            assert attrs["gen_ai.evaluation.explanation"] == row["scoreExplanation"]
            assert attrs["rubric_eval.rubric"] == "health_cs@1"
            assert attrs["rubric_eval.red_flags"] == row["redFlagTypes"]
            unmet = [e["requirementId"] for e in row["referenceBasis"]
                     if e["status"] in ("VIOLATED", "PARTIAL")]  # fmt: skip
            assert attrs.get("rubric_eval.unmet_requirement_ids", []) == unmet
            source_row = span["attributes"][-1]["value"]["stringValue"]
            assert attrs["gen_ai.response.id"] == f"resp-{source_row}"
        assert receiver.records[0].resource["service.name"] == "rubric-eval"
        # per requirement on request: one more event per referenceBasis entry, same span
        receiver.records.clear()
        again = cli("emit", task, "--store", tmp_path / "s.sqlite", "--otlp", receiver.endpoint,
                    "--per-requirement", cwd=tmp_path)  # fmt: skip
        assert again.returncode == 0, again.stderr
        basis = sum(len(r["referenceBasis"]) for r in rows)
        assert len(receiver.records) == len(rows) + basis
        assert f"sent {len(rows) + basis} gen_ai.evaluation.result event(s)" in again.stdout
        statuses = {r.attributes["gen_ai.evaluation.score.label"] for r in receiver.records[1:]}
        assert statuses <= {"FOLLOWED", "PARTIAL", "VIOLATED", "NOT_APPLICABLE", "RED_FLAG",
                            "FAIL", "PASS"}  # fmt: skip


def test_an_endpoint_that_refuses_is_an_error_not_a_silent_loss(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # nothing listens here once closed
    store = tmp_path / "s.sqlite"
    scored = cli("score", DEMO, "-r", RUBRICS / "health_cs.yaml", "--draft", "--cassettes",
                 CASSETTES, "--store", store, "--json", cwd=tmp_path)  # fmt: skip
    task = json.loads(scored.stdout)["taskId"]
    env_cut = {"OTEL_EXPORTER_OTLP_TIMEOUT": "1"}
    done = subprocess.run(
        [*CLI, "emit", task, "--store", str(store), "--otlp", f"http://127.0.0.1:{port}"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180, env={**os.environ, **env_cut},
    )  # fmt: skip
    assert done.returncode == 5 and "did not accept 4 of 4 evaluation event(s)" in done.stderr
    bad = cli("emit", task, "--store", store, "--otlp", "127.0.0.1:4318", cwd=tmp_path)
    assert bad.returncode == 2 and "needs a scheme" in bad.stderr


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="module")
def phoenix_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real ``phoenix serve`` from its pip package on loopback, offline: telemetry and
    external resources off, its SQLite store in a temporary folder, both ports free ones
    (its gRPC port listens on every interface whatever the host setting)."""
    home = tmp_path_factory.mktemp("phoenix")
    port = _free_port()
    env = {
        **os.environ, "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false", "PHOENIX_WORKING_DIR": str(home),
        "PHOENIX_HOST": "127.0.0.1", "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(_free_port()),
    }  # fmt: skip
    phoenix = shutil.which("phoenix", path=str(Path(sys.executable).parent))
    assert phoenix, "the test extra installs arize-phoenix"
    log = (home / "phoenix.log").open("w")
    server = subprocess.Popen([phoenix, "serve"], env=env, stdout=log, stderr=log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240
    try:
        while True:
            try:
                with urllib.request.urlopen(f"{url}/healthz", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None, (home / "phoenix.log").read_text()[-2000:]
            assert time.monotonic() < deadline, "phoenix serve did not start in 240 s"
            time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def get(url: str) -> Any:
    """A GET of Phoenix's REST API (what ``phoenix.client`` calls; importing ``phoenix`` loads
    the whole server package where it is installed, seconds of CPU)."""
    request = urllib.request.Request(url, headers={"Accept": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def send_traces(url: str, doc: dict[str, Any]) -> None:
    """The demo's spans into Phoenix over OTLP/HTTP (protobuf; its JSON mapping wants base64)."""
    from google.protobuf import json_format
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    body = json_format.ParseDict(as_base64(doc), ExportTraceServiceRequest()).SerializeToString()
    kind = {"Content-Type": "application/x-protobuf"}
    request = urllib.request.Request(f"{url}/v1/traces", data=body, headers=kind)
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert answer.status == 200


def test_phoenix_shows_one_annotation_per_scored_row_on_its_span(
    phoenix_url: str, tmp_path: Path
) -> None:
    send_traces(phoenix_url, json.loads(DEMO.read_text("utf-8")))
    spans = demo_spans()
    project = f"{phoenix_url}/v1/projects/default"
    deadline = time.monotonic() + 60  # Phoenix inserts spans in the background
    while len(get(f"{project}/spans?limit=100")["data"]) < 2 * len(spans):
        assert time.monotonic() < deadline, "Phoenix did not take the demo spans"
        time.sleep(0.5)
    store = tmp_path / "s.sqlite"
    done = cli("score", DEMO, "-r", RUBRICS / "health_cs.yaml", "--draft", "--cassettes",
               CASSETTES, "--store", store, "--out", tmp_path / "out", "--emit-phoenix",
               phoenix_url, cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "sent 4 span annotation(s) of task" in done.stdout
    rows = {json.loads(x)["rowId"]: json.loads(x)
            for x in (tmp_path / "out" / "rows.jsonl").read_text().splitlines()}  # fmt: skip

    def annotations() -> list[dict[str, Any]]:
        query = "&".join(f"span_ids={s}" for s in spans)
        found = get(f"{project}/span_annotations?{query}&limit=1000")["data"]
        return [a for a in found if a["name"] == "health_cs"]

    first = annotations()
    assert sorted(a["span_id"] for a in first) == sorted(spans) == sorted(rows)
    for found in first:
        row = rows[found["span_id"]]
        assert found["identifier"] == "health_cs@1" and found["annotator_kind"] == "LLM"
        assert found["result"]["score"] == row["finalScore"]
        assert found["result"]["explanation"] == row["scoreExplanation"]
        assert found["metadata"]["rubric_eval.red_flags"] == row["redFlagTypes"]
    # scoring again under the same rubric version replaces, never doubles
    task = done.stdout.split("task id: ")[1].split()[0]
    again = cli("emit", task, "--store", store, "--phoenix", phoenix_url, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert len(annotations()) == len(spans)
