"""Building images: the build, its inputs hash, wheelhouse, progress, BuildKit trace, plan, bake."""
