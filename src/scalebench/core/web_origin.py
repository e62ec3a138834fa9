"""Web origins: the address users reach the service at, and the origin a browser's request came
from, compared the way browsers compare them (scheme, host, port; case and default ports
normalised). Standard library only: `make airflow`, compose's helper and the triage page share it."""
from __future__ import annotations

import ipaddress
import re
import socket
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}
ANY_ADDRESS = ("0.0.0.0", "::", "[::]")
LOCAL_NAMES = ("", "127.0.0.1", "localhost", "::1", "[::1]")
HOST_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,62}\.?)*$")  # a DNS name (an IP address is checked apart)


class AddressError(ValueError):
    """A configured address that is not one: the one-line message names the setting."""


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]` of an http(s) URL, lower case, the default port dropped; None when it
    is not one (no host, another scheme, a bad port, user info)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname or "@" in parts.netloc:
        return None
    host = parts.hostname.lower()  # urlsplit drops an IPv6 address's brackets: put them back
    host = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host}" + (f":{port}" if port is not None and port != DEFAULT_PORTS[scheme] else "")


def _host_for_url(host: str) -> str | None:
    """The host as a URL writes it (an IPv6 address in brackets); None when it is no address or name."""
    try:
        return f"[{host.strip('[]')}]" if ipaddress.ip_address(host.strip("[]")).version == 6 else host
    except ValueError:
        return host if HOST_NAME.match(host) and len(host) <= 253 else None


def machine_name() -> str:
    """This machine's name as colleagues reach it: its fully qualified name, or its host name where
    that resolves only to localhost (as /etc/hosts often makes it)."""
    fqdn = socket.getfqdn()
    return socket.gethostname() if fqdn.split(".")[0] in ("localhost", "") else fqdn


def public_url(base_url: str | None, bind: str | None, port: int) -> str:
    """The address the UI is reached at: SCALEBENCH_BASE_URL as given (http(s), a host, a port or
    path at most), else the SCALEBENCH_BIND address (this machine's name when it listens on every
    address), else localhost."""
    if base_url:
        origin = origin_of(base_url)
        parts = urlsplit(base_url.strip())
        if origin is None or parts.query or parts.fragment:
            raise AddressError(f"SCALEBENCH_BASE_URL: expected http(s)://host[:port][/path], got {base_url!r}")
        return origin + parts.path.rstrip("/")
    if not bind or bind.strip() in LOCAL_NAMES:
        return f"http://localhost:{port}"
    host = _host_for_url(machine_name() if bind.strip() in ANY_ADDRESS else bind.strip())
    if host is None:
        raise AddressError(f"SCALEBENCH_BIND: expected an address to listen on (e.g. 0.0.0.0), got {bind!r}")
    return f"http://{host}:{port}"


def internal_url(bind: str | None, port: int) -> str:
    """Where this machine's own processes reach the api-server: localhost unless it listens on one
    other address only."""
    host = _host_for_url(bind.strip()) if bind and bind.strip() not in LOCAL_NAMES + ANY_ADDRESS else None
    return f"http://{host or 'localhost'}:{port}"


def trusted_origins(listed: str | None) -> list[str]:
    """SCALEBENCH_TRUSTED_ORIGINS (comma-separated origins a proxy in front serves the UI at);
    AddressError names an entry that is not an origin."""
    out = []
    for item in (listed or "").split(","):
        if not item.strip():
            continue
        origin = origin_of(item)
        if origin is None or urlsplit(item.strip()).path not in ("", "/"):
            raise AddressError(f"SCALEBENCH_TRUSTED_ORIGINS: expected origins like https://host[:port], got {item!r}")
        out.append(origin)
    return out


if __name__ == "__main__":  # deploy/stack.sh: the compose stack's base_url from .env's settings
    import sys

    try:
        trusted_origins(sys.argv[4] if len(sys.argv) > 4 else None)
        print(public_url(sys.argv[1] or None, sys.argv[2] or None, int(sys.argv[3] or 8080)))
    except (AddressError, ValueError, IndexError) as exc:
        sys.exit(f"stack.sh: {exc}" if isinstance(exc, AddressError) else
                 "usage: web_origin.py BASE_URL BIND PORT [TRUSTED_ORIGINS] (AIRFLOW_PORT: a number)")
