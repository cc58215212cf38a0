#!/usr/bin/env python3
"""StepSync API server: the entry point. The server is the `stepserver` package beside this file.

Run with the venv's python (tools/api-server/run does that):
  main.py [--host 127.0.0.1] [--port 8000] [--data DIR | --database URL] [--single-user]
  main.py tokens create --user NAME | list | revoke TOKEN_ID   [--data DIR | --database URL]
See README.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from stepserver.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
