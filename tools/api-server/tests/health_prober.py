"""Times GET URL (a new connection each) every 10 ms until a line arrives on stdin, then prints the times
in seconds on one line; a request that fails counts as at least 10 s. Run as a process of its own, so
that the load of the process that starts it does not skew what it measures:
    python health_prober.py http://127.0.0.1:PORT/health"""

import sys
import threading
import time
import urllib.request

FAILED_S = 10.0

stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.readline(), stop.set()), daemon=True).start()
times = []
while not stop.is_set():
    began = time.monotonic()
    try:
        urllib.request.urlopen(sys.argv[1], timeout=FAILED_S).read()
        times.append(time.monotonic() - began)
    except Exception:  # noqa: BLE001 - a failure is a time too
        times.append(max(FAILED_S, time.monotonic() - began))
    time.sleep(0.01)
print(" ".join(f"{t:.6f}" for t in times))
