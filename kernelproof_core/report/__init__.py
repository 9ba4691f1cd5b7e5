"""Report schema (JSON, the source of truth) and the Markdown rendering derived from it."""

from kernelproof_core.report.models import SCHEMA_VERSION, Report

__all__ = ["SCHEMA_VERSION", "Report"]
