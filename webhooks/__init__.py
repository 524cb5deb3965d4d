"""Webhooks: a JSON POST, signed, to each configured URL when a verdict is filed or decided."""
