# mypy: ignore-errors
# The honest candidate as is.
