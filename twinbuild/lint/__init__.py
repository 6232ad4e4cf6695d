"""The pin-symmetry lint and the finding every check prints."""
