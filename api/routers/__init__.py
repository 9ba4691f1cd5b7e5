"""Routers of the API, one module per resource."""
