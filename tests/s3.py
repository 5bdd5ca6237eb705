"""A real S3-protocol server for tests: moto's standalone server on loopback, with IAM
authentication on (wrong credentials are refused), and a TCP proxy that can be taken down."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import free_port


@dataclass
class S3Server:
    endpoint: str
    key: str
    secret: str
    process: subprocess.Popen[bytes]

    def client(self, secret: str | None = None) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id=self.key,
            aws_secret_access_key=secret or self.secret,
        )

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=10)


def start_s3(log: Path) -> S3Server:
    import boto3

    port = free_port()
    moto = Path(sys.executable).parent / "moto_server"
    process = subprocess.Popen(
        [str(moto), "-H", "127.0.0.1", "-p", str(port)],
        env={"INITIAL_NO_AUTH_ACTION_COUNT": "3", "PATH": "/usr/bin:/bin"},
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
        except OSError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise RuntimeError(f"moto_server did not start: {log.read_text()}") from None
            time.sleep(0.1)
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1",
                       aws_access_key_id="setup", aws_secret_access_key="setup")  # fmt: skip
    iam.create_user(UserName="loom")
    key = iam.create_access_key(UserName="loom")["AccessKey"]
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*",
                                                      "Resource": "*"}]}  # fmt: skip
    iam.put_user_policy(UserName="loom", PolicyName="all", PolicyDocument=json.dumps(policy))
    return S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"], process)


class Proxy:
    """Forwards a loopback port to another; `down()` refuses connections until `up()`."""

    def __init__(self, target_port: int) -> None:
        self.target = target_port
        self.port = free_port()
        self._server: socket.socket | None = None
        self._conns: list[socket.socket] = []
        self.up()

    def up(self) -> None:
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", self.port))
        server.listen(64)
        self._server = server
        threading.Thread(target=self._accept, args=(server,), daemon=True).start()

    def down(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for conn in self._conns:
            conn.close()
        self._conns.clear()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
