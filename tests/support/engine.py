"""The Docker engine and the browser the heavier tests need; CI (CI=true) fails where a user's machine skips."""
import os
import shutil
import subprocess
import time

import pytest


POSTGRES_IMAGE = os.environ.get("SCALEBENCH_TEST_POSTGRES_IMAGE", "scalebench/postgres:15")


def start_postgres(name: str, password: str = "test-only-password") -> str:
    """A PostgreSQL container of the deployment's image on a free local port, ready; its server URL."""
    port = free_port()
    subprocess.run(["docker", "run", "-d", "--name", name, "-e", f"POSTGRES_PASSWORD={password}",
                    "-p", f"127.0.0.1:{port}:5432", POSTGRES_IMAGE], check=True, capture_output=True)
    deadline = time.monotonic() + 90
    while subprocess.run(["docker", "exec", name, "pg_isready", "-h", "127.0.0.1", "-U", "postgres"],
                         capture_output=True).returncode != 0:
        assert time.monotonic() < deadline, "PostgreSQL did not start within 90 s"
        time.sleep(0.5)
    return f"postgresql+psycopg2://postgres:{password}@127.0.0.1:{port}"


def docker_ready(image: str = "scalebench/tensorflow:cpu") -> bool:
    if not shutil.which("docker"):
        return False
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True).returncode == 0


def requires_image(image: str, how: str = "make images"):
    """Skip without the engine or `image` on a user's machine; under CI=true the test runs and fails."""
    return pytest.mark.skipif(not docker_ready(image) and os.environ.get("CI") != "true",
                              reason=f"needs a Docker engine and {image} ({how})")


requires_docker = requires_image("scalebench/tensorflow:cpu")


chromium = pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("chromedriver")) and os.environ.get("CI") != "true",
                              reason="needs Debian's chromium and chromium-driver (make test installs them)")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
