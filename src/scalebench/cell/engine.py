"""The Docker adapter: the one module of scalebench that imports docker and talks to an engine.

Everything else asks an `Engine` (a cell's container, the all-reduce sweep's, a short container
that reads an image's packages, an image's identity and tags, a dead lease's containers) and gets
plain values or one of this module's exceptions back. It also names every label scalebench puts
on a container, so the lease reclaim, the leftovers check and the tests find them by one name.
"""
from __future__ import annotations

import os
from typing import Any, Iterator

import docker
import docker.errors
import requests.exceptions
from docker.types import DeviceRequest, Mount

CELL_LABEL = "org.scalebench.cell"            # every container of a cell carries its key
LEASE_LABEL = "org.scalebench.lease"          # the device lease a container runs under
BENCHMARK_LABEL = "org.scalebench.benchmark"
HOST_LABEL = "org.scalebench.host"
DEVICES_LABEL = "org.scalebench.devices"
SWEEP_LABEL = "org.scalebench.sweep"          # the all-reduce sweep's container ("host/n")
ROLE_LABEL = "org.scalebench.role"            # a short utility container (e.g. "image-packages")

# what an engine that went away, refused or dropped the connection raises through the SDK
ENGINE_ERRORS: tuple[type[BaseException], ...] = (docker.errors.DockerException, requests.exceptions.RequestException,
                                                  ConnectionError)


class EngineError(RuntimeError):
    """The engine did not answer, or did not do what was asked; the message says which."""


class ImageMissing(EngineError):
    """The engine holds no image by that reference."""


def bind(source: str, target: str, read_only: bool) -> Mount:
    return Mount(target=target, source=source, type="bind", read_only=read_only)


def gpu_request(device_ids: list[str]) -> list[DeviceRequest]:
    """The container sees exactly these GPUs (NVIDIA's runtime), renumbered from 0 inside."""
    return [DeviceRequest(device_ids=list(device_ids), capabilities=[["gpu"]])]


def refused(exc: BaseException) -> bool:
    """Whether the engine answered and refused (a bad mount, an unknown device driver): asking
    again gets the same answer. Otherwise it did not answer or dropped the connection."""
    return isinstance(exc, docker.errors.APIError)


def explain(exc: BaseException) -> str:
    if isinstance(exc, docker.errors.APIError):
        return str(exc.explanation or exc)
    return f"{type(exc).__name__}: {str(exc)[:200]}"


def configured() -> bool:
    """Whether this machine has a Docker engine to ask (DOCKER_HOST, or the default socket)."""
    return bool(os.environ.get("DOCKER_HOST")) or os.path.exists("/var/run/docker.sock")


class Engine:
    """One Docker engine, through the SDK's low-level client: `api` when given (the docker
    provider's hook client in a task), else one from the environment (DOCKER_HOST or the socket)."""

    def __init__(self, api: Any = None, timeout_s: int = 120):
        self._api = api
        self.timeout_s = timeout_s

    @property
    def api(self):
        if self._api is None:
            self._api = docker.from_env(timeout=self.timeout_s).api
        return self._api

    # -- containers -----------------------------------------------------------------------
    def create(self, s) -> str:
        """Create (not start) a container as ContainerSettings `s` say; its id. The same settings
        are container.json, so `scalebench repro` starts what ran."""
        cpuset = {"cpuset_cpus": s.cpuset_cpus} if s.cpuset_cpus else {}
        host_config = self.api.create_host_config(auto_remove=False, mounts=s.mounts, shm_size=s.shm_size,
                                                  device_requests=s.device_requests, **cpuset, **s.host_options)
        return self.api.create_container(image=s.image, command=s.command, environment=s.environment, user=s.user,
                                         labels=s.labels, host_config=host_config)["Id"]

    def attach(self, container_id: str) -> Iterator[bytes]:
        """The container's output as it comes (attach before start: no line is missed)."""
        return self.api.attach(container=container_id, stdout=True, stderr=True, stream=True)

    def start(self, container_id: str) -> None:
        self.api.start(container_id)

    def wait(self, container_id: str, timeout_s: float | None = None) -> int | None:
        return self.api.wait(container_id, **({"timeout": timeout_s} if timeout_s else {})).get("StatusCode")

    def exit_state(self, container_id: str, exit_code: int | None) -> tuple[int | None, bool]:
        """(exit code, killed by the OOM killer) as the engine recorded them."""
        state = self.api.inspect_container(container_id)["State"]
        return state.get("ExitCode", exit_code), bool(state.get("OOMKilled"))

    def logs(self, container_id: str, stdout: bool = True, stderr: bool = True) -> str:
        return self.api.logs(container_id, stdout=stdout, stderr=stderr).decode(errors="replace")

    def stop(self, container_id: str, grace_s: int) -> None:
        self.api.stop(container_id, timeout=grace_s)

    def remove(self, container_id: str) -> None:
        self.api.remove_container(container_id, force=True)

    def remove_stopped(self, label: str, value: str) -> list[str]:
        """Remove the created, exited or dead containers labelled label=value; their ids."""
        left = self.api.containers(all=True, filters={"label": f"{label}={value}",
                                                      "status": ["created", "exited", "dead"]})
        for c in left or []:
            self.remove(c["Id"])
        return [c["Id"] for c in left or []]

    def run_to_end(self, s, timeout_s: float) -> tuple[int | None, str]:
        """Create, start and wait for a container of settings `s`; (exit code, its output). It is
        removed whatever happens."""
        container_id = self.create(s)
        try:
            self.start(container_id)
            return self.wait(container_id, timeout_s), self.logs(container_id)
        finally:
            self.remove(container_id)

    def run_command(self, image: str, command: list[str], role: str, timeout_s: float) -> tuple[int | None, str, str]:
        """A short container of `image` running `command` with no network and no entrypoint;
        (exit code, stdout, stderr). It is removed whatever happens."""
        container = self.api.create_container(image, command=command, entrypoint=[], network_disabled=True,
                                              labels={ROLE_LABEL: role})
        try:
            self.start(container)
            code = self.wait(container, timeout_s)
            return code, self.logs(container, stderr=False), self.logs(container, stdout=False)
        finally:
            self.remove(container)

    def stop_lease_containers(self, lease_id: str) -> list[str]:
        """Stop and remove the containers labelled with the lease and confirm none is left; their
        short ids. [] on a machine with no engine at all (nothing can run there under the lease);
        EngineError when an engine exists but did not answer or did not remove them. The lease
        manager calls it before it hands a dead lease's devices on."""
        if self._api is None and not configured():
            return []
        label = {"label": f"{LEASE_LABEL}={lease_id}"}
        try:
            found = self.api.containers(all=True, filters=label)
            for c in found:
                try:
                    self.remove(c["Id"])  # kill + remove: an orphan's work has no value
                except docker.errors.NotFound:
                    pass  # gone meanwhile
            left = self.api.containers(all=True, filters=label)
        except Exception as exc:
            raise EngineError(f"the Docker engine did not answer ({type(exc).__name__}: {str(exc)[:160]})") from None
        if left:
            raise EngineError(f"containers {[c['Id'][:12] for c in left]} are still there after removal")
        return [c["Id"][:12] for c in found]

    # -- images ---------------------------------------------------------------------------
    def inspect_image(self, ref: str) -> dict:
        """The engine's record of the image; ImageMissing, or EngineError when it did not answer."""
        try:
            return self.api.inspect_image(ref)
        except docker.errors.ImageNotFound:
            raise ImageMissing(f"image {ref} is not on the Docker engine") from None
        except Exception as exc:
            raise EngineError(f"Docker engine did not answer ({type(exc).__name__}: {str(exc)[:200]})") from None

    def has_image(self, ref: str) -> bool:
        """Whether the engine holds the image; one that does not answer is taken to have it (what
        then runs on it fails with its own reason)."""
        try:
            self.inspect_image(ref)
        except ImageMissing:
            return False
        except EngineError:
            return True
        return True

    def tag(self, image_id: str, repository: str, tag: str) -> None:
        self.api.tag(image_id, repository, tag)

    def images(self, repository: str) -> list[dict]:
        """[{"tags": [full references], "created": ISO time}] of a repository's images (the
        inspected time: sub-second, so tags built within one second still order)."""
        return [{"tags": list(img.get("RepoTags") or []), "created": self.api.inspect_image(img["Id"]).get("Created", "")}
                for img in self.api.images(name=repository)]
