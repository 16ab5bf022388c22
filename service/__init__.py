"""Entry points: the `eok` CLI and the HTTP API. Thin: they translate, the other packages do the work."""
