"""The HTTP API (FastAPI). Build it with `service.api.app.create_app()`; `eok serve` runs it."""
