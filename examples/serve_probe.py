"""Knock on a running `rubric-eval serve` the way an attacker's page would, and print what it
answers (docs/review.md "Web safety"). Standard library only.

    python examples/serve_probe.py http://127.0.0.1:8765
"""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request


def status(url: str, headers: dict[str, str] | None = None, data: bytes | None = None) -> str:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            policy = answer.headers.get("Content-Security-Policy", "")
            return f"{answer.status}, {policy.split(';')[0]}"
    except urllib.error.HTTPError as refused:
        return str(refused.code)


def main() -> None:
    base = sys.argv[1].rstrip("/")
    for _ in range(100):  # the server may still be starting
        try:
            urllib.request.urlopen(base + "/signin", timeout=2)
            break
        except OSError:
            time.sleep(0.2)
    print("GET /signin:", status(base + "/signin"))
    print("GET / without a session:", status(base + "/"))
    print("GET / for the host evil.example:", status(base + "/", {"Host": "evil.example"}))
    form = b"token=x&csrf=guessed"
    print("POST /signin without this session's token:", status(base + "/signin", data=form))
    print(
        "POST /signin from http://evil.example:",
        status(base + "/signin", {"Origin": "http://evil.example"}, form),
    )


if __name__ == "__main__":
    main()
