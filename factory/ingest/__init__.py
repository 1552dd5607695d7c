"""Ingest: sources (files, directories, bytes) read by the adapters and written to the store, nothing counted
and dropped (`files`: paths and the per-file report; `lines`: JSON-lines readers; `writer`: the store's side;
`identity`: one record per id across files)."""
