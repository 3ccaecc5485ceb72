"""refswitch package."""
