"""Every route of the plugin's app, read from the app itself (so a new route is walked without
editing a list): its path and query parameters, and a URL with each filled in."""
from __future__ import annotations

from urllib.parse import quote, urlencode

# what a request may put in each parameter, for the walks: the values a hostile link would carry
HOSTILE = {
    "script": "<script>alert(1)</script>",
    "quotes": "\"'><img src=x onerror=alert(1)>",
    "dotdot": "../../../etc/passwd",
    "10k": "x" * 10_000,
    "nul": "a\x00b",
    "non-latin-1": "ночь漢字€",
    "unicode digits": "\u0662\u0660\u0662\u0666-11-28",
    "huge int": str(10**30),
}


def routes(app) -> list[dict]:
    """[{name, path, path_params, query_params: {name: required}}] of every API route."""
    from fastapi.routing import APIRoute

    out = []
    for r in app.routes:
        if isinstance(r, APIRoute):
            out.append({"name": r.name, "path": r.path, "path_params": [p.name for p in r.dependant.path_params],
                        "query_params": {p.name: p.field_info.is_required() for p in r.dependant.query_params}})
    return out


def url(route: dict, values: dict, hostile: tuple[str, str] | None = None) -> str:
    """The route's URL with `values` (by parameter name, or by "route name:parameter" for one route),
    and optionally one parameter set to a hostile value; optional query parameters are left out
    unless they are the hostile one."""
    def value(name: str) -> str:
        if hostile and hostile[0] == name:
            return hostile[1]
        return values.get(f"{route['name']}:{name}", values.get(name))

    path = route["path"]
    for name in route["path_params"]:
        path = path.replace("{" + name + "}", quote(value(name), safe=""))
    query = {n: value(n) for n, required in route["query_params"].items() if required or (hostile and hostile[0] == n)}
    return path + ("?" + urlencode(query) if query else "")
