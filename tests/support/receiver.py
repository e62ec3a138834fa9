"""A local HTTP endpoint for the notifier tests."""
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer


class Receiver:
    """A local HTTP endpoint that keeps every POSTed body."""

    def __init__(self):
        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                received.append({"path": self.path, "type": self.headers.get("Content-Type"), "body": json.loads(body)})
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
