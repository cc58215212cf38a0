"""An HTTP proxy in front of the API server that misbehaves on cue: answers
500 without forwarding, or forwards and then answers too late (the client times
out although the server stored the batch: the retry must not duplicate it)."""
import http.client
import http.server
import threading
import time


class FaultProxy:
    def __init__(self, target_port):
        self.target_port = target_port
        self.plan = []          # actions for the next POSTs: "500", ("late", seconds), "pass"
        self.seen = []          # what each POST got
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _forward(self, body):
                connection = http.client.HTTPConnection("127.0.0.1", proxy.target_port, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                connection.request(self.command, self.path, body=body, headers=headers)
                response = connection.getresponse()
                data = response.read()
                connection.close()
                return response.status, data

            def _answer(self, status, data):
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up first: that is the point of "late"

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                action = "pass"
                if self.command == "POST":
                    with proxy.lock:
                        action = proxy.plan.pop(0) if proxy.plan else "pass"
                        proxy.seen.append(action)
                if action == "500":
                    self._answer(500, b'{"error":"injected failure"}')
                    return
                status, data = self._forward(body)
                if isinstance(action, tuple) and action[0] == "late":
                    time.sleep(action[1])
                self._answer(status, data)

            do_GET = do_POST = do_DELETE = _handle

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()
