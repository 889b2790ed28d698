"""Start and stop real ``neardup serve`` processes for integration tests."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx

EXE = shutil.which("neardup") or str(Path(sys.executable).parent / "neardup")


FIXED_MASTER_KEY = bytes(range(32))


def write_master_key(path: Path, key: bytes = FIXED_MASTER_KEY) -> Path:
    """Write a master key file (hex, as ``neardup serve`` reads it) for a test."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(key.hex() + "\n")
    path.chmod(0o600)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One ``neardup serve`` process on a free loopback port."""

    def __init__(
        self,
        data_dir: Path,
        *,
        operator_tenants: tuple[str, ...] = ("t1",),
        master_key_file: Path | None = None,
        random_master: bool = False,
        extra: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.master_key_file = master_key_file or Path(str(data_dir) + ".master.key")
        if not random_master and not self.master_key_file.exists():
            # Keyed hashes decide which pairs share a band: a fixed master secret makes
            # every LSH outcome of a test the same on every run.  Tests that must hold
            # under any key pass random_master=True and bound their failure probability.
            write_master_key(self.master_key_file)
        self.token_file = Path(str(data_dir) + ".token")
        self.operator_tenants = operator_tenants
        self.extra = extra
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0

    def start(self) -> Server:
        self.port = free_port()
        cmd = [
            EXE,
            "serve",
            "--data-dir",
            str(self.data_dir),
            "--port",
            str(self.port),
            "--master-key-file",
            str(self.master_key_file),
            "--bootstrap-token-file",
            str(self.token_file),
            *self.extra,
        ]
        for t in self.operator_tenants:
            cmd += ["--operator-tenant", t]
        # A file, not a pipe: an unread pipe fills up and blocks the server.
        self.log_path = Path(str(self.data_dir) + f".{self.port}.log")
        self._log = open(self.log_path, "wb")
        env = {**os.environ, **self.env} if self.env else None
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self._log.close()
                err = self.log_path.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"server exited {self.proc.returncode}: {err}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError("server did not become healthy")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def operator_token(self) -> str:
        return self.token_file.read_text().strip()

    def client(self, token: str | None = None) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self._log.close()

    def stop(self) -> str:
        """Stop (SIGTERM, then SIGKILL) and return the server's output."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill9()
        self._log.close()
        return self.log_path.read_text(errors="replace")

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def record_figure(name: str, **fields: Any) -> None:
    """Append a figure of a reliability test to the file named by ND_RELIABILITY_OUT
    (scripts/reliability_report.py collects them into docs/reliability.md's table);
    without that variable nothing is written."""
    out = os.environ.get("ND_RELIABILITY_OUT")
    if out:
        import json

        with open(out, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"test": name, **fields}, sort_keys=True) + "\n")


def fault_shim(folder: Path, code: str) -> dict[str, str]:
    """Environment that runs ``code`` in a server process before it starts.

    The code goes into a ``sitecustomize.py`` on ``PYTHONPATH``: it may patch neardup
    (for example make one store operation fail) to inject a fault that no request
    can cause, in a real server process.
    """
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(code)
    path = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": str(folder) + (os.pathsep + path if path else "")}


def producer(server: Server, op: httpx.Client, tenant: str) -> httpx.Client:
    r = op.post("/v1/keys", json={"role": "producer", "tenants": [tenant]})
    r.raise_for_status()
    return server.client(r.json()["token"])
