"""The KernelProof HTTP API (FastAPI). Build it with `api.app.create_app(settings)`; it never runs candidate
code."""
