"""Twinbuild import: draft a manifest from recipes that hard-code their pins."""
