"""Views of the store's findings for people: `findings` (what every view reads), `summary` (the terminal),
`show` (one unit), `export` (tables), `report` (the HTML page). Views depend on the findings, never the reverse."""
