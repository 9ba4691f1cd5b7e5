"""The service's database layer: SQLAlchemy 2 models, sessions, migrations and the repositories that move
state.

Shared by the API, the Celery worker and the embedded service. Portable across PostgreSQL (production, tests)
and SQLite (the embedded default); tables and views are created only by the Alembic migrations in
`migrations/`.
"""
