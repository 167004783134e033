"""A real PostgreSQL (Debian's, scripts/install-deps.sh) for tests and benchmarks."""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import signal
import stat
import subprocess
import time
import urllib.parse
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from .runner import Server, ServerError, free_port

POSTGRES_USER = "postgres"  # Debian's system user, and the superuser role initdb creates
UNIX_SOCKET_PATH_MAX = 107  # sun_path (108 bytes) less its terminating NUL


def postgres_bindir() -> Path:
    """The PostgreSQL server binaries: ``pg_config --bindir`` when it holds them (libpq-dev's
    pg_config may belong to a client without a server), else the newest
    /usr/lib/postgresql/<major>/bin (Debian's layout)."""
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        out = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=False, timeout=10
        )
        if out.returncode == 0 and out.stdout.strip():
            candidates.append(Path(out.stdout.strip()))
    debian = Path("/usr/lib/postgresql").glob("*/bin")
    candidates += sorted(
        (d for d in debian if d.parent.name.isdigit()),
        key=lambda d: int(d.parent.name),
        reverse=True,
    )
    for bindir in candidates:
        if all(os.access(bindir / b, os.X_OK) for b in ("postgres", "initdb")):
            return bindir
    raise ServerError(
        "no PostgreSQL server (postgres and initdb) in "
        f"{[str(c) for c in candidates] or 'pg_config --bindir or /usr/lib/postgresql/*/bin'}: "
        "run `make deps` (scripts/install-deps.sh installs Debian's postgresql)"
    )


def _proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, start time in clock ticks) of a process, None once it is gone."""
    try:
        line = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = line[line.rindex(")") + 2 :].split()  # the command, in parentheses, may hold spaces
    return fields[0], int(fields[1]), int(fields[19])


def _children(ppid: int) -> list[tuple[int, int]]:
    """(pid, start time) of each child process of ppid."""
    children = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (info := _proc_stat(int(entry.name))) is not None:
            _, parent, started = info
            if parent == ppid:
                children.append((int(entry.name), started))
    return children


def _running(pid: int, started: int) -> bool:
    """That process (not a later one with its PID) still runs: exited and zombie count as gone."""
    info = _proc_stat(pid)
    return info is not None and info[0] != "Z" and info[2] == started


class PostgresServer(Server):
    """PostgreSQL (Debian 12's 15) on 127.0.0.1 only, trust authentication for the ``postgres``
    superuser, UTF8 with the C locale; the cluster in ``workdir/data``, its unix socket in
    ``workdir/run``::

        with PostgresServer(workdir) as pg:
            pg.create_database("controller")
            engine = sqlalchemy.create_engine(pg.url("controller"))

    PostgreSQL refuses to run as root: as root, initdb and the server run as the ``postgres``
    system user and the workdir becomes its, so every directory above the workdir must let
    that user through (pytest's tmp_path, under /tmp/pytest-of-root of mode 0700, does not; the
    directory ``tempfile.mkdtemp()`` makes does). stop() is PostgreSQL's fast shutdown (SIGINT:
    sessions are ended, then a checkpoint); kill() SIGKILLs the postmaster and every process it
    forked. Measured here: ~1-2 s to the first start (initdb included), ~0.1-0.3 s to a restart.
    """

    name = "postgres"
    # SIGTERM (smart shutdown) would wait for every client, a forgotten connection pool included.
    stop_signal = signal.SIGINT

    def __init__(
        self,
        workdir: Path,
        port: int | None = None,
        *,
        start_timeout: float = 60.0,
        stop_timeout: float = 30.0,
    ) -> None:
        super().__init__(workdir, start_timeout, stop_timeout)
        self.port = port or free_port()
        self.data_dir = self.workdir / "data"
        self.socket_dir = self.workdir / "run"

    def url(self, database: str = POSTGRES_USER) -> str:
        """The SQLAlchemy URL of a database (driver: psycopg 3)."""
        name = urllib.parse.quote(database, safe="")
        return f"postgresql+psycopg://{POSTGRES_USER}@127.0.0.1:{self.port}/{name}"

    def connect(self, database: str = POSTGRES_USER, timeout: int = 5) -> psycopg.Connection[Any]:
        """A psycopg connection to a database, in autocommit mode (timeout: s, at least 2)."""
        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=POSTGRES_USER,
            dbname=database,
            sslmode="disable",
            connect_timeout=timeout,
            autocommit=True,
        )

    def create_database(self, name: str) -> None:
        """CREATE DATABASE (UTF8, C locale, owned by postgres); one that exists is left as it is."""
        statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        try:
            with self.connect() as conn:
                conn.execute(statement)
        except psycopg.errors.DuplicateDatabase:
            pass
        except psycopg.Error as e:
            raise ServerError(f"CREATE DATABASE {name!r}: {e}") from e

    def _account(self) -> tuple[int, int, list[int]] | None:
        """(uid, gid, groups) of the postgres user when we are root, else None: run as we are."""
        if os.geteuid() != 0:
            return None
        try:
            user = pwd.getpwnam(POSTGRES_USER)
        except KeyError:
            raise ServerError(
                f"no {POSTGRES_USER!r} user to run PostgreSQL as (it refuses root): "
                "run `make deps` (Debian's postgresql package creates it)"
            ) from None
        return user.pw_uid, user.pw_gid, os.getgrouplist(POSTGRES_USER, user.pw_gid)

    def _popen_options(self) -> dict[str, Any]:
        options: dict[str, Any] = {
            "env": {"PATH": os.environ.get("PATH", os.defpath), "LC_ALL": "C"}
        }
        account = self._account()
        if account is not None:
            uid, gid, groups = account
            options |= {"user": uid, "group": gid, "extra_groups": groups}
        return options

    def _check_reachable(self, uid: int, gid: int, groups: list[int]) -> None:
        """The postgres user can enter the workdir; else name the directory that stops it."""

        def enters(directory: Path) -> bool:
            probe = subprocess.run(
                ["test", "-x", str(directory)],
                check=False,
                user=uid,
                group=gid,
                extra_groups=groups,
            )
            return probe.returncode == 0

        if not enters(self.workdir):
            # The first directory from / that keeps the postgres user out.
            directories = [*reversed(self.workdir.parents), self.workdir]
            directory = next((d for d in directories if not enters(d)), self.workdir)
            st = directory.stat()
            owner = f"{st.st_uid}:{st.st_gid}"
            with contextlib.suppress(KeyError):
                owner = f"{pwd.getpwuid(st.st_uid).pw_name}:{grp.getgrgid(st.st_gid).gr_name}"
            raise ServerError(
                f"the {POSTGRES_USER} user cannot reach {self.workdir}: {directory} is "
                f"{stat.filemode(st.st_mode)} {owner}. Give PostgresServer a workdir that user "
                "can reach, e.g. the directory tempfile.mkdtemp() makes (it becomes postgres's)"
            )

    def _prepare(self) -> list[str]:
        bindir = postgres_bindir()
        socket_path = self.socket_dir / f".s.PGSQL.{self.port}"
        if len(os.fsencode(socket_path)) > UNIX_SOCKET_PATH_MAX:
            raise ServerError(
                f"the unix socket path {socket_path} is longer than {UNIX_SOCKET_PATH_MAX} "
                "bytes: give PostgresServer a shorter workdir"
            )
        self.socket_dir.mkdir(exist_ok=True)
        account = self._account()
        if account is not None:
            uid, gid, groups = account
            for directory in (self.workdir, self.socket_dir):
                os.chown(directory, uid, gid)
                directory.chmod(0o700)
            self._check_reachable(uid, gid, groups)
        # Initialised once: a restart must find its databases again.
        if not (self.data_dir / "PG_VERSION").exists():
            initdb = [
                str(bindir / "initdb"),
                f"--pgdata={self.data_dir}",
                f"--username={POSTGRES_USER}",
                "--auth=trust",  # loopback only: listen_addresses and pg_hba.conf's host lines
                "--encoding=UTF8",
                "--no-locale",
                "--no-sync",  # a test cluster need not survive the machine crashing
                "--no-instructions",
            ]
            done = subprocess.run(
                initdb,
                cwd=self.workdir,
                capture_output=True,
                text=True,
                check=False,
                timeout=self.start_timeout,
                **self._popen_options(),
            )
            if done.returncode != 0:
                raise ServerError(
                    f"initdb into {self.data_dir} failed (exit {done.returncode}):\n"
                    f"{done.stdout}{done.stderr}"
                )
        return [
            str(bindir / "postgres"),
            "-D",
            str(self.data_dir),
            "-p",
            str(self.port),
            "-c",
            "listen_addresses=127.0.0.1",
            "-c",
            f'unix_socket_directories="{self.socket_dir}"',  # quoted: the path may hold commas
        ]

    def _serving(self) -> bool:
        try:
            # 2 s, libpq's least: a listener that never answers would hold start() up.
            with self.connect(timeout=2) as conn:
                row = conn.execute("SHOW data_directory").fetchone()
        except psycopg.Error:
            return False
        # Our cluster: another server that took the port would otherwise pass for this one.
        return row is not None and row[0] == str(self.data_dir)

    def _kill_process(self, proc: subprocess.Popen[bytes]) -> None:
        # Each backend calls setsid() (InitPostmasterChild), so no process group holds them all:
        # freeze the postmaster (it forks no more), kill the children it has, then it. Children
        # left alive would hold the shared memory and keep a restart from starting.
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGSTOP)
        children = _children(proc.pid)
        for pid, _ in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + self.stop_timeout
        while any(_running(pid, started) for pid, started in children):
            if time.monotonic() > deadline:
                raise ServerError(f"{self.name}'s children {children} outlived SIGKILL")
            time.sleep(0.01)
