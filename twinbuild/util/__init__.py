"""Small shared helpers: the atomic writer and the git runner."""
