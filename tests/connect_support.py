"""A real Kafka Connect worker (standalone) on loopback, with Debezium's connectors.

``make cdc-setup`` (``scripts/jars.sh connect``) puts the worker's jars
(``org.apache.kafka:connect-runtime`` matching the broker, scripts/connect/pom.xml) in
``.cache/connect-jars`` and the Debezium PostgreSQL source and JDBC sink connectors'
plugin archives, unpacked, in ``.cache/connect-plugins`` (``$LIMNO_CONNECT_JARS_DIR``
and ``$LIMNO_CONNECT_PLUGINS_DIR`` elsewhere). :func:`start_connect` writes a worker
configuration in a directory of its own (JSON converters with schemas, so records
keep their types both ways; offsets in a file there; the REST API on a free loopback
port), starts ``ConnectStandalone`` with no connector and returns once its REST API
answers; connectors are then created through the REST API (:meth:`Connect.create`,
which waits until the connector and its tasks run). :meth:`Connect.stop` sends
SIGTERM, waits (bounded), kills if it must and reaps the process.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from kafka_support import ROOT
from service_support import Service, free_port, on_free_port, spawn, started

__all__ = ["Connect", "jars_dir", "plugins_dir", "start_connect"]

#: how long a worker may take to scan its plugins and answer (2 busy cores)
READY_TIMEOUT = 240.0
#: how long a new connector may take until it and its tasks run
RUNNING_TIMEOUT = 120.0
_JVM = ["-Xms128m", "-Xmx768m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]


def jars_dir() -> Path:
    return Path(os.environ.get("LIMNO_CONNECT_JARS_DIR") or ROOT / ".cache" / "connect-jars")


def plugins_dir() -> Path:
    return Path(os.environ.get("LIMNO_CONNECT_PLUGINS_DIR") or ROOT / ".cache" / "connect-plugins")


@dataclass
class Connect(Service):
    """A running worker: its REST address, process and files (log, stop, pause:
    :class:`Service`)."""

    name = "connect"
    log_name = "connect.log"
    tail_lines = 60

    url: str
    proc: subprocess.Popen[bytes]
    directory: Path

    def _request(self, method: str, path: str, body: Any = None) -> httpx.Response:
        with httpx.Client(base_url=self.url, timeout=30.0) as client:
            return client.request(method, path, json=body)

    def status(self, name: str) -> dict[str, Any]:
        found = self._request("GET", f"/connectors/{name}/status")
        found.raise_for_status()
        return dict(found.json())

    def create(self, name: str, config: dict[str, str]) -> None:
        """Create connector ``name`` and wait (bounded) until it and all its tasks
        run; a failed one fails with its trace."""
        made = self._request("PUT", f"/connectors/{name}/config", config)
        if made.status_code >= 400:
            raise RuntimeError(f"connector {name}: {made.status_code} {made.text}")
        deadline = time.monotonic() + RUNNING_TIMEOUT
        state: dict[str, Any] = {}
        while time.monotonic() < deadline:
            answer = self._request("GET", f"/connectors/{name}/status")
            if answer.status_code == 200:
                state = answer.json()
                units = [state["connector"], *state.get("tasks", [])]
                failed = [u for u in units if u.get("state") == "FAILED"]
                if failed:
                    raise RuntimeError(f"connector {name} failed: {failed[0].get('trace')}")
                if state.get("tasks") and all(u.get("state") == "RUNNING" for u in units):
                    return
            self.pause()
        raise RuntimeError(f"connector {name} not running in {RUNNING_TIMEOUT:.0f}s: {state}")

    def delete(self, name: str) -> None:
        self._request("DELETE", f"/connectors/{name}").raise_for_status()


def _properties(directory: Path, bootstrap: str, port: int) -> str:
    return "\n".join(
        [
            f"bootstrap.servers={bootstrap}",
            "key.converter=org.apache.kafka.connect.json.JsonConverter",
            "value.converter=org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable=true",
            "value.converter.schemas.enable=true",
            f"offset.storage.file.filename={directory / 'offsets'}",
            "offset.flush.interval.ms=1000",
            f"listeners=http://127.0.0.1:{port}",
            "rest.advertised.host.name=127.0.0.1",
            f"rest.advertised.port={port}",
            f"plugin.path={plugins_dir()}",
            # plugins found by their ServiceLoader manifests (Debezium's and Kafka's own
            # carry them): 14 s to start instead of 49 s scanning every class (loaded box)
            "plugin.discovery=service_load",
            "",
        ]
    )


def _log4j() -> str:
    return "\n".join(
        [
            "appender.out.type=Console",
            "appender.out.name=out",
            "appender.out.layout.type=PatternLayout",
            "appender.out.layout.pattern=[%d] %p %m (%c)%n",
            "rootLogger.level=WARN",
            "rootLogger.appenderRef.out.ref=out",
            "logger.debezium.name=io.debezium",
            "logger.debezium.level=INFO",
            "logger.connect.name=org.apache.kafka.connect.runtime.Connect",
            "logger.connect.level=INFO",
            "",
        ]
    )


def start_connect(directory: Path, bootstrap: str) -> Connect:
    """Start a standalone worker in ``directory`` against the broker ``bootstrap`` on a
    free loopback REST port (another if that one was taken before the worker bound it);
    its REST API answers when this returns."""
    jars = jars_dir()
    if not any(jars.glob("connect-runtime-*.jar")) or not plugins_dir().is_dir():
        raise RuntimeError(
            f"no Kafka Connect jars in {jars}: run 'make cdc-setup' (scripts/jars.sh connect)"
        )
    directory.mkdir(parents=True, exist_ok=True)
    return on_free_port(
        lambda: _start(jars, directory, bootstrap, free_port()),
        directory / Connect.log_name,
        "Address already in use",
    )


def _start(jars: Path, directory: Path, bootstrap: str, port: int) -> Connect:
    config = directory / "worker.properties"
    config.write_text(_properties(directory, bootstrap, port))
    (directory / "log4j2.properties").write_text(_log4j())
    log4j = f"-Dlog4j2.configurationFile={directory / 'log4j2.properties'}"
    command = ["java", *_JVM, log4j, "-cp", f"{jars}/*"]
    command += ["org.apache.kafka.connect.cli.ConnectStandalone", str(config)]
    worker = Connect(
        f"http://127.0.0.1:{port}", spawn(command, directory / Connect.log_name), directory
    )
    # ready once the REST API lists the connector plugins (TransportError: not listening yet)
    return started(
        worker,
        lambda: worker._request("GET", "/connector-plugins").status_code == 200,
        timeout=READY_TIMEOUT,
        what=f"connect at {worker.url}",
        errors=(httpx.TransportError,),
    )
