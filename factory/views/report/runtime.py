"""The plotting runtime the report inlines: vega, vega-lite and vega-embed bundled into one script by
vl-convert (which ships them; nothing is downloaded). Bundling takes several seconds, so the bundle is kept in
a cache file named after the vl-convert version, and rebuilt when that file is missing or unreadable."""

from __future__ import annotations

from pathlib import Path


def bundle_version() -> str:
    """The vl-convert version, which fixes the vega, vega-lite and vega-embed versions it bundles."""
    from importlib.metadata import version

    return version("vl-convert-python")


def vega_bundle(*, cache_dir: Path | None = None) -> str:
    """The JavaScript defining `vegaEmbed`, `vega` and `vegaLite` on `window`, from the cache in `cache_dir`
    when there (None: built afresh, not cached)."""
    path = None if cache_dir is None else cache_dir / f"vega-bundle-{bundle_version()}.js"
    if path is not None:
        try:
            return path.read_text(encoding="utf-8")
        except OSError:
            pass
    import vl_convert

    source: str = vl_convert.javascript_bundle()  # type: ignore[call-arg]  # the stub omits the default
    if path is None:
        return source
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(source, encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass  # a read-only place: the bundle is rebuilt next time, the report is unaffected
    return source
