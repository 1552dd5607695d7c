"""K: knowledge packs."""
