"""The StepSync API server."""

# The version `--version` prints: the command-line tools' (tools/common/ToolVersion.swift; a test keeps them equal).
__version__ = "1.0.0"
# How people start it (the name its messages and help give): the script that makes the venv and runs main.py.
COMMAND = "tools/api-server/run"
