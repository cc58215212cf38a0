"""One module per resource; each has routes(context) -> [(path, endpoint, methods)]."""
