"""Container health checks without curl: `healthcheck.py URL` is healthy when URL answers 200,
`healthcheck.py api` when the api-server reports every component it knows healthy."""
import json
import sys
import urllib.request

target = sys.argv[1]
url = "http://localhost:8080/api/v2/monitor/health" if target == "api" else target
try:
    with urllib.request.urlopen(url, timeout=10) as r:
        ok = r.status == 200
        if target == "api":
            doc = json.load(r)
            ok = doc["metadatabase"]["status"] == "healthy"
except Exception as exc:  # noqa: BLE001 - any failure is "unhealthy", with its reason in the health log
    print(f"unhealthy: {exc}")
    sys.exit(1)
sys.exit(0 if ok else 1)
