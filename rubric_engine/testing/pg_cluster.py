"""A throwaway PostgreSQL cluster for tests and benchmarks (on its own unix socket).

``initdb`` in a temporary folder, a server that listens on a unix socket in that folder only
(no TCP port, so parallel runs on one machine never collide), torn down with its folder
afterwards. Run as root, the server runs as the ``postgres`` system user (PostgreSQL refuses
root), through ``runuser``. The binaries come from the Debian ``postgresql`` package
(``/usr/lib/postgresql/<major>/bin``) or ``$PATH``.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

#: test clusters trade durability for speed; the benchmark passes ``durable=True``
_FAST = ("-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")


class ClusterUnavailable(RuntimeError):
    """No PostgreSQL binaries, or the server did not start; the message says which and why."""


def _bindir() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if found:
        return Path(found[0]).parent
    on_path = shutil.which("initdb")
    if on_path:
        return Path(on_path).parent
    raise ClusterUnavailable(
        "no PostgreSQL server binaries (initdb); install the Debian package `postgresql` "
        "(`apt-get install postgresql`)"
    )


@dataclass
class Cluster:
    """A running cluster. :meth:`url` names a database in it (made by :meth:`create_database`)."""

    folder: Path
    bindir: Path
    user: str | None  #: the system user the server runs as, when not the current one
    port: int = 5432

    def _run(self, *argv: str) -> subprocess.CompletedProcess[str]:
        command = list(argv)
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        return subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@/{database}?host={self.folder}&port={self.port}"

    def create_database(self, name: str) -> str:
        """``CREATE DATABASE name``; returns its URL."""
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.folder / "data"),
            "-m",
            "immediate",
            "-w",
            "stop",
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def start_cluster(durable: bool = False) -> Cluster:
    """initdb + start; the caller calls :meth:`Cluster.stop`.

    Raises:
        ClusterUnavailable: no binaries, initdb failed, or the server did not start (the
            server log's last lines are in the message).
    """
    bindir = _bindir()
    folder = Path(tempfile.mkdtemp(prefix="rubric-pg-"))
    user = None
    if os.geteuid() == 0:
        user = "postgres"
        try:
            entry = pwd.getpwnam(user)
        except KeyError as exc:
            raise ClusterUnavailable("running as root and there is no `postgres` user") from exc
        os.chown(folder, entry.pw_uid, entry.pw_gid)
    cluster = Cluster(folder, bindir, user)
    done = cluster._run(
        str(bindir / "initdb"),
        "-D",
        str(folder / "data"),
        "-U",
        "postgres",
        "--auth=trust",
        "-E",
        "UTF8",
        "--no-sync",
    )
    if done.returncode != 0:
        shutil.rmtree(folder, ignore_errors=True)
        raise ClusterUnavailable(f"initdb failed: {done.stderr.strip()[-800:]}")
    options = f"-c listen_addresses='' -k {folder} -c max_connections=200"
    if not durable:
        options += " " + " ".join(_FAST)
    log = folder / "server.log"
    done = cluster._run(
        str(bindir / "pg_ctl"),
        "-D",
        str(folder / "data"),
        "-o",
        options,
        "-l",
        str(log),
        "-w",
        "-t",
        "60",
        "start",
    )
    if done.returncode != 0:
        tail = log.read_text(errors="replace")[-800:] if log.exists() else done.stderr
        shutil.rmtree(folder, ignore_errors=True)
        raise ClusterUnavailable(f"the PostgreSQL server did not start: {tail.strip()}")
    return cluster
