"""`agent-factory show`: one unit's findings (`unit` builds them, `read` fetches them, `text` prints them)."""
