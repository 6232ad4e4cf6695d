"""The Dockerfile pin scanner the lint and import share."""
