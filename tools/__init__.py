"""Tools that work on a checkout of twinbuild and are not part of the installed package."""
