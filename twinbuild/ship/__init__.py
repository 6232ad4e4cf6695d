"""Shipping images: push each built image by digest, then release a digest under a tag only with
its signed GPU evidence stored next to it in the registry."""
