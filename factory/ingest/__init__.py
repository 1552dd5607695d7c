"""Ingest: sources (files, directories, bytes, request bodies) read by the adapters and written to the store,
nothing counted and dropped (`sources`: what ingest takes and how a directory expands; `files`: open a source,
ingest its items, the per-source report; `lines`: JSON-lines readers in worker processes; `writer`: the store's
side; `identity`: one record per id across sources)."""
